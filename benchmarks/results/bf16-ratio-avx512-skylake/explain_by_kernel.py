"""fxcpp.explain's per-node times of one suite model, summed per (kernel, op, impl), in fp32 and
bf16, the two dtypes alternated twice (this VM drifts between minutes).
    python benchmarks/results/bf16-ratio-avx512-skylake/explain_by_kernel.py gpt2 8"""
import collections, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
import torch
import fxcpp
from benchmarks import suite

torch.set_num_threads(2)
name, batch = sys.argv[1], int(sys.argv[2])
spec = [s for s in suite.SUITE if s.name == name][0]
print("host:", fxcpp._C.host_info()["summary"], "torch", torch.__version__)
built = {}
for dt in (torch.float32, torch.bfloat16):
    torch.manual_seed(0)
    model, inputs = spec.build(batch)
    built[dt] = suite.to_dtype(model, inputs, dt, "cpu")
for rnd in range(2):
    for dt, (model, inputs) in built.items():
        torch._dynamo.reset()
        with torch.no_grad():
            rep = fxcpp.explain(lambda *a: suite.call(spec, model, a), *inputs)
        agg = collections.defaultdict(float); cnt = collections.Counter()
        for r in rep.rows:
            if r.time_us is None: continue
            kern = r.ran or r.kernel
            key = (kern, r.op + (" " + r.shape if kern == "onednn" else ""), (r.impl or "")[:60])
            agg[key] += r.time_us; cnt[key] += 1
        print(f"== round {rnd}, {dt}: total {sum(agg.values())/1e3:.1f} ms", flush=True)
        for k, v in sorted(agg.items(), key=lambda kv: -kv[1])[:12]:
            print(f"  {v/1e3:8.2f} ms  x{cnt[k]:3d}  {k[0]:9s} {k[1][:50]:50s} {k[2]}")
