#include "ir/verifier.h"
#include "passes/pass.h"

namespace fxcpp {

bool verify_pass(Graph& g, const PassContext&) {
  verify_graph(g);
  return false;
}

// The order matters: shapes first (later passes read metas), no-op removal
// before DCE (it leaves producers without users), DCE before fusion (a fusion
// refuses values with other uses, dead ones included); static values before the
// fusions (BN folding needs to know a computed weight is parameter-derived; fusing
// keeps the marks); BN folding before post-op fusion (BN must directly follow its
// conv); oneDNN's post-ops before the CPU fusion (an op fused into a GEMM costs no pass
// over memory at all); layout last (it sees the fused nodes), then widen_chains (it only
// retypes values between oneDNN nodes, after every other pass has read the model's dtypes).
const std::vector<PassInfo>& pass_list() {
  static const std::vector<PassInfo> passes = {
      {"verify", verify_pass},
      {"shape_propagation", shape_propagation_pass},
      {"remove_noops", remove_noops_pass},
      {"dce", dce_pass},
      {"static_values", static_values_pass},
      {"onednn_lower", onednn_lower_pass},
      {"fold_batchnorm", fold_batchnorm_pass},
      {"fuse_postops", fuse_postops_pass},
      {"cpu_fusion", cpu_fusion_pass},
      {"layout_propagation", layout_propagation_pass},
      {"widen_chains", widen_chains_pass},
      {"dce_after_fusion", dce_pass},
  };
  return passes;
}

bool run_pass(const std::string& name, Graph& g, const PassContext& ctx) {
  for (const auto& p : pass_list())
    if (name == p.name) {
      bool changed = p.run(g, ctx);
      if (ctx.verify_each) verify_graph(g);
      return changed;
    }
  std::string known;
  for (const auto& p : pass_list()) known += std::string(known.empty() ? "" : ", ") + p.name;
  throw std::invalid_argument("unknown pass '" + name + "'; passes are: " + known);
}

std::vector<std::pair<std::string, bool>> run_pipeline(Graph& g, const PassContext& ctx) {
  std::vector<std::pair<std::string, bool>> ran;
  for (const auto& p : pass_list()) {
    if (ctx.disabled.count(p.name)) continue;
    bool changed = run_pass(p.name, g, ctx);
    ran.emplace_back(p.name, changed);
    if (ctx.after_pass) ctx.after_pass(p.name, changed, g);
  }
  return ran;
}

}  // namespace fxcpp
