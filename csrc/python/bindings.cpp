// fxcpp._C — the only pybind11 translation unit. Arguments are checked here, at
// the boundary; everything below works on IValues and the IR.
//
// Lowered arguments arrive as tagged tuples (backend/lowering.py makes them):
//   ("v", value_id)   a Value of the graph
//   ("c", constant)   None, bool, int, float, str, dtype, device, layout, memory_format, Tensor
//   ("l", [arg...])   a list of the above
// Tensor metas arrive as (dtype, sizes, strides_or_None, device), sizes holding ints or symbol strings.
#include <ATen/ops/empty_like.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Layout.h>
#include <torch/csrc/MemoryFormat.h>
#include <torch/csrc/autograd/python_variable.h>

#include "ir/graph.h"
#include "ir/layout.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "runtime/buffer_pool.h"
#include "runtime/choice_cache.h"
#include "runtime/cpu/fused_call.h"
#include "runtime/executor.h"
#include "runtime/host.h"
#include "runtime/saved_plan.h"
#include "runtime/shared_choices.h"
#include "runtime/tensor_stamp.h"
#include "runtime/value_bounds.h"
#include "runtime/cpu/isa.h"
#include "runtime/cpu/mkl_bf16_gemm.h"
#include "runtime/cpu/vectorized_exp.h"
#ifdef FXCPP_HAS_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/onednn/common.h"
#endif

namespace py = pybind11;
using namespace fxcpp;

