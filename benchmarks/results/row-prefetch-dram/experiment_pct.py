# Needs the experimental build described in experiment.txt (FXCPP_EXP_ROWPF); kept for its record.
import torch, sys, os, fxcpp
sys.path.insert(0,'/work/main')
from benchmarks.micro import native
import torch.utils.benchmark as tb
torch.manual_seed(0)
n = 768
def f(x, r, w, b): return torch.nn.functional.layer_norm(x + r, (n,), w, b)
def rms(x, w): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
torch.set_num_threads(2)
R = 16384
x, r, w, b = torch.randn(R, n), torch.randn(R, n), torch.randn(n), torch.randn(n)
c = torch.compile(f, backend="fxcpp"); c(x, r, w, b)
xr = torch.randn(R, 1024); w2 = torch.randn(1024)
c2 = torch.compile(rms, backend="fxcpp"); c2(xr, w2)
pfs = sys.argv[1].split(",")
res = {p: [] for p in pfs}
for _ in range(int(sys.argv[2])):
  for p in pfs:
    os.environ["FXCPP_EXP_ROWPF"] = p
    tr = native.stream_triad(2, 64, 10)["gbps_median"]
    t = tb.Timer("c(x,r,w,b)", globals=dict(c=c, x=x, r=r, w=w, b=b), num_threads=2).blocked_autorange(min_run_time=0.2).median
    t2 = tb.Timer("c(x,w)", globals=dict(c=c2, x=xr, w=w2), num_threads=2).blocked_autorange(min_run_time=0.2).median
    res[p].append((3*x.nbytes/t/1e9/tr, 2*xr.nbytes/t2/1e9/tr, tr))
    print(p, " ".join(f"{v:.2f}" for v in res[p][-1]), flush=True)
for p in pfs:
  o = res[p]; med = lambda k: sorted(x[k] for x in o)[len(o)//2]
  print(f"pf={p}: add_ln {med(0)*100:.0f}% rms {med(1)*100:.0f}% (triad {med(2):.1f})")
