// Peak FMA throughput of this CPU: independent vector FMA chains per thread,
// one pinned thread per core. Prints JSON. Usage: fma_peak [threads] [seconds]
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>
#include "pin.h"

// 12 chains > latency (4-6 cycles) x issue width, so the FMA ports never wait.
constexpr int kChains = 12;
constexpr long kInner = 1 << 16;
static volatile float g_sink;  // keeps the accumulators alive

#if defined(__AVX512F__)
static const char* kIsa = "avx512f";
constexpr int kLanes = 16;
static double fp32_kernel(long iters, float seed) {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(seed + j);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);  // bounded: no inf/denormals
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  __m512 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm512_add_ps(s, acc[j]);
  g_sink = _mm512_reduce_add_ps(s);
  return 2.0 * kLanes * kChains * iters;
}
#elif defined(__AVX2__) && defined(__FMA__)
static const char* kIsa = "avx2_fma";
constexpr int kLanes = 8;
static double fp32_kernel(long iters, float seed) {
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(seed + j);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  float out[8];
  __m256 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm256_add_ps(s, acc[j]);
  _mm256_storeu_ps(out, s);
  g_sink = out[0];
  return 2.0 * kLanes * kChains * iters;
}
#else
static const char* kIsa = "scalar";
static double fp32_kernel(long iters, float seed) {
  float acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = seed + j;
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = acc[j] * 0.999999f + 1e-6f;
  g_sink = acc[0];
  return 2.0 * kChains * iters;
}
#endif

#if defined(__AVX512BF16__)
// vdpbf16ps: 32 bf16 pairs per zmm, each pair = 1 multiply + 1 add = 2 flops.
static double bf16_kernel(long iters, float seed) {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(seed + j);
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, a);
  __m512 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm512_add_ps(s, acc[j]);
  g_sink = _mm512_reduce_add_ps(s);
  return 2.0 * 32 * kChains * iters;
}
#endif

using Kernel = double (*)(long, float);


// Runs `kernel` on n pinned threads for about `seconds`, in 5 timed rounds; returns the best
// aggregate GFLOP/s. All threads start together and the round ends when the slowest finishes.
static double measure(Kernel kernel, int n, double seconds) {
  using clk = std::chrono::steady_clock;
  // Calibrate the iteration count on this thread so one round lasts ~seconds/5.
  long iters = kInner;
  for (;;) {
    auto t0 = clk::now();
    kernel(iters, 1.0f);
    double dt = std::chrono::duration<double>(clk::now() - t0).count();
    if (dt > 0.02) { iters = std::max<long>(kInner, long(iters * (seconds / 5) / dt)); break; }
    iters *= 4;
  }
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    // This thread is thread 0, so no extra thread competes for a core while the others run.
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<double> flops(n);
    std::vector<std::thread> pool;
    for (int t = 1; t < n; ++t)
      pool.emplace_back([&, t] {
        pin(t);
        ready.fetch_add(1);
        while (!go.load()) {}
        flops[t] = kernel(iters, 1.0f + t);
      });
    pin(0);
    while (ready.load() < n - 1) {}
    auto t0 = clk::now();
    go.store(true);
    flops[0] = kernel(iters, 1.0f);
    for (auto& th : pool) th.join();
    double dt = std::chrono::duration<double>(clk::now() - t0).count();
    double total = 0;
    for (double f : flops) total += f;
    best = std::max(best, total / dt / 1e9);
  }
  return best;
}

static std::string report(Kernel kernel, int n, double seconds) {
  double one = measure(kernel, 1, seconds);
  double all = measure(kernel, n, seconds);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "{\"gflops_1core\": %.2f, \"gflops_total\": %.2f, \"gflops_per_core\": %.2f, \"threads\": %d}",
                one, all, all / n, n);
  return buf;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : int(std::thread::hardware_concurrency());
  double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  if (n < 1) n = 1;
  std::printf("{\"isa\": \"%s\", \"chains\": %d, \"threads\": %d,\n \"fp32\": %s", kIsa, kChains, n,
              report(fp32_kernel, n, seconds).c_str());
#if defined(__AVX512BF16__)
  std::printf(",\n \"bf16\": %s", report(bf16_kernel, n, seconds).c_str());
  std::printf(",\n \"bf16_flops_convention\": \"vdpbf16ps: 2 flops per bf16 pair (32 pairs per zmm)\"");
#else
  std::printf(",\n \"bf16\": null");
#endif
  std::printf("}\n");
  return 0;
}
