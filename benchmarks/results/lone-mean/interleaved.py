"""A reduction alone, plan against plan in one process: the installed build's plan of op(x)
(fused where its rule says so) against the same graph's plan with the fusion pass disabled
(ATen's op), alternating call by call, 9 rounds of n calls, median per round; the median and
range of the per-round ratios, and ATen's median time. 2 threads.

    python benchmarks/results/lone-mean/interleaved.py [mean|sum|amax ...] > FILE

A line says "aten" where the build leaves op(x) alone on ATen: the fused side is then op(x) * 2
(always fused; the * 2 is on the reduced output), the question being whether fusing it alone
would pay.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/cpp"))
import torch
from graphs import lowered

from fxcpp import _C

torch.set_num_threads(2)
# (shape, reduced dims (None: all), channels-last): global pools of ResNet-20, ResNet-50, MobileNetV2
# and an SE block, in both layouts; a row mean, mean pooling over a sequence, a batch mean.
CASES = [((1, 64, 8, 8), (2, 3), True), ((1, 2048, 7, 7), (2, 3), True), ((16, 2048, 7, 7), (2, 3), True),
         ((1, 1280, 7, 7), (2, 3), True), ((1, 96, 56, 56), (2, 3), True), ((1, 672, 14, 14), (2, 3), True),
         ((1, 64, 8, 8), (2, 3), False), ((1, 2048, 7, 7), (2, 3), False), ((16, 2048, 7, 7), (2, 3), False),
         ((1, 96, 56, 56), (2, 3), False), ((128, 768), (-1,), False), ((1, 128, 768), (1,), False),
         ((8192, 768), (0,), False), ((32, 512, 768), (1,), False), ((4096,), None, False)]
OPS = {"mean": torch.mean, "sum": torch.sum, "amax": torch.amax}
names = sys.argv[1:] or ["mean"]


def reduce(op, dims):
    return (lambda t: op(t, dims, keepdim=True)) if dims else (lambda t: op(t))


def plan(fn, x, disabled=()):
    _, g = lowered(fn, x, static=set())
    _C.run_pipeline(g, list(disabled), True, False)
    return _C.Executable(g), bool(g.cpu_fused_nodes())


print("host:", _C.host_info()["summary"], "torch", torch.__version__)
print("fused / aten: plan of op(x) (or op(x) * 2 where the rule leaves op(x) on ATen) over the plan of op(x) "
      "with cpu_fusion disabled; median [min, max] over 9 rounds")
for name in names:
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        for shape, dims, cl in CASES:
            torch.manual_seed(0)
            x = torch.randn(shape).to(dt)
            if cl:
                x = x.contiguous(memory_format=torch.channels_last)
            f = reduce(OPS[name], dims)
            aten, fused_by_aten_plan = plan(f, x, ["cpu_fusion"])
            alone, fused_alone = plan(f, x)
            fused = alone if fused_alone else plan(lambda t: f(t) * 2, x)[0]
            assert not fused_by_aten_plan
            xs = [x]
            for _ in range(20):
                aten.run(xs), fused.run(xs)
            n = max(5, min(200, int(3e6 / x.numel())))
            ratios, ta_all = [], []
            for _ in range(9):
                ta, tf = [], []
                for _ in range(n):
                    t = time.perf_counter(); aten.run(xs); ta.append(time.perf_counter() - t)
                    t = time.perf_counter(); fused.run(xs); tf.append(time.perf_counter() - t)
                ratios.append(statistics.median(tf) / statistics.median(ta))
                ta_all.append(statistics.median(ta))
            print(f"{name:5s} {str(dt)[6:]:8s} {'fused' if fused_alone else 'aten ':5s} {str(shape):16s} "
                  f"dims={str(dims):7s} {'CL  ' if cl else 'cont'} aten {statistics.median(ta_all) * 1e6:8.1f} us  "
                  f"fused/aten {statistics.median(ratios):5.2f} [{min(ratios):.2f}, {max(ratios):.2f}]", flush=True)
