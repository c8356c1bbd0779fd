#include "runtime/saved_plan.h"

#include <fstream>
#include <iterator>

#include <torch/csrc/jit/serialization/pickle.h>

#include "ir/graph.h"
#include "passes/pass.h"
#include "runtime/executor.h"

namespace fxcpp {
namespace {

constexpr int64_t kVersion = 1;

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("fxcpp: saved plan: " + what); }

std::vector<c10::IValue> items(const c10::IValue& v, const char* what) {
  if (v.isList()) return v.toListRef().vec();
  if (v.isTuple()) return v.toTupleRef().elements().vec();
  bad(std::string(what) + " is not a list");
}

// A constant as the Python bindings pass it to the builder: dtypes, layouts and memory formats
// are ints already; a device is saved as ("device", "cpu").
c10::IValue constant(const c10::IValue& v) {
  if (v.isTuple()) {
    const auto& e = v.toTupleRef().elements();
    if (e.size() == 2 && e[0].isString() && e[0].toStringRef() == "device") return c10::Device(e[1].toStringRef());
    bad("a constant tuple other than a device");
  }
  return v;
}

std::vector<Dim> dims(const c10::IValue& v) {
  std::vector<Dim> out;
  for (const auto& d : items(v, "dims")) out.push_back(d.isInt() ? Dim::of(d.toInt()) : Dim::symbol(d.toStringRef()));
  return out;
}

std::optional<TensorMeta> meta(const c10::IValue& v) {
  if (v.isNone()) return std::nullopt;
  auto e = items(v, "a meta");
  if (e.size() != 4) bad("a meta has " + std::to_string(e.size()) + " fields, not 4");
  TensorMeta m;
  const int64_t dtype = e[0].toInt();
  if (dtype < 0 || dtype >= static_cast<int64_t>(c10::ScalarType::NumOptions)) bad("unknown dtype code " + std::to_string(dtype));
  m.dtype = static_cast<c10::ScalarType>(dtype);
  m.sizes = dims(e[1]);
  if (!e[2].isNone()) m.strides = dims(e[2]);
  m.device = c10::Device(e[3].toStringRef());
  return m;
}

ValueKind kind(const std::string& s) {
  if (auto k = value_kind_named(s)) return *k;
  bad("unknown value kind '" + s + "'");
}

Arg arg(Graph& g, const c10::IValue& v) {
  auto e = items(v, "an argument");
  if (e.size() != 2 || !e[0].isString()) bad("an argument is not (tag, value)");
  const std::string& tag = e[0].toStringRef();
  if (tag == "v") {
    const int64_t id = e[1].toInt();
    if (id < 0 || static_cast<size_t>(id) >= g.num_values()) bad("unknown value id " + std::to_string(id));
    return Arg::of(g.values()[id].get());
  }
  if (tag == "c") return Arg::constant_of(constant(e[1]));
  if (tag == "l") {
    std::vector<Arg> out;
    for (const auto& x : items(e[1], "a list argument")) out.push_back(arg(g, x));
    return Arg::list_of(std::move(out));
  }
  bad("unknown argument tag '" + tag + "'");
}

c10::IValue field(const c10::Dict<c10::IValue, c10::IValue>& d, const char* key) {
  auto it = d.find(c10::IValue(std::string(key)));
  if (it == d.end()) bad(std::string("no '") + key + "' field");
  return it->value();
}

}  // namespace

std::vector<char> read_binary_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) bad("cannot open " + path);
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

SavedPlan load_saved_plan(const std::string& path) {
  c10::IValue root;
  try {
    root = torch::jit::pickle_load(read_binary_file(path));
  } catch (const c10::Error& e) {
    bad(path + " is not a file fxcpp.save wrote (" + e.what_without_backtrace() + ")");
  }
  if (!root.isGenericDict()) bad(path + " does not hold a dict");
  const auto d = root.toGenericDict();
  if (field(d, "format").toStringRef() != "fxcpp-plan") bad(path + " is not an fxcpp plan");
  if (field(d, "version").toInt() != kVersion)
    bad("version " + std::to_string(field(d, "version").toInt()) + ", this build reads " + std::to_string(kVersion));

  auto g = std::make_shared<Graph>();
  SavedPlan plan;
  for (const auto& call : items(field(d, "calls"), "calls")) {
    auto e = items(call, "a call");
    const std::string& op = e.at(0).toStringRef();
    if (op == "input") {  // ("input", name, kind, meta, is_static, saved value or None, argument index or None)
      g->add_input(e.at(1).toStringRef(), kind(e.at(2).toStringRef()), meta(e.at(3)), e.at(4).toBool());
      const c10::IValue& index = e.at(6);
      if (index.isNone() && !e.at(5).isTensor()) bad("input '" + e.at(1).toStringRef() + "' has neither a value nor an argument");
      plan.user_index.push_back(index.isNone() ? -1 : index.toInt());
      plan.saved.push_back(e.at(5));
    } else if (op == "constant") {  // ("constant", name, value)
      g->add_constant(e.at(1).toStringRef(), constant(e.at(2)), std::nullopt);
    } else if (op == "node") {  // ("node", name, target, args, kwargs [(k, arg)], fx_repr, outputs [(kind, meta)])
      std::vector<Arg> args;
      for (const auto& a : items(e.at(3), "node args")) args.push_back(arg(*g, a));
      std::vector<std::pair<std::string, Arg>> kwargs;
      for (const auto& kv : items(e.at(4), "node kwargs")) {
        auto p = items(kv, "a kwarg");
        kwargs.emplace_back(p.at(0).toStringRef(), arg(*g, p.at(1)));
      }
      std::vector<std::pair<ValueKind, std::optional<TensorMeta>>> outs;
      for (const auto& o : items(e.at(6), "node outputs")) {
        auto p = items(o, "an output");
        outs.emplace_back(kind(p.at(0).toStringRef()), meta(p.at(1)));
      }
      g->add_node(e.at(1).toStringRef(), e.at(2).toStringRef(), std::move(args), kwargs, e.at(5).toStringRef(), outs);
    } else if (op == "outputs") {
      std::vector<Arg> outs;
      for (const auto& a : items(e.at(1), "outputs")) outs.push_back(arg(*g, a));
      g->set_outputs(std::move(outs));
    } else {
      bad("unknown call '" + op + "'");
    }
  }
  plan.num_user_inputs = static_cast<size_t>(field(d, "num_inputs").toInt());
  for (int64_t i : plan.user_index)
    if (i >= static_cast<int64_t>(plan.num_user_inputs)) bad("an input reads argument " + std::to_string(i) + " of " +
                                                            std::to_string(plan.num_user_inputs));
  PassContext ctx;
  for (const auto& p : items(field(d, "disabled_passes"), "disabled_passes")) ctx.disabled.insert(p.toStringRef());
  run_pipeline(*g, ctx);
  if (!field(d, "pack_weights").toBool()) g->disable_weight_packing();
  g->freeze();
  plan.exe = std::make_shared<Executable>(g);
  return plan;
}

std::vector<c10::IValue> SavedPlan::run(const std::vector<at::Tensor>& inputs) const {
  if (inputs.size() != num_user_inputs)
    throw std::invalid_argument("fxcpp: saved plan: takes " + std::to_string(num_user_inputs) + " inputs, got " +
                                std::to_string(inputs.size()));
  std::vector<c10::IValue> all;
  all.reserve(saved.size());
  for (size_t k = 0; k < saved.size(); ++k) all.push_back(user_index[k] >= 0 ? c10::IValue(inputs[user_index[k]]) : saved[k]);
  return exe->run(std::move(all));
}

}  // namespace fxcpp
