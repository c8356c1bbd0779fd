"""The large sizes again in one process, to take the VM's drift out: the installed build's plan of
op(x) (fused alone where its rule says so) against ATen's op called directly (torch.ops.aten, whose
Python call costs ~1 us, under 0.5% here), alternating call by call in 15 rounds of 20 calls,
median per round, then the median and range of the per-round ratios. 2 threads.

    python benchmarks/results/lone-ops-avx512/interleaved.py
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/cpp"))
import torch
import torch.nn.functional as F
from graphs import lowered

from fxcpp import _C

torch.set_num_threads(2)
CASES = [("sin", torch.sin, torch.ops.aten.sin.default), ("cos", torch.cos, torch.ops.aten.cos.default),
         ("rsqrt", torch.rsqrt, torch.ops.aten.rsqrt.default), ("log", torch.log, torch.ops.aten.log.default),
         ("gelu", F.gelu, torch.ops.aten.gelu.default)]
print("host:", _C.host_info()["summary"], "torch", torch.__version__)
print("ratio = plan of op(x) / ATen op(x) called directly; median [min, max] over 15 rounds")
for dt in (torch.float32, torch.bfloat16, torch.float16):
    for name, op, aten_op in CASES:
        for shape in ((1, 512, 3199), (2048, 2048)):
            torch.manual_seed(0)
            x = torch.rand(shape).add_(0.01).to(dt)
            _, g = lowered(lambda t: op(t), x, static=set())
            _C.run_pipeline(g)
            ex = _C.Executable(g)
            fused = bool(g.cpu_fused_nodes())
            xs = [x]
            for _ in range(5):
                ex.run(xs), aten_op(x)
            ratios = []
            for _ in range(15):
                tf, ta = [], []
                for _ in range(20):
                    t = time.perf_counter(); ex.run(xs); tf.append(time.perf_counter() - t)
                    t = time.perf_counter(); aten_op(x); ta.append(time.perf_counter() - t)
                ratios.append(statistics.median(tf) / statistics.median(ta))
            print(f"{str(dt)[6:]:8s} {name:6s} {'fused' if fused else 'aten ':5s} {x.numel():8d} "
                  f"{statistics.median(ratios):5.2f} [{min(ratios):.2f}, {max(ratios):.2f}]", flush=True)
