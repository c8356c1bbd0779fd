// tanh_exp, exp_u10 and a division alone in a loop (one vector, or a VecPair in lockstep), outside the interpreter:
// the floor the fused tanh is compared with. From the repository root, with torch's headers (TI):
//   g++ -O3 -std=c++17 -mavx2 -mfma -mf16c -DCPU_CAPABILITY=AVX2 -DCPU_CAPABILITY_AVX2 -I csrc -I $TI \
//       benchmarks/results/inline-pair-lambdas/standalone_tanh.cc -o /tmp/tb && /tmp/tb
#include "runtime/cpu/tanh_exp.h"
#include "runtime/cpu/vec_pair.h"
#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
using namespace fxcpp::cpu;
using Vec = at::vec::Vectorized<float>;
template <class F> double bench(const char* name, F f, std::vector<float>& x, std::vector<float>& y) {
  double best = 1e9;
  for (int r = 0; r < 20; r++) {
    auto t = std::chrono::steady_clock::now();
    f(x.data(), y.data(), (long)x.size());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    best = std::min(best, s);
  }
  printf("%-10s %.3f ns/elt  %.2f cyc/elt\n", name, best / x.size() * 1e9, best / x.size() * 3.2e9);
  return best;
}
int main() {
  long n = 1 << 16;
  std::vector<float> x(n), y(n);
  std::mt19937 g(1); std::normal_distribution<float> d(0, 3);
  for (auto& v : x) v = d(g);
  bench("tanh1", [](const float* a, float* b, long n) { for (long i = 0; i < n; i += 8) tanh_exp(Vec::loadu(a + i)).store(b + i); }, x, y);
  bench("tanh2", [](const float* a, float* b, long n) { for (long i = 0; i < n; i += 16) { VecPair p{Vec::loadu(a + i), Vec::loadu(a + i + 8)}; auto r = tanh_exp(p); r.a.store(b + i); r.b.store(b + i + 8);} }, x, y);
  bench("exp1", [](const float* a, float* b, long n) { for (long i = 0; i < n; i += 8) exp_u10(Vec::loadu(a + i)).store(b + i); }, x, y);
  bench("div", [](const float* a, float* b, long n) { for (long i = 0; i < n; i += 8) (Vec(1.f) / Vec::loadu(a + i)).store(b + i); }, x, y);
}
