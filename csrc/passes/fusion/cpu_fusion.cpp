// cpu_fusion: groups connected pointwise ops, row reductions and norms (softmax,
// log_softmax, layer_norm) into cpu::fused nodes, each carrying one Program (ir/program.h)
// that the cpu_fused kernel runs in one pass over memory (a few passes over a cached row).
//
//   %a = aten::add(%x, %r); %n = aten::native_layer_norm(%a, [768], %w, %b, 1e-5); %g = aten::gelu(%n.0)
//      →  %a, %g = cpu::fused(%x, %r, %w, %b)   {2 phases: mean, variance; then the outputs}
//
// Trigger: any node cpu_ops.cpp classifies. Growing in graph order, a node joins the group of
// one of its producers when
//  - its output has the group's full shape (the domain), or is one value per row of it
//    (keepdim, or the row dims dropped), and a reduction reduces exactly the group's row dims
//    (any dims: trailing ones, or leading and middle ones such as x.sum(0), a bias gradient's
//    sum over the batch, statistics over [0, 2, 3]; the program then runs over the domain
//    permuted so that they come last, Program::perm);
//  - a per-row value without keepdim meets a full-size one only where the reduced dims lead
//    (x - x.mean(0)); elsewhere right-aligned broadcasting would pair the wrong dims;
//  - none of its other inputs is computed from the group (that would be a cycle), counting a
//    value of another group as computed from everything that group reads: a fused node runs
//    whole, after all its inputs (x*y and -x*y in one group, an op outside reading x*y, its
//    result in a second group with z*w: z*w + -x*y may not join the first group);
//  - no op with side effects lies between (groups close there: nothing moves past one).
// When a node reads from several groups, they merge first (same domain, no outside node on a
// path between them), so a node joining two branches (x.clamp(...) - x.clamp_min(0)) fuses both.
// A value others still read becomes an output of the group (stored once, where it is
// computed). A group is kept when it does at least two ops' work, or is a variance alone
// (ATen's is slow), or one op the fused kernel runs faster than ATen's (faster_fused_alone),
// or one op whose static output ATen would map afresh at every call (32 MiB and more), and has
// an input with the full domain shape (so the kernel knows the domain at run time).
// Otherwise the graph is left as it was.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "ir/layout.h"
#include "passes/fusion/cpu_ops.h"
#include "passes/fusion/fusion_util.h"
#include "passes/pass.h"

