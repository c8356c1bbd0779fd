"""A suite model in bf16 or fp16, compiled twice in this process: with the ATen alternative of
each oneDNN node widened to fp32 (FXCPP_ATEN_WIDEN=1, the rule before) and as eager's own ops
where ATen runs the dtype natively (the default now); eager beside them. Called interleaved
(medians of `reps` rounds); how many oneDNN nodes chose ATen in each, and the first output's
largest difference from eager's.

    python benchmarks/results/aten-native-alternative/ab.py bert_base 1 bf16 10
"""
import copy
import os
import sys
import time

import torch

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
from benchmarks import suite  # noqa: E402
import fxcpp  # noqa: E402

name, batch, dt = sys.argv[1], int(sys.argv[2]), sys.argv[3]
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 10
dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dt]
spec = [s for s in suite.SUITE if s.name == name][0]
model, inputs = spec.build(batch)
model, inputs = suite.to_dtype(model, inputs, dtype, "cpu")
fns, outs, aten_nodes = {"eager": model}, {}, {}
for cfg, widen in (("widened", "1"), ("eager_ops", None)):
    if widen:
        os.environ["FXCPP_ATEN_WIDEN"] = widen
    else:
        os.environ.pop("FXCPP_ATEN_WIDEN", None)
    m = copy.deepcopy(model)
    with torch.no_grad():
        rows = fxcpp.explain(m, *inputs).rows if isinstance(inputs, tuple) else None
    aten_nodes[cfg] = None if rows is None else sum(
        1 for r in rows if r.kernel == "onednn" and r.impl and r.impl.startswith("aten"))
    torch._dynamo.reset()
    fns[cfg] = torch.compile(m, backend="fxcpp")
    os.environ.pop("FXCPP_ATEN_WIDEN", None)
ts = {k: [] for k in fns}
with torch.no_grad():
    for k, f in fns.items():
        outs[k] = suite.call(spec, f, inputs)
        suite.call(spec, f, inputs)
    for _ in range(reps):
        for k, f in fns.items():
            t = time.perf_counter()
            suite.call(spec, f, inputs)
            ts[k].append(time.perf_counter() - t)
med = {k: sorted(v)[len(v) // 2] * 1e3 for k, v in ts.items()}
first = lambda o: (o[0] if isinstance(o, (tuple, list)) else o).float()  # noqa: E731
diff = {k: (first(outs[k]) - first(outs["eager"])).abs().max().item() for k in ("widened", "eager_ops")}
h = fxcpp._C.host_info()
print(f"host: {h['summary']} native_bf16 {h['native_bf16']}; torch mkldnn bf16 "
      f"{torch.ops.mkldnn._is_mkldnn_bf16_supported()} fp16 {torch.ops.mkldnn._is_mkldnn_fp16_supported()}")
print(f"{name} b{batch} {dt}: " + " ".join(f"{k} {v:.2f} ms" for k, v in med.items())
      + f" | widened/eager {med['widened'] / med['eager']:.2f} eager_ops/eager {med['eager_ops'] / med['eager']:.2f}"
      + f" | nodes on ATen: widened {aten_nodes['widened']} eager_ops {aten_nodes['eager_ops']}"
      + f" | max diff vs eager: widened {diff['widened']:.3g} eager_ops {diff['eager_ops']:.3g}")
