// Upper bound for the 4-op chain (relu(x*2+1)-0.5)*x over 64 MiB: one loop per vector vs block phases.
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define N (1L << 24)
static float *x, *y;
static void fused(int nt) {
#pragma omp parallel for num_threads(nt) schedule(static)
  for (long i = 0; i < N; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    __m512 r = _mm512_fmadd_ps(v, _mm512_set1_ps(2), _mm512_set1_ps(1));
    r = _mm512_max_ps(r, _mm512_setzero_ps());
    r = _mm512_mul_ps(_mm512_sub_ps(r, _mm512_set1_ps(0.5f)), v);
    _mm512_stream_ps(y + i, r);
  }
}
static void copyk(int nt) {
#pragma omp parallel for num_threads(nt) schedule(static)
  for (long i = 0; i < N; i += 16) _mm512_stream_ps(y + i, _mm512_loadu_ps(x + i));
}
static int BLK = 1024, PF = 0;
static void blocks(int nt) {
#pragma omp parallel num_threads(nt)
  {
    float* r0 = aligned_alloc(64, 4 * BLK * 4);
    float* r1 = r0 + BLK;
#pragma omp for schedule(static)
    for (long b = 0; b < N / BLK; ++b) {
      const float* a = x + b * BLK;
      float* d = y + b * BLK;
      if (PF) for (long k = 0; k < BLK; k += 16) { _mm_prefetch((const char*)(a + PF * BLK + k), _MM_HINT_T1); }
      for (long i = 0; i < BLK; i += 16) _mm512_storeu_ps(r0 + i, _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_set1_ps(2), _mm512_set1_ps(1)));
      for (long i = 0; i < BLK; i += 16) _mm512_storeu_ps(r1 + i, _mm512_max_ps(_mm512_loadu_ps(r0 + i), _mm512_setzero_ps()));
      for (long i = 0; i < BLK; i += 16) _mm512_stream_ps(d + i, _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(r1 + i), _mm512_set1_ps(0.5f)), _mm512_loadu_ps(a + i)));
    }
    free(r0);
  }
}
static double bench(void (*f)(int), int nt) {
  f(nt); double best = 1e9;
  for (int r = 0; r < 20; ++r) { double t = now(); f(nt); t = now() - t; if (t < best) best = t; }
  return best * 1e3;
}
int main(int argc, char** argv) {
  x = aligned_alloc(64, N * 4); y = aligned_alloc(64, N * 4);
  for (long i = 0; i < N; ++i) x[i] = (float)(i % 1000) / 500.f - 1.f, y[i] = 0;
  for (int nt = 1; nt <= 2; ++nt) {
    printf("threads %d  copy %.2f ms  fused %.2f ms", nt, bench(copyk, nt), bench(fused, nt));
    int blks[] = {128, 256, 512, 1024};
    for (int j = 0; j < 4; ++j) { BLK = blks[j]; PF = 0; printf("  blk%d %.2f", BLK, bench(blocks, nt)); PF = 1; printf(" pf1 %.2f", bench(blocks, nt)); }
    printf("\n");
  }
}