namespace fxcpp {

using namespace fusion;

namespace {

enum class Role { Full, RowKeep, RowDrop };

struct Group {
  std::vector<Dim> domain;
  int row_dims = 0;
  std::vector<int> reduced;  // the domain's dims a row runs over, ascending (row_dims of them)
  std::vector<Node*> members;
  std::unordered_map<const Value*, Role> role;  // of every value the members produce
  bool closed = false;
  int work = 0;
  bool reduces = false;
};

bool same_dims(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) return false;
  return true;
}

// Right-aligned broadcasting of `s` into `to` (dims of s are 1 or equal).
bool broadcasts_to(const std::vector<Dim>& s, const std::vector<Dim>& to) {
  if (s.size() > to.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const Dim& d = s[s.size() - 1 - i];
    if (!(d == Dim::of(1)) && !(d == to[to.size() - 1 - i])) return false;
  }
  return true;
}

bool is_reduced(const Group& g, size_t d) { return std::binary_search(g.reduced.begin(), g.reduced.end(), static_cast<int>(d)); }

// The domain with its reduced dims 1 (keepdim), or without them.
std::vector<Dim> row_shape(const Group& g, bool keepdim) {
  std::vector<Dim> s;
  for (size_t i = 0; i < g.domain.size(); ++i) {
    if (!is_reduced(g, i)) s.push_back(g.domain[i]);
    else if (keepdim) s.push_back(Dim::of(1));
  }
  return s;
}

// The reduced dims lead ([0, k)): a per-row value without keepdim broadcasts right-aligned onto
// the kept dims, as eager pairs them.
bool reduced_dims_lead(const Group& g) {
  for (size_t i = 0; i < g.reduced.size(); ++i)
    if (g.reduced[i] != static_cast<int>(i)) return false;
  return true;
}

std::optional<Role> role_of_shape(const std::vector<Dim>& s, const Group& g) {
  if (same_dims(s, g.domain)) return Role::Full;
  if (g.row_dims == 0) return std::nullopt;
  if (same_dims(s, row_shape(g, true))) return Role::RowKeep;
  if (same_dims(s, row_shape(g, false))) return Role::RowDrop;
  return std::nullopt;
}

const std::vector<Dim>& sizes_of(const Value* v) { return v->meta->sizes; }

bool has_side_effects(const Node& n) {
  if (!n.is_aten()) return false;
  const auto& s = n.schema();
  return s.is_mutable() || s.returns().empty() || n.op->hasTag(at::Tag::nondeterministic_seeded);
}

bool counts_as_work(const Node& n, const CpuOp& op) {
  if (op.kind == CpuOp::Kind::View) return false;
  const std::string name = n.schema().name();
  return name != "aten::clone" && name != "aten::_to_copy" && name != "prims::convert_element_type";
}

c10::MemoryFormat format_of(const TensorMeta& m) {
  // Anything but a channels-last layout the traced strides prove is taken as contiguous (what
  // eager returns for contiguous inputs, the common case).
  if (m.sizes.size() != 4 && m.sizes.size() != 5) return c10::MemoryFormat::Contiguous;
  if (!traced_channels_last(m)) return c10::MemoryFormat::Contiguous;
  return m.sizes.size() == 4 ? c10::MemoryFormat::ChannelsLast : c10::MemoryFormat::ChannelsLast3d;
}

// The dims of a dense, non-contiguous layout, innermost first (the dims longer than 1 by
// stride, then the size-1 dims: they lie anywhere); empty otherwise.
std::vector<int> dense_order_of(const TensorMeta& m) {
  const int n = static_cast<int>(m.sizes.size());
  if (n < 2) return {};
  std::optional<std::vector<int>> order = dense_dim_order(m);
  if (!order || std::is_sorted(order->rbegin(), order->rend())) return {};  // unknown, or contiguous
  for (int d = n - 1; d >= 0; --d)
    if (m.sizes[d] == Dim::of(1)) order->push_back(d);
  return *order;
}

class Fuser {
 public:
  explicit Fuser(Graph& g) : g_(g) {}

  bool run() {
    for (Node* n : g_.nodes()) order_[n] = static_cast<int>(order_.size());
    for (Node* n : g_.nodes()) visit(n);
    bool changed = false;
    for (auto& grp : groups_)
      if (!grp.members.empty() && worth_it(grp)) changed |= replace(grp);
    if (changed) g_.sort_topologically();
    return changed;
  }

 private:
  void visit(Node* n) {
    if (has_side_effects(*n)) {
      for (auto& grp : groups_) grp.closed = true;
      note_upstream(n, -1);
      return;
    }
    std::optional<CpuOp> op = classify_cpu_op(*n);
    int joined = -1;
    if (op) {
      std::vector<int> producers;  // distinct groups n reads from, in argument order
      for (const Arg& a : n->args)
        for_each_value(a, [&](Value* v) {
          auto it = producer_group_.find(v);
          if (it == producer_group_.end()) return;
          const int grp = find(it->second);
          if (std::find(producers.begin(), producers.end(), grp) == producers.end()) producers.push_back(grp);
        });
      for (size_t i = 1; i < producers.size(); ++i) merge(producers[0], producers[i]);
      for (int grp : producers)
        if (joined < 0 && try_join(groups_[find(grp)], *n, *op)) joined = find(grp);
      if (joined < 0 && op->kind != CpuOp::Kind::View) joined = start(*n, *op);
    }
    note_upstream(n, joined);
  }

  int find(int grp) const {
    while (parent_[grp] != grp) grp = parent_[grp];
    return grp;
  }

