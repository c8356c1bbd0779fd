"""Each suite transformer at batch 1 under fxcpp's default (attention as oneDNN's matmuls where
its first call measured them faster) against eager, by the harness rule with the fp64 reference,
in fp32, bf16 and fp16; and how many attention calls ran the matmuls.

    python benchmarks/results/attention-matmuls/accuracy.py
"""
import copy
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
import fxcpp  # noqa: E402
from fxcpp.verify import same_as_eager  # noqa: E402
from benchmarks import suite  # noqa: E402

print(f"host: {fxcpp._C.host_info()['summary']}")
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    for name in ("bert_base", "distilbert", "gpt2", "t5_small", "vit_b16"):
        spec = [s for s in suite.SUITE if s.name == name][0]
        model, inputs = spec.build(1)
        m, x = suite.to_dtype(model.eval(), inputs, dtype, "cpu")
        torch._dynamo.reset()
        with torch.no_grad():
            ref = suite.call(spec, m, x)
            res = suite.call(spec, torch.compile(m, backend="fxcpp"), x)
            m64, x64 = suite.to_dtype(copy.deepcopy(m), x, torch.float64, "cpu")  # .to() converts in place
            ref64 = suite.call(spec, m64, x64)
            torch._dynamo.reset()
            report = fxcpp.explain(suite.CallModule(spec, m), *x)
        calls = [r for r in report.rows if r.op == "aten::_scaled_dot_product_flash_attention_for_cpu"]
        matmuls = sum("softmax rows" in r.impl for r in calls)
        ok = all(same_as_eager(r, c, fp64_ref=r64) for r, c, r64 in zip(ref, res, ref64) if isinstance(r, torch.Tensor))
        print(f"{name} {str(dtype)[6:]}: {'matches eager' if ok else 'DIFFERS'} (harness rule, fp64 reference); "
              f"attention calls on the matmuls: {matmuls} of {len(calls)}", flush=True)
