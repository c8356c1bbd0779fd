// Shared by the micro-benchmark programs: pin the calling thread to the slot-th CPU it may run on.
#pragma once
#include <pthread.h>
#include <sched.h>

inline void pin(int slot) {
  // The CPUs the process may use, read once before any thread is pinned: a thread started
  // after pin(0) inherits a one-CPU mask, and reading its own mask would pin it there too.
  static const cpu_set_t allowed = [] {
    cpu_set_t s;
    CPU_ZERO(&s);
    if (sched_getaffinity(0, sizeof(s), &s) != 0) CPU_SET(0, &s);
    return s;
  }();
  int seen = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &allowed)) continue;
    if (seen++ == slot) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      return;
    }
  }
}