  // Moves b's members into a when both run over one domain and nothing outside them lies on
  // a path from one to the other (the merged group would be a cycle).
  void merge(int a, int b) {
    a = find(a), b = find(b);
    Group &ga = groups_[a], &gb = groups_[b];
    if (a == b || ga.closed || gb.closed || !same_dims(ga.domain, gb.domain)) return;
    if (ga.row_dims && gb.row_dims && ga.reduced != gb.reduced) return;
    for (const auto* from : {&ga, &gb}) {
      const int other = from == &ga ? b : a;
      for (Node* m : from->members)
        for (const Arg& arg : m->args) {
          bool bad = false;
          for_each_value(arg, [&](Value* v) {
            bad |= !ga.role.count(v) && !gb.role.count(v) && depends_on(v, other);
          });
          if (bad) return;
        }
    }
    ga.members.insert(ga.members.end(), gb.members.begin(), gb.members.end());
    std::sort(ga.members.begin(), ga.members.end(), [&](Node* x, Node* y) { return order_.at(x) < order_.at(y); });
    ga.role.insert(gb.role.begin(), gb.role.end());
    group_up_[a].insert(group_up_[b].begin(), group_up_[b].end());
    if (ga.row_dims == 0) ga.row_dims = gb.row_dims, ga.reduced = gb.reduced;
    ga.work += gb.work;
    ga.reduces |= gb.reduces;
    gb.members.clear();
    gb.role.clear();
    gb.work = 0;
    parent_[b] = a;
  }

  // Groups every value depends on (for the cycle test), and which group produced it; and, for
  // the group n joined, what its inputs from outside that group are computed from (group_up_).
  void note_upstream(Node* n, int group) {
    std::set<int> up;
    for (const Arg& a : n->args)
      for_each_value(a, [&](Value* v) {
        auto it = upstream_.find(v);
        if (it == upstream_.end()) return;
        up.insert(it->second.begin(), it->second.end());
        if (group >= 0 && !groups_[group].role.count(v)) group_up_[group].insert(it->second.begin(), it->second.end());
      });
    if (group >= 0) up.insert(group);
    for (Value* v : n->outputs) {
      upstream_[v] = up;
      if (group >= 0) producer_group_[v] = group;
    }
  }

  // Whether v is computed from `group`: through the groups v reads, and what each of those reads
  // (group_up_), since a fused node computes every output after all of its inputs.
  bool depends_on(const Value* v, int group) const {
    auto it = upstream_.find(v);
    if (it == upstream_.end()) return false;
    const int target = find(group);
    std::vector<int> todo;
    for (int g : it->second) todo.push_back(find(g));
    std::set<int> seen;
    while (!todo.empty()) {
      const int g = todo.back();
      todo.pop_back();
      if (g == target) return true;
      if (!seen.insert(g).second) continue;
      for (int u : group_up_[g])
        if (find(u) != g) todo.push_back(find(u));  // a group it merged with since is itself
    }
    return false;
  }

  int index_of(const Group& grp) const { return static_cast<int>(&grp - groups_.data()); }

  bool try_join(Group& grp, Node& n, const CpuOp& op) {
    if (grp.closed) return false;
    const int id = index_of(grp);
    // Inputs computed outside the group must not depend on it.
    for (const Arg& a : n.args) {
      bool bad = false;
      for_each_value(a, [&](Value* v) { bad |= !grp.role.count(v) && depends_on(v, id); });
      if (bad) return false;
    }
    std::vector<Role> out_roles;
    if (op.kind == CpuOp::Kind::View) {
      const Value* u = n.args[0].value;
      auto r = role_of_shape(sizes_of(n.outputs[0]), grp);
      if (!u || !grp.role.count(u) || !r) return false;
      const Role in = grp.role.at(u);
      const bool ok = (in != Role::Full && *r != Role::Full) || (in == Role::Full && *r == Role::Full) ||
                      (in != Role::Full && *r == Role::Full && n.schema().name() == "aten::expand" &&
                       (in == Role::RowKeep || reduced_dims_lead(grp)));
      if (!ok) return false;
      out_roles = {*r};
    } else if (op.kind == CpuOp::Kind::Pointwise) {
      auto r = role_of_shape(sizes_of(n.outputs[0]), grp);
      if (!r || !args_fit(grp, n, *r)) return false;
      out_roles = {*r};
    } else {  // Reduction, Norm: rows of a full-size value
      const Value* u = op.reduced;
      const bool full_in = grp.role.count(u) ? grp.role.at(u) == Role::Full : same_dims(sizes_of(u), grp.domain);
      if (!full_in || (grp.row_dims != 0 && op.dims != grp.reduced)) return false;
      if (grp.row_dims == 0 && op.row_dims > static_cast<int>(grp.domain.size())) return false;
      Group probe = grp;
      probe.row_dims = op.row_dims;
      probe.reduced = op.dims;
      if (!args_fit(probe, n, Role::Full, /*skip_first=*/true)) return false;
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        auto r = role_of_shape(sizes_of(n.outputs[i]), probe);
        if (!r || (op.kind == CpuOp::Kind::Norm && i == 0 && *r != Role::Full)) return false;
        out_roles.push_back(*r);
      }
      grp.row_dims = op.row_dims;
      grp.reduced = op.dims;
      grp.reduces = true;
    }
    add(grp, n, op, out_roles);
    return true;
  }