namespace {

c10::IValue to_ivalue(py::handle obj) {
  PyObject* o = obj.ptr();
  if (obj.is_none()) return {};
  if (PyBool_Check(o)) return obj.cast<bool>();
  if (PyLong_Check(o)) return obj.cast<int64_t>();
  if (PyFloat_Check(o)) return obj.cast<double>();
  if (PyUnicode_Check(o)) return obj.cast<std::string>();
  if (THPVariable_Check(o)) return THPVariable_Unpack(o);
  if (THPDtype_Check(o)) return static_cast<int64_t>(reinterpret_cast<THPDtype*>(o)->scalar_type);
  if (THPDevice_Check(o)) return reinterpret_cast<THPDevice*>(o)->device;
  if (THPLayout_Check(o)) return static_cast<int64_t>(reinterpret_cast<THPLayout*>(o)->layout);
  if (THPMemoryFormat_Check(o)) return static_cast<int64_t>(reinterpret_cast<THPMemoryFormat*>(o)->memory_format);
  if (py::hasattr(obj, "__index__") && !py::isinstance<py::float_>(obj)) return obj.attr("__index__")().cast<int64_t>();
  throw py::type_error(std::string("fxcpp: cannot pass a value of type ") + Py_TYPE(o)->tp_name + " to the C++ core");
}

py::object to_python(const c10::IValue& v) {
  if (v.isNone()) return py::none();
  if (v.isTensor()) return py::reinterpret_steal<py::object>(THPVariable_Wrap(v.toTensor()));
  if (v.isBool()) return py::bool_(v.toBool());
  if (v.isInt()) return py::int_(v.toInt());
  if (v.isDouble()) return py::float_(v.toDouble());
  if (v.isString()) return py::str(v.toStringRef());
  if (v.isDevice()) return py::reinterpret_steal<py::object>(THPDevice_New(v.toDevice()));
  if (v.isList()) {
    py::list out;
    for (const auto& e : v.toListRef()) out.append(to_python(e));
    return out;
  }
  if (v.isTuple()) {
    py::list out;
    for (const auto& e : v.toTupleRef().elements()) out.append(to_python(e));
    return py::tuple(out);
  }
  throw py::type_error("fxcpp: cannot return a value of kind " + v.tagKind() + " to Python");
}

std::vector<c10::IValue> to_ivalues(const py::sequence& seq) {
  std::vector<c10::IValue> out;
  out.reserve(seq.size());
  for (auto item : seq) out.push_back(to_ivalue(item));
  return out;
}

py::list to_python_list(const std::vector<c10::IValue>& vals) {
  py::list out;
  for (const auto& v : vals) out.append(to_python(v));
  return out;
}

// No Python on the hot path: other threads run while the plan does, unless it is brief.
//
// `held` keeps a second reference to each input until the GIL is back. In torch 2.13
// (c10/util/intrusive_ptr.h, "PyObject preservation", PyTorch PR 163394) a tensor with a
// Python object increfs it when its C++ count goes from 1 to 2 and decrefs it from 2 to 1,
// taking the GIL to do so: the plan freeing a parameter's or an input's slot at its last use
// took the GIL once per tensor (ResNet-20: ~100 a call, 1-3% of a call's samples in take_gil
// and drop_gil on one thread, and a wait on whichever thread holds it when several serve at
// once). With `held`, the plan's releases go from 3 to 2; the last one happens here, under the
// GIL. Memory is the same: the caller holds each input for the call in any case.
py::list run_releasing_gil(const Executable& e, std::vector<c10::IValue> ins) {
  std::vector<c10::IValue> outs;
  if (e.brief() && !e.resolving()) {  // a first call that may wait on another keeps no GIL
    outs = e.run(std::move(ins));
  } else {
    const std::vector<c10::IValue> held = ins;
    py::gil_scoped_release no_gil;
    outs = e.run(std::move(ins));
  }
  return to_python_list(outs);
}

Arg to_arg(Graph& g, py::handle h) {
  auto t = h.cast<py::tuple>();
  auto tag = t[0].cast<std::string>();
  if (tag == "v") {
    auto id = t[1].cast<size_t>();
    if (id >= g.num_values()) throw py::value_error("fxcpp: unknown value id " + std::to_string(id));
    return Arg::of(g.values()[id].get());
  }
  if (tag == "c") return Arg::constant_of(to_ivalue(t[1]));
  if (tag == "l") {
    std::vector<Arg> elems;
    for (auto e : t[1].cast<py::sequence>()) elems.push_back(to_arg(g, e));
    return Arg::list_of(std::move(elems));
  }
  throw py::value_error("fxcpp: unknown argument tag '" + tag + "'");
}

std::vector<Dim> to_dims(py::handle seq) {
  std::vector<Dim> out;
  for (auto d : seq.cast<py::sequence>()) {
    if (py::isinstance<py::int_>(d)) out.push_back(Dim::of(d.cast<int64_t>()));
    else out.push_back(Dim::symbol(py::str(d)));
  }
  return out;
}

std::optional<TensorMeta> to_meta(py::handle h) {
  if (h.is_none()) return std::nullopt;
  auto t = h.cast<py::tuple>();
  TensorMeta m;
  m.dtype = static_cast<c10::ScalarType>(to_ivalue(t[0]).toInt());
  m.sizes = to_dims(t[1]);
  if (!t[2].is_none()) m.strides = to_dims(t[2]);
  m.device = to_ivalue(t[3]).toDevice();
  return m;
}

ValueKind to_kind(const std::string& s) {
  if (auto k = value_kind_named(s)) return *k;
  throw py::value_error("fxcpp: unknown value kind '" + s + "'");
}

py::object dtype_to_python(c10::ScalarType t) {
  return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(t)));
}

// Sizes or strides: ints, a symbolic dim as its expression.
py::list dims_to_python(const std::vector<Dim>& ds) {
  py::list l;
  for (const Dim& d : ds) d.is_static() ? l.append(d.value) : l.append(d.sym);
  return l;
}

