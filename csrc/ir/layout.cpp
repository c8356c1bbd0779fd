#include "ir/layout.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace fxcpp {

namespace {

// A size or stride as coefficient * product of symbols ("2*s0*s1" -> {2, {s0, s1}}).
struct Monomial {
  int64_t coef = 1;
  std::vector<std::string> syms;  // sorted
  bool operator==(const Monomial& o) const { return coef == o.coef && syms == o.syms; }
  Monomial times(const Monomial& o) const {
    Monomial r{coef * o.coef, syms};
    r.syms.insert(r.syms.end(), o.syms.begin(), o.syms.end());
    std::sort(r.syms.begin(), r.syms.end());
    return r;
  }
};

std::optional<Monomial> monomial(const Dim& d) {
  if (d.is_unknown()) return std::nullopt;
  if (d.is_static()) return Monomial{d.value, {}};
  Monomial m;
  size_t i = 0;
  const std::string& s = d.sym;
  while (i <= s.size()) {
    const size_t j = std::min(s.find('*', i), s.size());
    const std::string f = s.substr(i, j - i);
    if (f.empty()) return std::nullopt;  // "**" (a power) or a stray '*'
    if (std::all_of(f.begin(), f.end(), [](unsigned char c) { return std::isdigit(c); })) {
      m.coef *= std::stoll(f);
    } else if (std::isalpha(static_cast<unsigned char>(f[0])) &&
               std::all_of(f.begin(), f.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; })) {
      m.syms.push_back(f);
    } else {
      return std::nullopt;  // a sum, a floor division, ...: not a product
    }
    i = j + 1;
  }
  std::sort(m.syms.begin(), m.syms.end());
  return m;
}

}  // namespace

std::optional<std::vector<int>> dense_dim_order(const TensorMeta& m) {
  const size_t n = m.sizes.size();
  if (m.strides.size() != n) return std::nullopt;
  std::vector<int> left;  // dims longer than 1, not yet placed
  std::vector<Monomial> size(n), stride(n);
  for (size_t d = 0; d < n; ++d) {
    if (m.sizes[d] == Dim::of(1)) continue;
    if (m.sizes[d] == Dim::of(0)) return std::nullopt;
    auto z = monomial(m.sizes[d]), s = monomial(m.strides[d]);
    if (!z || !s) return std::nullopt;
    size[d] = *z;
    stride[d] = *s;
    left.push_back(static_cast<int>(d));
  }
  // Dense: the innermost dim has stride 1, each next one the product of the sizes inside it.
  std::vector<int> order;
  Monomial expect;
  while (!left.empty()) {
    auto it = std::find_if(left.begin(), left.end(), [&](int d) { return stride[d] == expect; });
    if (it == left.end()) return std::nullopt;
    if (std::find_if(it + 1, left.end(), [&](int d) { return stride[d] == expect; }) != left.end())
      return std::nullopt;  // two dims at one stride: overlapping
    order.push_back(*it);
    expect = expect.times(size[*it]);
    left.erase(it);
  }
  return order;
}

bool traced_channels_last(const TensorMeta& m) {
  const int n = static_cast<int>(m.sizes.size());
  if (n < 3) return false;
  const auto order = dense_dim_order(m);
  if (!order) return false;
  std::vector<int> cl = {1}, plain;  // innermost first
  for (int d = n - 1; d >= 2; --d) cl.push_back(d);
  cl.push_back(0);
  for (int d = n - 1; d >= 0; --d) plain.push_back(d);
  auto longer_than_1 = [&](std::vector<int> dims) {
    dims.erase(std::remove_if(dims.begin(), dims.end(), [&](int d) { return m.sizes[d] == Dim::of(1); }), dims.end());
    return dims;
  };
  return *order == longer_than_1(cl) && *order != longer_than_1(plain);
}

}  // namespace fxcpp