  // Every tensor arg of n fits a member of role `r`: members' values by role, others by broadcasting.
  bool args_fit(const Group& grp, const Node& n, Role r, bool skip_first = false) const {
    for (size_t i = skip_first ? 1 : 0; i < n.args.size(); ++i) {
      const Arg& a = n.args[i];
      if (a.kind != Arg::Kind::Value || a.value->kind != ValueKind::Tensor) continue;
      const Value* v = a.value;
      auto it = grp.role.find(v);
      if (it != grp.role.end()) {
        const Role in = it->second;
        const bool ok = in == r || (in == Role::RowKeep && r == Role::Full) ||
                        (in == Role::RowDrop && r == Role::Full && reduced_dims_lead(grp));
        if (!ok) return false;
      } else {
        const std::vector<Dim> target = r == Role::Full ? grp.domain : row_shape(grp, r == Role::RowKeep);
        if (!broadcasts_to(sizes_of(v), target)) return false;
      }
    }
    return true;
  }

  void add(Group& grp, Node& n, const CpuOp& op, const std::vector<Role>& roles) {
    grp.members.push_back(&n);
    for (size_t i = 0; i < n.outputs.size() && i < roles.size(); ++i) grp.role[n.outputs[i]] = roles[i];
    if (counts_as_work(n, op)) ++grp.work;
  }

