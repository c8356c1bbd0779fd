// Linear y[M,N] = x[M,K] W[N,K]^T on oneDNN 3.2: weight in place vs packed vs operands swapped.
#include <oneapi/dnnl/dnnl.hpp>
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cstring>
using namespace dnnl;
using dt = memory::data_type;
static engine eng(engine::kind::cpu, 0);
static stream strm(eng);
double time_us(primitive& p, std::unordered_map<int, memory>& args, int reps) {
  for (int i = 0; i < 5; ++i) p.execute(strm, args);
  strm.wait();
  std::vector<double> ts;
  for (int r = 0; r < 7; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) p.execute(strm, args);
    strm.wait();
    ts.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  std::sort(ts.begin(), ts.end());
  return ts[3];
}
int main(int argc, char** argv) {
  dt d = (argc > 1 && !strcmp(argv[1], "bf16")) ? dt::bf16 : dt::f32;
  const char* dn = d == dt::bf16 ? "bf16" : "f32";
  int Ms[] = {32, 128, 512, 1024};
  int KN[][2] = {{768, 768}, {768, 3072}, {3072, 768}};
  for (int M : Ms)
    for (auto& kn : KN) {
      int K = kn[0], N = kn[1];
      int reps = std::max(3, (int)(2e8 / (2.0 * M * K * N) * 20));
      memory x({{M, K}, d, memory::format_tag::ab}, eng), w({{K, N}, d, memory::format_tag::ba}, eng);
      memory y({{M, N}, d, memory::format_tag::ab}, eng);
      // fill
      auto fill = [d](memory& m) { size_t n = m.get_desc().get_size(); if (d == dt::bf16) { uint16_t* p = (uint16_t*)m.get_data_handle(); for (size_t i = 0; i < n / 2; ++i) p[i] = 0x3f80 + (i % 13); } else { float* p = (float*)m.get_data_handle(); for (size_t i = 0; i < n / 4; ++i) p[i] = 1.f + (i % 13) * 0.01f; } };
      fill(x); fill(w);
      // a) in place
      matmul::primitive_desc pa(eng, x.get_desc(), w.get_desc(), y.get_desc());
      matmul ma(pa);
      std::unordered_map<int, memory> aa{{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}};
      double ta = time_us(ma, aa, reps);
      // b) packed
      memory::desc wany({K, N}, d, memory::format_tag::any);
      matmul::primitive_desc pb(eng, x.get_desc(), wany, y.get_desc());
      memory wp(pb.weights_desc(), eng);
      reorder(w, wp).execute(strm, w, wp); strm.wait();
      matmul mb(pb);
      std::unordered_map<int, memory> ab{{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, wp}, {DNNL_ARG_DST, y}};
      double tb = time_us(mb, ab, reps);
      // swapped: yT[N,M] = W[N,K] xT[K,M], both read where they lie (W as the plain source, x
      // as transposed weights). oneDNN has only its reference kernel for a dst written
      // transposed (yT as "ba": 1500x slower), so yT is written plain and transposed after.
      memory::desc wsrc({N, K}, d, memory::format_tag::ab);
      memory::desc xT({K, M}, d, memory::format_tag::ba);
      memory::desc yT_ba({N, M}, d, memory::format_tag::ba);
      memory ws(wsrc, eng, w.get_data_handle()), xs(xT, eng, x.get_data_handle());
      // d) swapped, dst plain [N,M] (a transpose would follow)
      memory::desc yT_ab({N, M}, d, memory::format_tag::ab);
      memory yt(yT_ab, eng);
      double td = -1; std::string id = "-";
      try {
        matmul::primitive_desc pd(eng, wsrc, xT, yT_ab);
        id = pd.impl_info_str();
        matmul md(pd);
        std::unordered_map<int, memory> ad{{DNNL_ARG_SRC, ws}, {DNNL_ARG_WEIGHTS, xs}, {DNNL_ARG_DST, yt}};
        td = time_us(md, ad, reps);
      } catch (...) {}
      // the transpose alone (yT ab -> y ab), oneDNN reorder
      double tt = -1;
      { memory yv(yT_ba, eng, y.get_data_handle()); reorder rt(yt, yv); std::unordered_map<int, memory> at{{DNNL_ARG_FROM, yt}, {DNNL_ARG_TO, yv}}; tt = time_us(rt, at, reps); }
      printf("%s M=%4d K=%4d N=%4d  packed %8.1f us  in place %6.3fx  swapped %6.3fx  swapped+transpose %6.3fx  (%s | %s | %s)\n", dn, M, K, N, tb, ta / tb,
             td / tb, (td + tt) / tb, pb.impl_info_str(), pa.impl_info_str(), id.c_str());
      fflush(stdout);
    }
}
