# The 4-op chain and x * 2 under fxcpp, one line per process: python chain_ab.py LABEL (streaming stores off: FXCPP_LLC_BYTES=4000000000; the reverted experiment: FXCPP_PW_PREFETCH=1|2 on a build with pointwise_prefetch_experiment.diff).
import time, torch, statistics, fxcpp, sys
torch.set_num_threads(2)
x = torch.randn(1 << 24)
def t(f, n=40):
    f(); s=[]
    for _ in range(n):
        a=time.perf_counter(); f(); s.append(time.perf_counter()-a)
    return statistics.median(s)*1e3
fn = lambda x: (torch.relu(x * 2 + 1) - 0.5) * x
fn2 = lambda x: x * 2
c = torch.compile(fn, backend="fxcpp"); c2 = torch.compile(fn2, backend="fxcpp")
with torch.no_grad():
    print(sys.argv[1], "pw4", round(t(lambda: c(x)),2), "x*2", round(t(lambda: c2(x)),2), fxcpp._C.cpu_fused_stats()["streamed"])
