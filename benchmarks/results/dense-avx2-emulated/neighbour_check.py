"""fxcpp's ResNet-20 at batch 1, fp32 and bf16, timed back to back and after an eager call of
either dtype: what the call before a sample does to it (HOW.md). Run from the repository root:

    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 FXCPP_CACHE_DIR=$(mktemp -d) \
      PYTHONPATH=. python benchmarks/results/dense-avx2-emulated/neighbour_check.py
"""
import torch, time, statistics, copy, sys
import fxcpp
from benchmarks import suite
from benchmarks.harness import DTYPES
from benchmarks.machine import machine_info
info = machine_info(torch.get_num_threads(), 'neighbour_check')
print('host:', (info['host'] or {}).get('summary'), '| commit', info['git_commit'], '| torch', torch.__version__, '| threads', torch.get_num_threads())
spec = next(s for s in suite.SUITE if s.name == "resnet20")
fns = {}; ins = {}; eag = {}
for dt in ("fp32", "bf16"):
    m, x = spec.build(1); m, x = suite.to_dtype(m, x, DTYPES[dt], "cpu")
    eag[dt] = copy.deepcopy(m)
    f = torch.compile(m, backend="fxcpp")
    with torch.no_grad():
        for _ in range(3): f(*x)
    fns[dt] = f; ins[dt] = x
def t(fn, x):
    t0 = time.perf_counter(); fn(*x); return time.perf_counter() - t0
for mode in ("alone", "after_eager_same_dtype", "after_eager_bf16", "after_eager_fp32"):
    s = {"fp32": [], "bf16": []}
    with torch.no_grad():
        for _ in range(30):
            for dt in ("fp32", "bf16"):
                if mode == "after_eager_same_dtype": eag[dt](*ins[dt])
                if mode == "after_eager_bf16": eag["bf16"](*ins["bf16"])
                if mode == "after_eager_fp32": eag["fp32"](*ins["fp32"])
                s[dt].append(t(fns[dt], ins[dt]))
    a, b = statistics.median(s["fp32"])*1e3, statistics.median(s["bf16"])*1e3
    print(f"{mode:24s} fp32 {a:.3f} ms  bf16 {b:.3f} ms  ratio {b/a:.2f}")
