#include "runtime/choice_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace fxcpp {

namespace {

constexpr const char* kMagic = "fxcpp-choices 2 ";

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out += digits[c >> 4], out += digits[c & 15];
  return out;
}

// A time as written: "nan", or a finite value >= 0.
bool parse_time(const std::string& s, double* out) {
  if (s == "nan") return *out = std::numeric_limits<double>::quiet_NaN(), true;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || v < 0) return false;
  return *out = v, true;
}

std::string time_text(double v) {
  if (!std::isfinite(v) || v < 0) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
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
    Measured m;
    std::string node, sig, ours, theirs, extra;
    if (!(fields >> m.choice >> node >> sig >> ours >> theirs) || (fields >> extra) || (m.choice != 0 && m.choice != 1) ||
        sig.size() % 2 != 0 || sig.find_first_not_of("0123456789abcdef") != std::string::npos ||
        !parse_time(ours, &m.ours_us) || !parse_time(theirs, &m.theirs_us))
      return fail("a line does not parse");
    choices_[node + '\0' + sig] = m;
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

ChoiceCache::Measured ChoiceCache::lookup_measured(const std::string& node, const std::string& signature) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = choices_.find(node + '\0' + hex(signature));
  if (it == choices_.end()) return {};
  ++hits_;
  return it->second;
}

void ChoiceCache::record(const std::string& node, const std::string& signature, const Measured& m) {
  if (!plain_token(node) || (m.choice != 0 && m.choice != 1)) return;
  const std::string sig = hex(signature);
  std::lock_guard<std::mutex> lk(mu_);
  auto [it, inserted] = choices_.emplace(node + '\0' + sig, m);
  if (!inserted && it->second.choice == m.choice) return;
  it->second = m;
  if (writable_ && !file_ok_) start_afresh();
  if (!writable_) return;
  if (append(std::to_string(m.choice) + " " + node + " " + sig + " " + time_text(m.ours_us) + " " + time_text(m.theirs_us) + "\n"))
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
