# One process: each kernel at several sizes (MiB moved = inputs + outputs), ms per call (min of 3 x 0.3 s).
# DTYPE=bf16: the same MiB moved in bf16 (twice the elements).
import os, sys, time, json, torch, fxcpp
F = torch.nn.functional
def tm(f, a, t=0.3):
    f(*a); s = time.perf_counter(); k = 0
    while time.perf_counter() - s < t: f(*a); k += 1
    return (time.perf_counter() - s) / k * 1e3
def make(name, mib):
    el = int(mib * 2**20 / 4)
    if name == "pointwise4":
        n = el // 2; return (lambda x: (torch.relu(x * 2 + 1) - 0.5) * x), (torch.randn(n),)
    if name == "softmax":
        r = el // 2 // 4096; return (lambda x, m: torch.softmax(x * 0.125 + m, -1)), (torch.randn(r, 4096), torch.randn(1, 4096))
    if name == "add_ln":
        r = el // 3 // 768; return (lambda x, y, w, b: F.layer_norm(x + y, (768,), w, b)), (torch.randn(r, 768), torch.randn(r, 768), torch.randn(768), torch.randn(768))
    if name == "softmax_then_mm":  # a producer and its consumer: the matmul reads the softmax's output
        r = el // 2 // 4096; return (lambda x, m, v: torch.softmax(x * 0.125 + m, -1) @ v), (torch.randn(r, 4096), torch.randn(1, 4096), torch.randn(4096, 16))
DT = dict(fp32=torch.float32, bf16=torch.bfloat16)[os.environ.get('DTYPE', 'fp32')]
res = {}
with torch.no_grad():
    for name in sys.argv[2].split(","):
        for mib in [float(s) for s in sys.argv[3].split(",")]:
            f, a = make(name, mib * 4 / DT.itemsize)
            a = tuple(t.to(DT) for t in a)
            c = torch.compile(f, backend="fxcpp")
            res[f"{name}/{mib:g}"] = min(tm(c, a) for _ in range(3))
            torch._dynamo.reset()
print(json.dumps({"mode": sys.argv[1], "res": res}))
