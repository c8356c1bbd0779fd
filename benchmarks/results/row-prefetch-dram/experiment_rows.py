# Needs the experimental build described in experiment.txt (FXCPP_EXP_ROWPF); kept for its record.
import torch, sys, os, fxcpp
sys.path.insert(0,'/work/main')
from benchmarks.micro import native
import torch.utils.benchmark as tb
torch.manual_seed(0)
n = 768
def add_ln(x, r, w, b): return torch.nn.functional.layer_norm(x + r, (n,), w, b)
def rms(x, w): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
def bias_relu(x, w, b): return (x * w + b).relu()
def softmax(x, m): return torch.softmax(x * 0.125 + m, -1)
torch.set_num_threads(2)
R = int(sys.argv[3])
cases = {}
def mk(name, fn, args):
  torch._dynamo.reset()
  c = torch.compile(fn, backend="fxcpp"); c(*args); c(*args)
  nb = sum(a.nbytes for a in args) + args[0].nbytes
  cases[name] = (c, args, nb)
for dt in (torch.float32, torch.bfloat16):
  s = "" if dt == torch.float32 else "_bf16"
  mk("add_ln" + s, add_ln, [t.to(dt) for t in (torch.randn(R, n), torch.randn(R, n), torch.randn(n), torch.randn(n))])
  mk("rms" + s, rms, [t.to(dt) for t in (torch.randn(R, 1024), torch.randn(1024))])
  mk("bias_relu" + s, bias_relu, [t.to(dt) for t in (torch.randn(R, n), torch.randn(n), torch.randn(n))])
pfs = sys.argv[1].split(",")
res = {(p, k): [] for p in pfs for k in cases}
for _ in range(int(sys.argv[2])):
  for p in pfs:
    os.environ["FXCPP_EXP_ROWPF"] = p
    tr = native.stream_triad(2, 64, 10)["gbps_median"]
    for k, (c, args, nb) in cases.items():
      t = tb.Timer("c(*a)", globals=dict(c=c, a=args), num_threads=2).blocked_autorange(min_run_time=0.15).median
      res[(p, k)].append(t)
print("R", R, "times us (median), ratio to pf=" + pfs[0])
for k in cases:
  base = sorted(res[(pfs[0], k)])[len(res[(pfs[0], k)])//2]
  print(f"{k:14s}", " ".join(f"pf={p}: {sorted(res[(p,k)])[len(res[(p,k)])//2]*1e6:8.1f} ({sorted(res[(p,k)])[len(res[(p,k)])//2]/base:.2f})" for p in pfs))
