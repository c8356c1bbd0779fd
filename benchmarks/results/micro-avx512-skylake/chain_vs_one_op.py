# The 4-op chain against one op and ATen's mul(out=) over 64 MiB, 1 and 2 threads (medians of 30 calls, ms).
import time, torch, statistics, fxcpp, sys
x = torch.randn(1 << 24)
out = torch.empty_like(x)
def t(f, n=30):
    f(); s=[]
    for _ in range(n):
        a=time.perf_counter(); f(); s.append(time.perf_counter()-a)
    return statistics.median(s)*1e3
fn = lambda x: (torch.relu(x * 2 + 1) - 0.5) * x
fn2 = lambda x: x * 2
c = torch.compile(fn, backend="fxcpp")
c2 = torch.compile(fn2, backend="fxcpp")
with torch.no_grad():
  for th in (1, 2):
    torch.set_num_threads(th)
    c(x); c2(x)
    for r in range(2):
        print(th, "fxcpp pw4", round(t(lambda: c(x)),2), "fxcpp x*2", round(t(lambda: c2(x)),2),
              "| mul out prealloc", round(t(lambda: torch.mul(x, 2, out=out)),2),
              "| copy prealloc", round(t(lambda: out.copy_(x)),2), flush=True)
print(fxcpp._C.cpu_fused_stats() if hasattr(fxcpp._C, "cpu_fused_stats") else "")
