// First-call kernel choices that outlive the process (Options.cache). At a call signature's
// first call a oneDNN kernel times its path against eager's ATen ops and keeps the faster
// (fused_kernel.h); that measurement is most of a warm process's first call on a large model.
// A ChoiceCache is one file per compiled partition, named by the key of everything the choice
// depends on (the graph, the input metas, the options, fxcpp/torch/oneDNN builds, this host's
// ISA and thread count; backend/choice_cache.py makes it). A warm start reads each node's
// choice from it instead of measuring again.
//
// A choice only picks between two paths that give the same result, so an entry can cost
// speed, never correctness. Still, a file is trusted only whole: its first line must name the
// key, and every other line must parse ("<choice> <node> <hex signature> <ours us> <theirs us>",
// appended as choices are made; the two times are what the choice was made from, NaN where a
// kernel did not give them). Anything else (truncated, corrupt, another key) is reported by warning(), and
// the file is started afresh at the first choice made. I/O errors only disable the cache;
// nothing here throws.
#pragma once
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>

namespace fxcpp {

class ChoiceCache {
 public:
  ChoiceCache(std::string path, std::string key);
  // What a node's call signature (raw bytes) measured: the path it chose (0 or 1) and the two
  // times (us) it chose from, NaN if not recorded.
  struct Measured {
    int choice = -1;
    double ours_us = std::numeric_limits<double>::quiet_NaN(), theirs_us = std::numeric_limits<double>::quiet_NaN();
  };
  // The choice recorded for a node's call signature, or -1.
  int lookup(const std::string& node, const std::string& signature) { return lookup_measured(node, signature).choice; }
  Measured lookup_measured(const std::string& node, const std::string& signature);
  void record(const std::string& node, const std::string& signature, const Measured& m);

  const std::string& path() const { return path_; }
  const std::string& warning() const { return warning_; }  // empty unless a file was ignored
  int loaded() const { return loaded_; }
  int hits() const;
  int recorded() const;

 private:
  void load();
  void start_afresh();
  bool append(const std::string& text);

  const std::string path_, key_;
  std::string warning_;
  int loaded_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Measured> choices_;  // node + '\0' + hex signature
  int hits_ = 0, recorded_ = 0;
  bool writable_ = true;
  bool file_ok_ = false;  // the file on disk holds our header (else the first record rewrites it)
};

}  // namespace fxcpp
