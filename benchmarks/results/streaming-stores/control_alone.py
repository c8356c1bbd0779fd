"""The 512-row softmax and pointwise chain of ab.py in a process of their own (no large kernel beside
them), once per install, three alternating rounds:
    for i in 1 2 3; do PYTHONPATH=BEFORE_DIR python control_alone.py before; PYTHONPATH=AFTER_DIR python control_alone.py after; done > control_alone.txt"""
import time, statistics, torch, torch.nn.functional as F, fxcpp, sys
torch.set_num_threads(2); torch.manual_seed(0)
x, w, b = torch.randn(512, 768), torch.randn(768), torch.randn(768)
fs = {"softmax": torch.compile(lambda x: torch.softmax(x * 0.125, -1), backend="fxcpp"),
      "chain": torch.compile(lambda x: (x * 2.0 + 1.0).relu() * w, backend="fxcpp")}
with torch.no_grad():
    for f in fs.values():
        for _ in range(5): f(x)
    s = {k: [] for k in fs}
    for _ in range(200):
        for k, f in fs.items():
            t = time.perf_counter(); f(x); s[k].append(time.perf_counter() - t)
print(sys.argv[1], {k: round(statistics.median(v) * 1e3, 4) for k, v in s.items()})
