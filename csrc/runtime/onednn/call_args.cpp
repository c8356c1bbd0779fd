#include "runtime/onednn/call_args.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/onednn/common.h"

namespace fxcpp::onednn {

CallDescs::CallDescs(const dnnl::primitive_desc_base& pd)
    : src(pd.src_desc()),
      weights(pd.weights_desc()),
      bias(pd.weights_desc(1)),  // a zero desc where the primitive has no bias
      dst(pd.dst_desc()),
      scratchpad(pd.scratchpad_desc()) {
  scratchpad_bytes = scratchpad.get_size();
}

void CallArgs::add(int tag, const dnnl::memory::desc& md, const void* ptr) {
  if (n_ == kMax) throw std::logic_error("fxcpp: a oneDNN call with more than " + std::to_string(kMax) + " arguments");
  a_[n_++] = Arg{tag, &md, const_cast<void*>(ptr)};
}

ArgMemories::Set ArgMemories::take() {
  std::lock_guard<std::mutex> lk(mu_);
  if (free_.empty()) return {};
  Set s = std::move(free_.back());
  free_.pop_back();
  return s;
}

void ArgMemories::give(Set s) {
  std::lock_guard<std::mutex> lk(mu_);
  free_.push_back(std::move(s));
}

namespace {

// Hands the set back however the call ends.
struct Lease {
  ArgMemories& pool;
  ArgMemories::Set set;
  ~Lease() { pool.give(std::move(set)); }
};

}  // namespace

void execute(const dnnl::primitive& p, const CallDescs& d, ArgMemories& pool, CallArgs& args) {
  if (d.scratchpad_bytes > 0) args.add(DNNL_ARG_SCRATCHPAD, d.scratchpad, thread_scratchpad(d.scratchpad));
  // An argument keeps the memory object made for its tag and desc at an earlier call, pointed at
  // this call's data (set_data_handle: no allocation for these unpadded layouts); one whose desc
  // differs (a desc made per call, as a per-call weight's) gets a new one. The descs an entry
  // keeps are the same handles at every call: compared by pointer first.
  Lease lease{pool, pool.take()};
  ArgMemories::Set& s = lease.set;
  const int n = args.size();
  if (static_cast<int>(s.tags.size()) != n) {
    s.tags.assign(n, -1);
    s.mds.assign(n, dnnl::memory::desc());
    s.mems.assign(n, dnnl::memory());
  }
  std::array<dnnl_exec_arg_t, CallArgs::kMax> c{};
  for (int i = 0; i < n; ++i) {
    const CallArgs::Arg& a = args[i];
    dnnl::memory& m = s.mems[i];
    if (s.tags[i] == a.tag && m && (s.mds[i].get() == a.md->get() || s.mds[i] == *a.md)) {
      m.set_data_handle(a.ptr);
    } else {
      m = dnnl::memory(*a.md, cpu_engine(), a.ptr);
      ++stats().arg_memories;
      s.tags[i] = a.tag;
      s.mds[i] = *a.md;
    }
    c[i] = dnnl_exec_arg_t{a.tag, m.get()};
  }
  dnnl::stream& st = thread_stream();
  dnnl::error::wrap_c_api(dnnl_primitive_execute(p.get(), st.get(), n, c.data()), "could not execute a primitive");
  st.wait();
}

}  // namespace fxcpp::onednn
