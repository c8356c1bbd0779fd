// The pass interface: `bool run(Graph&, const PassContext&)` returns whether the graph changed.
#pragma once
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace fxcpp {

struct PassContext {
  std::set<std::string> disabled;  // pass names switched off through Options
  bool verify_each = true;         // run the verifier after every pass
  // Called after each pass that ran, e.g. to dump the graph (Options.dump_dir).
  std::function<void(const std::string& pass, bool changed, const Graph&)> after_pass;
};

using PassFn = bool (*)(Graph&, const PassContext&);

struct PassInfo {
  const char* name;
  PassFn run;
};

// The one ordered pass list (pipeline.cpp).
const std::vector<PassInfo>& pass_list();
// Runs the list; returns (pass name, changed) for each pass that ran.
std::vector<std::pair<std::string, bool>> run_pipeline(Graph& g, const PassContext& ctx);
// Runs one pass by name (tests, tools); throws for an unknown name.
bool run_pass(const std::string& name, Graph& g, const PassContext& ctx);

// The passes, one per file.
bool verify_pass(Graph& g, const PassContext& ctx);
bool shape_propagation_pass(Graph& g, const PassContext& ctx);
bool remove_noops_pass(Graph& g, const PassContext& ctx);
bool dce_pass(Graph& g, const PassContext& ctx);
bool static_values_pass(Graph& g, const PassContext& ctx);
// oneDNN fusion (passes/fusion/, one pattern per file); no-ops when built without oneDNN.
bool onednn_lower_pass(Graph& g, const PassContext& ctx);
bool fold_batchnorm_pass(Graph& g, const PassContext& ctx);
bool fuse_postops_pass(Graph& g, const PassContext& ctx);
bool layout_propagation_pass(Graph& g, const PassContext& ctx);
bool widen_chains_pass(Graph& g, const PassContext& ctx);
// CPU fusion: pointwise chains, row reductions and norms → cpu::fused nodes (fusion/cpu_fusion.cpp).
bool cpu_fusion_pass(Graph& g, const PassContext& ctx);

}  // namespace fxcpp
