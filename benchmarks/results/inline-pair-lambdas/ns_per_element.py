"""ns per element of fused ops (op(x) * 2) on one thread, n = argv[1] (1M: inside the L3), with explain()'s kernel counts.
    python benchmarks/results/inline-pair-lambdas/ns_per_element.py 1048576"""
import torch, time, fxcpp, sys
torch.set_num_threads(1)
ops = {"mul": lambda x: x*2*3, "exp": lambda x: torch.exp(x)*2, "tanh": lambda x: torch.tanh(x)*2,
       "sigmoid": lambda x: torch.sigmoid(x)*2, "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh")*2,
       "gelu_erf": lambda x: torch.nn.functional.gelu(x)*2, "silu": lambda x: torch.nn.functional.silu(x)*2}
n = int(sys.argv[1]) if len(sys.argv)>1 else 1<<16
x = torch.randn(n)*3
for name, fn in ops.items():
    torch._dynamo.reset()
    c = torch.compile(fn, backend="fxcpp")
    with torch.no_grad():
        for _ in range(3): c(x)
        e = fxcpp.explain(fn, x)
        reps = max(3, (1<<24)//n); ts=[]
        for _ in range(7):
            t=time.perf_counter()
            for _ in range(reps): c(x)
            ts.append((time.perf_counter()-t)/reps)
    t=min(ts)
    print(f"{name:9s} {t/n*1e9:.3f} ns/elt {t/n*3.2e9:5.2f} cyc  {dict(e.kernel_counts)}")
