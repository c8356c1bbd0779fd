import resource, sys, os, torch
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../.."))
from benchmarks import suite
import fxcpp
def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
def peak(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
spec = [s for s in suite.SUITE if s.name == "bert_base"][0]
model, inputs = spec.build(1)
model, inputs = suite.to_dtype(model, inputs, torch.bfloat16, "cpu")
with torch.no_grad():
    suite.call(spec, model, inputs)
    base = rss(); print(f"after eager call: rss {base:.0f} peak {peak():.0f}")
    c = torch.compile(lambda *a: suite.call(spec, model, a), backend="fxcpp", options={"freeze": sys.argv[1] == "1"})
    c(*inputs)
    print(f"after first call: rss {rss():.0f} peak {peak():.0f}")
    c(*inputs)
    print(f"after second call: rss {rss():.0f} peak {peak():.0f}")
