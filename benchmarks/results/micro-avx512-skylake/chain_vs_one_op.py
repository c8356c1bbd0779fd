"""The 4-op chain of make micro against x * 2 compiled with fxcpp (not fused: ATen's mul, allocating) over
the same 64 MiB, medians (ms).
    python chain_vs_one_op.py            1 and 2 threads, with ATen's mul(out=) and copy_ into a held buffer (30 calls)
    python chain_vs_one_op.py LABEL      2 threads, the two fxcpp calls only (40 calls), one line per process
(streaming stores off: FXCPP_LLC_BYTES=4000000000; the reverted experiment: FXCPP_PW_PREFETCH=1|2
on a build with pointwise_prefetch_experiment.diff)."""
import statistics, sys, time
import torch
import fxcpp

x = torch.randn(1 << 24)
out = torch.empty_like(x)


def t(f, n):
    f(); s = []
    for _ in range(n):
        a = time.perf_counter(); f(); s.append(time.perf_counter() - a)
    return statistics.median(s) * 1e3


c = torch.compile(lambda x: (torch.relu(x * 2 + 1) - 0.5) * x, backend="fxcpp")
c2 = torch.compile(lambda x: x * 2, backend="fxcpp")
with torch.no_grad():
    if len(sys.argv) > 1:
        torch.set_num_threads(2)
        print(sys.argv[1], "pw4", round(t(lambda: c(x), 40), 2), "x*2", round(t(lambda: c2(x), 40), 2),
              fxcpp._C.cpu_fused_stats()["streamed"])
        sys.exit()
    for th in (1, 2):
        torch.set_num_threads(th)
        c(x); c2(x)
        for r in range(2):
            print(th, "fxcpp pw4", round(t(lambda: c(x), 30), 2), "fxcpp x*2", round(t(lambda: c2(x), 30), 2),
                  "| mul out prealloc", round(t(lambda: torch.mul(x, 2, out=out), 30), 2),
                  "| copy prealloc", round(t(lambda: out.copy_(x), 30), 2), flush=True)