py::object meta_to_python(const std::optional<TensorMeta>& m) {
  if (!m) return py::none();
  return py::make_tuple(std::string(c10::toString(m->dtype)), dims_to_python(m->sizes));
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "fxcpp C++ core: graph IR, passes, executor";
  // NodeError → fxcpp._C.FxcppNodeError; an exception raised in Python inside a kernel
  // becomes its __cause__, and its text joins the message.
  static py::exception<NodeError> node_error(m, "FxcppNodeError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NodeError& e) {
      std::string msg = e.what();
      py::object cause;
      if (e.cause) {
        try {
          std::rethrow_exception(e.cause);
        } catch (python_error& pe) {
          pe.restore();
          py::error_already_set err;  // fetches and clears the restored Python error
          cause = err.value();
          msg += std::string(err.type().attr("__name__").cast<std::string>()) + ": " + py::str(cause).cast<std::string>();
        } catch (...) {
        }
      }
      py::object inst = py::reinterpret_borrow<py::object>(node_error.ptr())(msg);
      inst.attr("node_name") = e.node_name;  // the failing FX node: compiled.py keeps it alone in the Interpreter
      if (cause) PyException_SetCause(inst.ptr(), cause.release().ptr());
      PyErr_SetObject(node_error.ptr(), inst.ptr());
    }
  });

  py::class_<Graph, std::shared_ptr<Graph>>(m, "Graph")
      .def(py::init<>())
      .def("add_input", [](Graph& g, const std::string& name, const std::string& kind, py::handle meta, bool is_static) {
        g.check_mutable("add an input");
        return g.add_input(name, to_kind(kind), to_meta(meta), is_static)->id;
      }, py::arg("name"), py::arg("kind"), py::arg("meta"), py::arg("is_static") = false)
      .def("add_constant", [](Graph& g, const std::string& name, py::handle value) {
        g.check_mutable("add a constant");
        return g.add_constant(name, to_ivalue(value), std::nullopt)->id;
      })
      .def("add_node", [](Graph& g, const std::string& name, const std::string& target, py::sequence args,
                          py::dict kwargs, const std::string& fx_repr, py::sequence outputs) {
        g.check_mutable("add a node");
        std::vector<Arg> a;
        for (auto x : args) a.push_back(to_arg(g, x));
        std::vector<std::pair<std::string, Arg>> kw;
        for (auto [k, v] : kwargs) kw.emplace_back(k.cast<std::string>(), to_arg(g, v));
        std::vector<std::pair<ValueKind, std::optional<TensorMeta>>> outs;
        for (auto o : outputs) {
          auto t = o.cast<py::tuple>();
          outs.emplace_back(to_kind(t[0].cast<std::string>()), to_meta(t[1]));
        }
        std::vector<int> ids;
        for (Value* v : g.add_node(name, target, std::move(a), kw, fx_repr, outs)->outputs) ids.push_back(v->id);
        return ids;
      })
      .def("set_outputs", [](Graph& g, py::sequence outs) {
        g.check_mutable("set the outputs");
        std::vector<Arg> a;
        for (auto x : outs) a.push_back(to_arg(g, x));
        g.set_outputs(std::move(a));
      })
      .def("verify", [](const Graph& g, bool require_meta) { verify_graph(g, require_meta); }, py::arg("require_meta") = false)
      .def("node_names", [](const Graph& g) {
        std::vector<std::string> out;
        for (const Node* n : g.nodes()) out.push_back(n->name);
        return out;
      })
      .def("node_targets", [](const Graph& g) {
        std::vector<std::string> out;
        for (const Node* n : g.nodes()) out.push_back(n->target);
        return out;
      })
      .def("value_meta", [](const Graph& g, const std::string& name) {
        for (const auto& v : g.values())
          if (v->name == name) return meta_to_python(v->meta);
        throw py::key_error(name);
      })
      // Every value's meta by id (lowering's env holds the ids): None, or (torch.dtype, sizes,
      // strides or None when unknown, device str); a symbolic dim is its expression.
      // fxcpp.shape_prop reads these after the shape_propagation pass.
      .def("value_metas", [](const Graph& g) {
        py::list out;
        for (const auto& v : g.values()) {
          if (!v->meta) {
            out.append(py::none());
            continue;
          }
          const TensorMeta& m = *v->meta;
          py::object dtype = dtype_to_python(m.dtype);
          py::object strides = m.strides.empty() && !m.sizes.empty() ? py::object(py::none()) : py::object(dims_to_python(m.strides));
          out.append(py::make_tuple(dtype, dims_to_python(m.sizes), strides, m.device.str()));
        }
        return out;
      })
      // The fusion nodes, for tests and tools: one dict per node with a FusedOp.
      // Names of the computed values the static_values pass marked (inputs excluded).
      .def("static_values", [](const Graph& g) {
        std::vector<std::string> out;
        for (const Node* n : g.nodes())
          for (const Value* v : n->outputs)
            if (v->is_static) out.push_back(v->name);
        return out;
      })
      // The cpu::fused nodes: [{name, covers, phases, registers, inputs, outputs, program}].
      .def("cpu_fused_nodes", [](const Graph& g) {
        py::list out;
        for (const Node* n : g.nodes()) {
          if (!n->program) continue;
          const Program& p = *n->program;
          py::dict d;
          d["name"] = n->name;
          d["covers"] = p.covers;
          d["phases"] = p.phases.size();
          d["registers"] = p.num_regs;
          d["inputs"] = n->args.size();
          d["outputs"] = n->outputs.size();
          d["row_dims"] = p.row_dims;
          d["perm"] = p.perm;
          d["row_first"] = p.row_first;
          d["program"] = p.str();
          out.append(d);
        }
        return out;
      })
      .def("fused_nodes", [](const Graph& g) {
        static const char* kinds[] = {"eltwise", "binary", "sum"};
        py::list out;
        for (const Node* n : g.nodes()) {
          if (!n->fused) continue;
          const FusedOp& f = *n->fused;
          py::list post;
          for (const auto& p : f.post_ops)
            post.append(py::make_tuple(kinds[static_cast<int>(p.kind)], p.alg, p.alpha, p.beta));
          py::dict d;
          d["name"] = n->name;
          d["target"] = n->target;
          d["anchor_op"] = f.anchor_op;
          d["post_ops"] = post;
          d["covers"] = f.covers;
          d["bn"] = f.bn_arg >= 0;
          d["channels_last"] = f.channels_last;
          d["blocked_layout"] = f.blocked_layout;
          d["weight_nk"] = f.weight_nk;
          d["flatten_src"] = f.flatten_src;
          const Value* y = n->outputs[0];  // its dtype: widen_chains may keep it fp32
          d["out_dtype"] = y->meta ? dtype_to_python(y->meta->dtype) : py::object(py::none());
          out.append(d);
        }
        return out;
      })
      .def("__str__", &Graph::str);

  // oneDNN's own verbose log (1: one line per primitive run) — tests count reorders with it.
  m.def("onednn_set_verbose", [](int level) {
#ifdef FXCPP_HAS_ONEDNN
    dnnl::set_verbose(level);
    return true;
#else
    return false;
#endif
  });
  m.def("refresh_weights", &fxcpp::refresh_all,
        "Every packed weight and cached parameter-derived value is computed again at its next use.");
  // Process-wide counts of weights packed and primitives built (tests: no re-pack per call).
  m.def("onednn_stats", [] {
    py::dict d;
#ifdef FXCPP_HAS_ONEDNN
    d["packs"] = fxcpp::onednn::stats().packs.load();
    d["primitives"] = fxcpp::onednn::stats().primitives.load();
    d["packs_in_place"] = fxcpp::onednn::stats().packs_in_place.load();
    d["arg_memories"] = fxcpp::onednn::stats().arg_memories.load();
    d["input_reorders"] = fxcpp::onednn::stats().input_reorders.load();
    d["input_bounds_known"] = fxcpp::onednn::stats().input_bounds_known.load();
    d["input_reads"] = fxcpp::onednn::stats().input_reads.load();
#endif
    return d;
  });
  // Packed rows from DRAM prefetch per row (default); off only to measure it in one process.
  m.def("_set_row_prefetch", &fxcpp::cpu::set_row_prefetch, py::arg("on"));
  m.def("_set_planned", &fxcpp::cpu::set_planned, py::arg("on"));
  // Bounds on values passed between a call's kernels (value_bounds.h); off only to measure them.
  m.def("_set_value_bounds", &fxcpp::value_bounds::set_enabled, py::arg("on"));
  // Process-wide counts for the cpu_fused kernels (tests).
  m.def("cpu_fused_stats", [] {
    py::dict d;
    d["in_place"] = fxcpp::cpu::in_place_outputs();
    d["streamed"] = fxcpp::cpu::streamed_outputs();
    d["fused_reductions"] = fxcpp::cpu::fused_reductions();
    d["fused_affine_tails"] = fxcpp::cpu::fused_tails();
    d["row_paced_blocks"] = fxcpp::cpu::row_paced_blocks();
    d["packed_plane_calls"] = fxcpp::cpu::packed_plane_calls();
    d["planned_calls"] = fxcpp::cpu::planned_calls();
    d["bf16_direct"] = fxcpp::cpu::bf16_direct();
    d["column_calls"] = fxcpp::cpu::column_calls();
    const auto pool = fxcpp::buffer_pool_stats();
    d["pool_hits"] = pool.hits;
    d["pool_misses"] = pool.misses;
    d["pool_cached_bytes"] = pool.cached_bytes;
    d["isa"] = fxcpp::cpu::isa_name();
    return d;
  });
  // Whether this build has AddressSanitizer (make test-asan checks it ran the build it meant to).
  m.def("sanitized", [] {
#ifdef __SANITIZE_ADDRESS__
    return true;
#else
    return false;
#endif
  });
  // Tests only: at::vec's Vectorized<float>::exp() (Sleef) under the ISA the kernels run, the
  // reference cpu_fused's exp_u10 must match bit for bit (tests/python/test_exp_u10.py).
  m.def("_vectorized_exp", [](const at::Tensor& x) {
    TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous() && x.device().is_cpu(), "contiguous fp32 CPU tensor expected");
    at::Tensor y = at::empty_like(x);
    fxcpp::cpu::vectorized_exp(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
  });
  // This host's CPU as the kernels see it (runtime/host.h): recorded beside every benchmark.
  m.def("host_info", [] {
    const fxcpp::HostInfo& h = fxcpp::host();
    py::dict d;
    d["summary"] = h.str();
    d["avx2"] = h.avx2;
    d["fma"] = h.fma;
    d["avx512"] = h.avx512;
    d["avx512_bf16"] = h.avx512_bf16;
    d["avx512_fp16"] = h.avx512_fp16;
    d["amx"] = h.amx;
    d["l1d"] = h.l1d;
    d["l2"] = h.l2;
    d["l3"] = h.l3;
    d["llc_bytes"] = fxcpp::last_level_cache_bytes();  // what the streaming rule uses (FXCPP_LLC_BYTES)
    d["llc_max_bytes"] = fxcpp::kMaxUsableLlcBytes;     // the most of a reported L3 it takes
    d["onednn_isa"] = h.onednn_isa;
    d["native_bf16"] = fxcpp::native_bf16();
    d["onednn_bf16"] = fxcpp::onednn_bf16();      // oneDNN has bf16 kernels for its ISA
    d["bf16_dot_rate"] = fxcpp::bf16_dot_rate();  // vs fp32 FMAs; native_bf16 needs kMinBf16DotRate
    d["min_bf16_dot_rate"] = fxcpp::kMinBf16DotRate;
    d["aten_isa"] = fxcpp::cpu::isa_name();
    d["mkl_bf16_gemm"] = fxcpp::cpu::mkl_bf16_gemm_available();  // torch's MKL exports its bf16 GEMM
    return d;
  });
  m.def("has_onednn", [] {
#ifdef FXCPP_HAS_ONEDNN
    return true;
#else
    return false;
#endif
  });
  // The layout passes' reading of traced strides (ir/layout.h), for tests.
  m.def("dense_dim_order", [](py::handle sizes, py::handle strides) -> std::optional<std::vector<int>> {
    TensorMeta m;
    m.sizes = to_dims(sizes);
    m.strides = to_dims(strides);
    return dense_dim_order(m);
  });
  m.def("pass_names", [] {
    std::vector<std::string> out;
    for (const auto& p : pass_list()) out.push_back(p.name);
    return out;
  });
  m.def("prim_arities", &prim_arities);
  // fxcpp.save: a constant as the builder receives it (dtypes, layouts, memory formats as ints;
  // a device as ("device", str)), so the C++ loader replays the same calls.
  m.def("plan_constant", [](py::handle o) -> py::object {
    const c10::IValue v = to_ivalue(o);
    if (v.isDevice()) return py::make_tuple("device", v.toDevice().str());
    return to_python(v);
  });
  // The C++ loader fxcpp_run uses (runtime/saved_plan.h), from Python: tests check a file
  // loads to the same plan without building the runner.
  m.def("run_saved_plan", [](const std::string& path, py::sequence inputs) {
    const SavedPlan plan = load_saved_plan(path);
    std::vector<at::Tensor> ins;
    for (auto x : inputs) ins.push_back(to_ivalue(x).toTensor());
    std::vector<c10::IValue> outs;
    {
      py::gil_scoped_release no_gil;
      outs = plan.run(ins);
    }
    return to_python_list(outs);
  });
  m.def("run_pass", [](Graph& g, const std::string& name, bool verify_each) {
    g.check_mutable("run a pass");
    PassContext ctx;
    ctx.verify_each = verify_each;
    return run_pass(name, g, ctx);
  }, py::arg("graph"), py::arg("name"), py::arg("verify_each") = true);
  // Returns [(pass, changed, graph text after it or "")].
  m.def("run_pipeline", [](Graph& g, const std::vector<std::string>& disabled, bool verify_each, bool dump) {
    g.check_mutable("run the pass pipeline");
    PassContext ctx;
    ctx.disabled = {disabled.begin(), disabled.end()};
    ctx.verify_each = verify_each;
    std::vector<std::tuple<std::string, bool, std::string>> out;
    ctx.after_pass = [&](const std::string& p, bool changed, const Graph& gr) { out.emplace_back(p, changed, dump ? gr.str() : ""); };
    run_pipeline(g, ctx);
    return out;
  }, py::arg("graph"), py::arg("disabled") = std::vector<std::string>{}, py::arg("verify_each") = true, py::arg("dump") = false);

  // First-call kernel choices kept across processes (runtime/choice_cache.h; backend/choice_cache.py).
  py::class_<ChoiceCache, std::shared_ptr<ChoiceCache>>(m, "ChoiceCache")
      .def(py::init<std::string, std::string>(), py::arg("path"), py::arg("key"))
      .def_property_readonly("path", &ChoiceCache::path)
      .def_property_readonly("warning", &ChoiceCache::warning)
      .def_property_readonly("loaded", &ChoiceCache::loaded)
      .def_property_readonly("hits", &ChoiceCache::hits)
      .def_property_readonly("recorded", &ChoiceCache::recorded);

  py::class_<Executable, std::shared_ptr<Executable>>(m, "Executable")
      .def(py::init([](std::shared_ptr<Graph> g, bool pack_weights, std::shared_ptr<ChoiceCache> choices) {
        if (!pack_weights) g->disable_weight_packing();
        if (choices) g->set_choice_cache(std::move(choices));
        // One table per graph: a second Executable of the same graph shares the first one's.
        if (!g->frozen()) g->set_shared_choices(std::make_shared<SharedChoices>());
        g->freeze();
        return std::make_shared<Executable>(g);
      }), py::arg("graph"), py::arg("pack_weights") = true, py::arg("choice_cache") = nullptr)
      .def("run", [](const Executable& e, py::sequence inputs) { return run_releasing_gil(e, to_ivalues(inputs)); })
      // exe(*args): what Dynamo calls on the direct inference path (backend/direct_call.py).
      .def("__call__", [](const Executable& e, py::args inputs) { return run_releasing_gil(e, to_ivalues(inputs)); })
      .def("run_profiled", [](const Executable& e, py::sequence inputs) {
        auto ins = to_ivalues(inputs);
        std::vector<c10::IValue> outs;
        std::vector<int64_t> times;
        {
          py::gil_scoped_release no_gil;
          outs = e.run_profiled(ins, times);  // a copy: `ins` drops the inputs under the GIL (run_releasing_gil)
        }
        return py::make_tuple(to_python_list(outs), times);
      })
      .def("run_debug", [](const Executable& e, py::sequence inputs) {
        auto ins = to_ivalues(inputs);
        std::unordered_map<std::string, c10::IValue> vals;
        {
          py::gil_scoped_release no_gil;
          vals = e.run_debug(ins);  // a copy, as run_profiled's
        }
        py::dict out;
        for (const auto& [k, v] : vals) out[py::str(k)] = to_python(v);
        return out;
      })
      // [(node name, target, kernel kind, output value names, FX nodes it covers)]
      // `covers` is [name] for a plain node; a fused node lists every FX node it replaced.
      .def("steps", [](const Executable& e) {
        py::list out;
        for (const auto& s : e.steps()) {
          py::list names, covers;
          for (const Value* v : s.node->outputs) names.append(v->name);
          if (s.node->fused)
            for (const auto& c : s.node->fused->covers) covers.append(c);
          else if (s.node->program)
            for (const auto& c : s.node->program->covers) covers.append(c);
          else
            covers.append(s.node->name);
          out.append(py::make_tuple(s.node->name, s.node->target, s.kernel->kind(), names, covers));
        }
        return out;
      })
      // Names of the steps that run only when a parameter they read changes.
      .def("static_steps", [](const Executable& e) {
        std::vector<std::string> out;
        for (size_t i = 0; i < e.steps().size(); ++i)
          if (e.static_part().step[i]) out.push_back(e.steps()[i].node->name);
        return out;
      })
      // What each step's kernel ran, and why (explain's `impl` column); filled in as calls run.
      .def("step_notes", [](const Executable& e) {
        std::vector<std::string> out;
        for (const auto& s : e.steps()) out.push_back(s.kernel->describe());
        return out;
      })
      // What each step's kernel ran at the calls so far (explain's `kernel` column): its kind,
      // "aten" where it kept eager's ATen ops, or "<kind>+aten" (Kernel::ran).
      .def("step_ran", [](const Executable& e) {
        std::vector<std::string> out;
        for (const auto& s : e.steps()) out.push_back(s.kernel->ran());
        return out;
      })
      // Options.freeze (backend/freeze.py), before the first call: the input positions that may
      // be released; then the plan takes those tensors over and lets go of each during that call.
      .def("freeze_candidates", [](const Executable& e, py::sequence inputs) { return e.freeze_candidates(to_ivalues(inputs)); })
      .def("adopt_released", [](const Executable& e, py::sequence inputs, const std::vector<int>& positions) {
        e.adopt_released(to_ivalues(inputs), positions);
      })
      .def("adopted_count", &Executable::adopted_count)
      .def("planned_peak_bytes", &Executable::planned_peak_bytes)
      .def("graph_str", [](const Executable& e) { return e.graph().str(); })
      .def("__str__", &Executable::str);
}
