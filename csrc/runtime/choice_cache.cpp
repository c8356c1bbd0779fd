#include "runtime/choice_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace fxcpp {

namespace {

constexpr const char* kMagic = "fxcpp-choices 1 ";

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out += digits[c >> 4], out += digits[c & 15];
  return out;
}

bool plain_token(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\0') return false;
  return true;
}

}  // namespace

ChoiceCache::ChoiceCache(std::string path, std::string key) : path_(std::move(path)), key_(std::move(key)) {
  if (!plain_token(key_)) {
    writable_ = false;
    warning_ = "the cache key is not one word; the choice cache is off";
    return;
  }
  load();
}

void ChoiceCache::load() {
  std::ifstream f(path_, std::ios::binary);
  if (!f) return;  // no file yet: made at the first choice (a graph without oneDNN nodes makes none)
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  auto fail = [&](const std::string& why) {
    choices_.clear();
    warning_ = "ignored the choice cache file " + path_ + " (" + why + "); measuring again";
  };  // the file is started afresh at the first choice
  const std::string header = kMagic + key_ + "\n";
  if (text.compare(0, header.size(), header) != 0) return fail("not written for this graph, build and host");
  if (text.back() != '\n') return fail("truncated");
  std::istringstream lines(text.substr(header.size()));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    int choice = -1;
    std::string node, sig, extra;
    if (!(fields >> choice >> node >> sig) || (fields >> extra) || (choice != 0 && choice != 1) ||
        sig.size() % 2 != 0 || sig.find_first_not_of("0123456789abcdef") != std::string::npos)
      return fail("a line does not parse");
    choices_[node + '\0' + sig] = choice;
  }
  loaded_ = static_cast<int>(choices_.size());
  file_ok_ = true;
}

void ChoiceCache::start_afresh() {
  // Written beside, then renamed over: a reader never sees half a header.
  const std::string tmp = path_ + ".tmp" + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  const std::string header = kMagic + key_ + "\n";
  const bool ok = f && std::fwrite(header.data(), 1, header.size(), f) == header.size();
  if (f) std::fclose(f);
  if (!ok || std::rename(tmp.c_str(), path_.c_str()) != 0) {
    std::remove(tmp.c_str());
    writable_ = false;
  }
  file_ok_ = writable_;
}

bool ChoiceCache::append(const std::string& text) {
  // One write() of one short line with O_APPEND: processes sharing the file never interleave it.
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

int ChoiceCache::lookup(const std::string& node, const std::string& signature) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = choices_.find(node + '\0' + hex(signature));
  if (it == choices_.end()) return -1;
  ++hits_;
  return it->second;
}

void ChoiceCache::record(const std::string& node, const std::string& signature, int choice) {
  if (!plain_token(node) || (choice != 0 && choice != 1)) return;
  const std::string sig = hex(signature);
  std::lock_guard<std::mutex> lk(mu_);
  auto [it, inserted] = choices_.emplace(node + '\0' + sig, choice);
  if (!inserted && it->second == choice) return;
  it->second = choice;
  if (writable_ && !file_ok_) start_afresh();
  if (!writable_) return;
  if (append(std::to_string(choice) + " " + node + " " + sig + "\n"))
    ++recorded_;
  else
    writable_ = false;
}

int ChoiceCache::hits() const {
  std::lock_guard<std::mutex> lk(mu_);
  return hits_;
}

int ChoiceCache::recorded() const {
  std::lock_guard<std::mutex> lk(mu_);
  return recorded_;
}

}  // namespace fxcpp
