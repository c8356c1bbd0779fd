"""fxcpp's bf16 time over its fp32 time for one suite model, both compiled in this process and
called interleaved (10 rounds, medians). AB_MODE=native or =fp32 sets FXCPP_BF16 for the bf16
model (unset: the host's default path, fxcpp._C.host_info()["native_bf16"]).

    AB_MODE=native python benchmarks/results/bf16-dot-rate/ab.py bert_base 1 10
"""
import os, sys, time, copy, torch
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
from benchmarks import suite
import fxcpp
name, batch, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 10
spec = [s for s in suite.SUITE if s.name == name][0]
model, inputs = spec.build(batch)
cfgs = {}
def make(dtype, env):
    if env: os.environ["FXCPP_BF16"] = env
    else: os.environ.pop("FXCPP_BF16", None)
    m, x = suite.to_dtype(copy.deepcopy(model), inputs, dtype, "cpu")
    c = torch.compile(m, backend="fxcpp")
    with torch.no_grad():
        out = suite.call(spec, c, x); suite.call(spec, c, x)
    os.environ.pop("FXCPP_BF16", None)
    return c, x, out
cfgs["fp32"] = make(torch.float32, None)
mode = os.environ.get("AB_MODE", "")
cfgs["bf16"] = make(torch.bfloat16, mode or None)
ref = cfgs["fp32"][2][0].float()
for k, (c, x, out) in cfgs.items():
    print(k, "max diff vs fp32:", (out[0].float() - ref).abs().max().item())
ts = {k: [] for k in cfgs}
with torch.no_grad():
    for _ in range(reps):
        for k, (c, x, _) in cfgs.items():
            t = time.perf_counter(); suite.call(spec, c, x); ts[k].append(time.perf_counter() - t)
med = {k: sorted(v)[len(v)//2] * 1e3 for k, v in ts.items()}
h = fxcpp._C.host_info()
print(f"host: {h['summary']} bf16_dot_rate {h['bf16_dot_rate']:.2f} native_bf16 {h['native_bf16']}")
print(name, batch, " ".join(f"{k} {v:.2f} ms" for k, v in med.items()),
      f"| bf16({mode or 'default'})/fp32 {med['bf16']/med['fp32']:.2f}")
