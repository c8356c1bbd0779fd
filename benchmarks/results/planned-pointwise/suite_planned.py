"""How many calls per forward the suite models run as a plan (cpu_fused_stats()['planned_calls']), fp32 and bf16.
    python suite_planned.py MODEL[:BATCH] ..."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
import torch, fxcpp
from benchmarks import suite
torch.set_num_threads(2)
for arg in sys.argv[1:]:
    name, _, want = arg.partition(":")
    spec, batch = [(s, b) for s, b in suite.find([name], False) if not want or b == int(want)][0]
    for dtype in (torch.float32, torch.bfloat16):
        torch.manual_seed(0)
        model, inputs = spec.build(batch)
        model = model.to(dtype)
        inputs = [i.to(dtype) if isinstance(i, torch.Tensor) and i.is_floating_point() else i for i in inputs]
        torch._dynamo.reset()
        f = torch.compile(lambda *a, m=model: suite.call(spec, m, a), backend="fxcpp")
        with torch.no_grad():
            for _ in range(2): f(*inputs)
            st = fxcpp._C.cpu_fused_stats()["planned_calls"]
            f(*inputs)
            per = fxcpp._C.cpu_fused_stats()["planned_calls"] - st
        print(f"{name} b{batch} {str(dtype)[6:]}: planned calls per forward {per}", flush=True)
