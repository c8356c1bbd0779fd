"""Each suite transformer in fp16 at batch 1 under fxcpp's default (attention widened to fp32 on a
CPU without AVX512-FP16) against eager, by the harness rule with the fp64 reference."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
import fxcpp  # noqa: E402
from fxcpp.verify import same_as_eager  # noqa: E402
from benchmarks import suite  # noqa: E402

for name in ("bert_base", "distilbert", "gpt2", "t5_small", "vit_b16"):
    spec = [s for s in suite.SUITE if s.name == name][0]
    model, inputs = spec.build(1)
    m16, x16 = suite.to_dtype(model.eval(), inputs, torch.float16, "cpu")
    torch._dynamo.reset()
    with torch.no_grad():
        ref = suite.call(spec, m16, x16)
        res = suite.call(spec, torch.compile(m16, backend="fxcpp"), x16)
        m64, x64 = suite.to_dtype(m16, x16, torch.float64, "cpu")
        ref64 = suite.call(spec, m64, x64)
        report = fxcpp.explain(suite.CallModule(spec, suite.to_dtype(m64, x64, torch.float16, "cpu")[0]), *x16)
    widened = sum(r.impl.startswith("aten in fp32") for r in report.rows)
    ok = all(same_as_eager(r, c, fp64_ref=r64, tol=1e-2) for r, c, r64 in zip(ref, res, ref64)
             if isinstance(r, torch.Tensor))
    print(f"{name}: {'matches eager' if ok else 'DIFFERS'} (fp64-reference rule, tol 1e-2); attention calls widened: {widened}")
