import sys, collections, torch, fxcpp
from benchmarks import suite
spec = [s for s in suite.SUITE if s.name == "gpt2"][0]
for dt in (torch.float32, torch.bfloat16):
    torch._dynamo.reset()
    model, inputs = spec.build(1)
    model, inputs = suite.to_dtype(model, inputs, dt, "cpu")
    with torch.no_grad():
        rep = fxcpp.explain(lambda *a: suite.call(spec, model, a), *inputs)
    agg = collections.defaultdict(float); cnt = collections.Counter()
    for r in rep.rows:
        if r.time_us is None: continue
        key = (r.ran or r.kernel, r.op if (r.ran or r.kernel) != "onednn" else r.op + " " + r.shape)
        agg[key] += r.time_us; cnt[key] += 1
    tot = sum(agg.values())
    print(f"== {dt}: total {tot/1e3:.1f} ms")
    for k, v in sorted(agg.items(), key=lambda kv: -kv[1])[:18]:
        print(f"  {v/1e3:8.2f} ms  x{cnt[k]:3d}  {k[0]:8s} {k[1][:90]}")