  int start(Node& n, const CpuOp& op) {
    Group grp;
    if (op.kind == CpuOp::Kind::Pointwise) {
      grp.domain = sizes_of(n.outputs[0]);
      if (!args_fit(grp, n, Role::Full)) return -1;
      add(grp, n, op, {Role::Full});
    } else {
      grp.domain = sizes_of(op.reduced);
      if (op.row_dims > static_cast<int>(grp.domain.size())) return -1;
      grp.row_dims = op.row_dims;
      grp.reduced = op.dims;
      grp.reduces = true;
      if (!args_fit(grp, n, Role::Full, /*skip_first=*/true)) return -1;
      std::vector<Role> roles;
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        auto r = role_of_shape(sizes_of(n.outputs[i]), grp);
        if (!r || (op.kind == CpuOp::Kind::Norm && i == 0 && *r != Role::Full)) return -1;
        roles.push_back(*r);
      }
      add(grp, n, op, roles);
    }
    groups_.push_back(std::move(grp));
    parent_.push_back(static_cast<int>(parent_.size()));
    group_up_.emplace_back();  // filled by note_upstream
    return static_cast<int>(groups_.size()) - 1;
  }

  bool worth_it(const Group& grp) const {
    // One op alone gains nothing from fusing: ATen's own kernel for it (a LayerNorm, a softmax,
    // a sum) is as fast or faster (benchmarks/results/cpu-fusion/). Except a variance: ATen's
    // var/std/var_mean accumulate Welford in double one element at a time (9.0 ms on
    // [4096, 768] fp32, 2 threads; fused 0.3-0.5 ms: benchmarks/results/var-mean/). And an op
    // whose output ATen would map afresh at each call (maps_fresh_output, below).
    // And one op whose fused kernel alone beats ATen's (faster_fused_alone).
    const bool variance =
        std::any_of(grp.members.begin(), grp.members.end(), [](const Node* m) { return is_variance(*m); });
    const bool faster_alone =
        std::any_of(grp.members.begin(), grp.members.end(), [](const Node* m) { return faster_fused_alone(*m); });
    if (grp.work < 2 && !variance && !faster_alone && !maps_fresh_output(grp)) return false;
    // A row of zero elements (a reduction over an empty dim): ATen's kernels define what it
    // gives (sum 0, mean NaN, amax raises, softmax an empty result); the fused kernel does not.
    // Dynamo specializes size 0, so a zero row is always static here.
    for (int d : grp.reduced)
      if (grp.domain[d] == Dim::of(0)) return false;
    // A reduction over every dim is one row, and one row runs on one thread: only when small.
    if (grp.row_dims > 0 && grp.row_dims == static_cast<int>(grp.domain.size())) {
      int64_t numel = 1;
      for (const Dim& d : grp.domain) {
        if (!d.is_static()) return false;
        numel *= d.value;
      }
      return numel <= kOneThreadElements;
    }
    return true;
  }

  // ATen's output of 32 MiB or more is a fresh mapping at every call (glibc's mmap threshold
  // rises no higher), and its first writes fault in every 4 KiB page; the fused kernel takes its
  // output from the buffer pool. LayerNorm [16384, 768] fp32 alone: ATen 17.0 ms, the fused
  // LayerNorm+ReLU 5.7 ms; at 24 MiB (bf16) ATen's is faster (results/cpu-fusion-amx/lone_norms.txt).
  static bool maps_fresh_output(const Group& grp) {
    int64_t bytes = 0;
    for (const Node* m : grp.members)
      for (const Value* v : m->outputs) {
        if (!v->meta) continue;
        const int64_t n = v->meta->static_nbytes();
        if (n < 0) return false;
        bytes = std::max(bytes, n);
      }
    return bytes >= kFreshMappingBytes;
  }

  static constexpr int64_t kFreshMappingBytes = int64_t{32} << 20;
  static constexpr int64_t kOneThreadElements = 32768;  // ATen's GRAIN_SIZE: below it eager stays on one thread too

  bool replace(Group& grp) {
    std::set<const Node*> in_group(grp.members.begin(), grp.members.end());
    auto uses = g_.use_counts();
    // Which member values are read outside the group (they become the node's outputs).
    std::vector<Value*> outs;
    std::set<const Value*> stored_and_read;  // outputs other members read too
    for (Node* m : grp.members)
      for (Value* v : m->outputs) {
        int inside = 0;
        for (Node* u : grp.members)
          for (const Arg& a : u->args) for_each_value(a, [&](Value* x) { inside += x == v; });
        if (uses[v->id] > inside) outs.push_back(v);
        if (uses[v->id] > inside && inside > 0) stored_and_read.insert(v);
      }
    if (outs.empty()) return false;
    for (Value* v : outs) {  // outputs must be stored in a dtype the kernel writes
      const auto t = v->meta->dtype;
      if (t != c10::kFloat && t != c10::kBFloat16 && t != c10::kHalf && t != c10::kBool) return false;
    }

    // Member values on a path into an op that steps (a comparison, floor, ...): each is rounded
    // to its bf16/fp16 dtype as eager stores it after every op, or fp32's extra bits flip the step
    // where eager's rounded chain does not (fuzzer grammar 2, seeds 68403: log1p(|x @ p|) > x;
    // 68081: (v - mean) / (std + 1e-5) < v). Rounding only where a single step reads would not do:
    // one rounding of the fp32 chain differs from eager's rounding at every op.
    std::set<const Value*> feeds_step;
    for (auto m = grp.members.rbegin(); m != grp.members.rend(); ++m) {
      bool on_path = steps_on_its_inputs(**m);
      for (const Value* v : (*m)->outputs) on_path |= feeds_step.count(v) > 0;
      if (!on_path) continue;
      for (const Arg& a : (*m)->args)
        for_each_value(a, [&](Value* x) {
          if (x->kind == ValueKind::Tensor && x->producer && in_group.count(x->producer)) feeds_step.insert(x);
        });
    }

    ProgramBuilder b;
    std::vector<Arg> args;
    std::vector<c10::ScalarType> in_types;
    std::vector<int> in_pad;
    std::map<std::pair<const Value*, int>, int> slot;  // (value, pad) → input index
    std::unordered_map<const Value*, int> expr;
    bool anchored = false;
    auto load = [&](const Value* v, int pad) {
      auto key = std::make_pair(v, pad);
      auto it = slot.find(key);
      if (it != slot.end()) return b.load(it->second);
      const int k = static_cast<int>(args.size());
      slot.emplace(key, k);
      args.push_back(Arg::of(const_cast<Value*>(v)));
      in_types.push_back(v->meta->dtype);
      in_pad.push_back(pad);
      anchored |= pad == 0 && same_dims(sizes_of(v), grp.domain);
      return b.load(k);
    };
    for (Node* m : grp.members) {
      // The shape its inputs broadcast to: a reduction or norm reads full-size rows; a
      // pointwise member reads what its own output is (a per-row value without keepdim
      // reads [B, T] inputs as [B, T, 1]).
      const auto op = classify_cpu_op(*m);
      const bool reads_rows = op && (op->kind == CpuOp::Kind::Reduction || op->kind == CpuOp::Kind::Norm);
      const int pad = !reads_rows && grp.role.at(m->outputs[0]) == Role::RowDrop ? grp.row_dims : 0;
      auto arg = [&](const Value* v) {
        auto it = expr.find(v);
        if (it != expr.end()) return it->second;
        return load(v, pad);
      };
      std::vector<int> es = emit_cpu_op(*m, b, arg);
      for (size_t i = 0; i < m->outputs.size() && i < es.size(); ++i) {
        if (es[i] < 0) continue;
        // A bf16/fp16 value the group stores is read by its other members as stored, as eager's
        // next op reads it: the outputs stay consistent with one another (a backward that
        // compares or normalizes saved values sees what eager's forward saw; fuzzer seeds 591,
        // 1156, 1822). So is one on a path into a step (feeds_step). Other values the group
        // keeps to itself stay fp32.
        const Value* v = m->outputs[i];
        const auto t = v->meta->dtype;
        if ((stored_and_read.count(v) || feeds_step.count(v)) && (t == c10::kBFloat16 || t == c10::kHalf))
          es[i] = b.op(t == c10::kBFloat16 ? POp::RoundBf16 : POp::RoundHalf, es[i]);
        expr[v] = es[i];
      }
    }
    if (!anchored) return false;  // the domain could not be read from the inputs at run time
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!expr.count(outs[i])) return false;
      const Role r = grp.role.at(outs[i]);
      b.output(static_cast<int>(i), expr.at(outs[i]), outs[i]->meta->dtype, r != Role::Full);
    }
    // Reduced dims other than the trailing ones: the program runs over the kept dims, then them.
    std::vector<int> perm;
    for (size_t d = 0; d < grp.domain.size(); ++d)
      if (!is_reduced(grp, d)) perm.push_back(static_cast<int>(d));
    perm.insert(perm.end(), grp.reduced.begin(), grp.reduced.end());
    const bool permuted = !std::is_sorted(perm.begin(), perm.end());
    // A permuted program runs by columns (its rows side by side in memory), each phase a pass
    // over the tensor: there a centered mean is shifted rather than corrected (one pass fewer).
    auto prog = std::make_shared<Program>(b.build(grp.row_dims, in_types, in_pad, /*shift_centered_means=*/permuted));
    prog->rank = static_cast<int>(grp.domain.size());
    if (permuted) prog->perm = perm;
    for (size_t i = 0; i < outs.size(); ++i) {
      const Role r = grp.role.at(outs[i]);
      prog->outputs[i].keepdim = r != Role::RowDrop;
      if (r == Role::Full) {
        prog->outputs[i].format = format_of(*outs[i]->meta);
        if (grp.row_dims > 0) prog->outputs[i].order = dense_order_of(*outs[i]->meta);
      }
    }
    for (Node* m : grp.members) prog->covers.push_back(m->name);
    // Named after its first member that does work (the FX node explain() puts the time on).
    std::string name = grp.members.front()->name;
    for (Node* m : grp.members)
      if (auto op = classify_cpu_op(*m); op && counts_as_work(*m, *op)) {
        name = m->name;
        break;
      }
    g_.replace_with_group(grp.members, name, "cpu::fused", std::move(args), outs, prog);
    return true;
  }

  Graph& g_;
  std::vector<Group> groups_;
  std::unordered_map<const Value*, int> producer_group_;  // by id at the time; find() for the merged one
  std::unordered_map<const Value*, std::set<int>> upstream_;
  std::vector<int> parent_;  // union-find over merged groups
  // Per group (by id; a merged group's under its root): the groups its members' inputs from
  // outside it are computed from (upstream_ of each), for depends_on's group-level test.
  std::vector<std::set<int>> group_up_;
  std::unordered_map<const Node*, int> order_;
};

}  // namespace

bool cpu_fusion_pass(Graph& g, const PassContext&) { return Fuser(g).run(); }

}  // namespace fxcpp
