"""GPT-2 (batch 1, 128 tokens, bf16) on a host without native bf16: eager, Inductor with freezing
and fxcpp, a few calls each (the harness's 30 interleaved repeats would take hours here: eager's
and Inductor's bf16 GEMMs are emulated). One process; compile = the first call's wall time; then
`calls` calls per configuration, interleaved round by round; each output checked against eager's
with fxcpp.verify.same_as_eager (fp64 reference).

    python benchmarks/results/gpt2-bf16-avx2/few_calls.py [calls]
"""
import sys, time
import torch
sys.path.insert(0, ".")
from benchmarks import configs, suite
from benchmarks.harness import DTYPES, TOLERANCE
from benchmarks.machine import machine_info
import fxcpp
from fxcpp.verify import same_as_eager

calls = int(sys.argv[1]) if len(sys.argv) > 1 else 3
torch.set_num_threads(2)
spec = next(s for s in suite.SUITE if s.name == "gpt2")
torch.manual_seed(0)
model, inputs = spec.build(1)
with torch.no_grad():
    ref64 = suite.call(spec, *suite.to_dtype(model, inputs, torch.float64, "cpu"))
model, inputs = suite.to_dtype(model, inputs, DTYPES["bf16"], "cpu")
print("host:", machine_info(2, "few_calls.py")["host"]["summary"], flush=True)
fns, times = {}, {}
with torch.no_grad():
    ref = suite.call(spec, model, inputs)
    for name in ["eager", "fxcpp", "inductor_freezing"]:
        cfg = configs.CONFIGS[name]
        fn = cfg.compile(lambda *x: suite.call(spec, model, x))
        with cfg.compile_context():  # Inductor's freezing=True while it compiles (the first call)
            t = time.perf_counter(); out = fn(*inputs); first = time.perf_counter() - t
        ok = same_as_eager(ref, out, fp64_ref=ref64, tol=TOLERANCE["bf16"])
        print(f"{name}: first call (compile + run) {first:.1f} s, accuracy {'ok' if ok else 'FAIL'}", flush=True)
        fns[name], times[name] = fn, []
    for r in range(calls):
        for name, fn in fns.items():
            t = time.perf_counter(); fn(*inputs); times[name].append(time.perf_counter() - t)
        print("round", r, {k: f"{v[-1] * 1e3:.0f} ms" for k, v in times.items()}, flush=True)
med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
print("median ms:", {k: round(v * 1e3, 1) for k, v in med.items()})
print(f"fxcpp / inductor_freezing: {med['fxcpp'] / med['inductor_freezing']:.3f}; fxcpp / eager: {med['fxcpp'] / med['eager']:.3f}; "
      f"inductor_freezing / eager: {med['inductor_freezing'] / med['eager']:.3f}")
