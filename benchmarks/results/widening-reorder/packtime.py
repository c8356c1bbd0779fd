# First-call packing time: 24 Linear(2048, 2048) layers and a small conv stack, bf16, packed.
import torch, fxcpp, time, sys, os
torch.manual_seed(0)
freeze = sys.argv[1] == "1"
torch.set_num_threads(2)
lin = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(24)]).to(torch.bfloat16).eval()
conv = torch.nn.Sequential(*[torch.nn.Conv2d(256, 256, 3, padding=1) for _ in range(8)]).to(torch.bfloat16).eval()
x = torch.randn(64, 2048).bfloat16(); y = torch.randn(1, 256, 14, 14).bfloat16()
with torch.no_grad():
    for name, m, inp in [("linear", lin, x), ("conv", conv, y)]:
        ref = m(inp)
        os.environ["FXCPP_KERNEL_CHOICE"] = "onednn"
        c = torch.compile(m, backend="fxcpp", options={"freeze": freeze, "cache": False})
        t0 = time.perf_counter(); out = c(inp); t1 = time.perf_counter(); out2 = c(inp); t2 = time.perf_counter()
        out3 = c(inp); t3 = time.perf_counter()
        print(f"{name}: first (compile + pack) {t1-t0:.3f} s, second {1e3*(t2-t1):.1f} ms, third {1e3*(t3-t2):.1f} ms, max diff vs eager {(out3.float()-ref.float()).abs().max().item():.3g}")
