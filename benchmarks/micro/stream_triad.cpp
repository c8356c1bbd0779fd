// STREAM-style triad a[i] = b[i] + s*c[i] on doubles, one pinned thread per core, best of N.
// Prints JSON. Usage: stream_triad [threads] [MiB per array] [reps]
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#include "pin.h"

// Spinning sense-reversing barrier: std::barrier (libstdc++ 12) gave impossibly short times here.
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n), left_(n) {}
  void wait() {
    const bool sense = !sense_.load(std::memory_order_relaxed);
    if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      left_.store(n_, std::memory_order_relaxed);
      sense_.store(sense, std::memory_order_release);
    } else {
      while (sense_.load(std::memory_order_acquire) != sense) {}
    }
  }

 private:
  const int n_;
  std::atomic<int> left_;
  std::atomic<bool> sense_{false};
};


int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : int(std::thread::hardware_concurrency());
  long mib = argc > 2 ? std::atol(argv[2]) : 64;
  int reps = argc > 3 ? std::atoi(argv[3]) : 20;
  if (n < 1) n = 1;
  const long len = mib * (1L << 20) / sizeof(double);
  // Not touched here: each thread first-touches its own slice (right NUMA node, no page faults
  // inside the timed loop).
  double* a = static_cast<double*>(std::aligned_alloc(64, len * sizeof(double)));
  double* b = static_cast<double*>(std::aligned_alloc(64, len * sizeof(double)));
  double* c = static_cast<double*>(std::aligned_alloc(64, len * sizeof(double)));
  const double s = 3.0;
  SpinBarrier sync(n);
  std::vector<double> times(reps);
  // Thread 0 is this thread; it takes the times, so no extra thread competes for a core.
  auto work = [&](int t) {
    using clk = std::chrono::steady_clock;
    pin(t);
    const long lo = len * t / n, hi = len * (t + 1) / n;
    for (long i = lo; i < hi; ++i) a[i] = 0.0, b[i] = 1.0, c[i] = 2.0;
    for (int r = 0; r < reps; ++r) {
      sync.wait();  // start
      auto t0 = clk::now();
#pragma GCC ivdep
      for (long i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
      sync.wait();  // end: the slowest thread decides the time
      if (t == 0) times[r] = std::chrono::duration<double>(clk::now() - t0).count();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  bool ok = true;  // check the result so the loop cannot be dropped
  for (long i = 0; i < len; i += 4096) ok &= a[i] == 7.0;
  std::sort(times.begin(), times.end());
  const double bytes = 3.0 * len * sizeof(double);
  std::printf(
      "{\"threads\": %d, \"array_mib\": %ld, \"dtype\": \"float64\", \"reps\": %d, \"correct\": %s,\n"
      " \"gbps_best\": %.2f, \"gbps_median\": %.2f, \"gbps_best_with_write_allocate\": %.2f,\n"
      " \"convention\": \"STREAM: 3 arrays x bytes per iteration (read b, read c, write a); the "
      "write-allocate read of a is not counted (gbps_best_with_write_allocate counts 4 arrays)\"}\n",
      n, mib, reps, ok ? "true" : "false", bytes / times.front() / 1e9, bytes / times[times.size() / 2] / 1e9,
      4.0 / 3.0 * bytes / times.front() / 1e9);
  std::free(a), std::free(b), std::free(c);
  return ok ? 0 : 1;
}
