"""A/B: the transcendentals computed two vectors at a time in lockstep (after, vec_pair.h) or one
vector at a time (before). Two installs built side by side in /tmp/ab/{before,after}
(benchmarks/ab_installs.py); medians of 200 calls, 2 threads.
    python benchmarks/results/lockstep-pairs/ab.py [rounds]"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))

if "--child" in sys.argv:
    import torch
    import torch.nn.functional as F
    from benchmarks.ab_installs import median_ms

    torch.set_num_threads(2)
    torch.manual_seed(0)
    cases = {
        "gelu(x) * 2 [4096, 3072] fp32": (lambda t: F.gelu(t) * 2, (torch.randn(4096, 3072),)),
        "gelu(x) * 2 [4096, 3072] bf16": (lambda t: F.gelu(t) * 2, (torch.randn(4096, 3072).bfloat16(),)),
        "gelu_tanh(x) * 2 [4096, 3072] fp32": (lambda t: F.gelu(t, approximate="tanh") * 2, (torch.randn(4096, 3072),)),
        "tanh(x) * 2 [1024, 1024] fp32": (lambda t: torch.tanh(t) * 2, (torch.randn(1024, 1024),)),
        "silu(a) * b [1024, 2048] fp32": (lambda a, b: F.silu(a) * b, (torch.randn(1024, 2048), torch.randn(1024, 2048))),
        "sigmoid(x) * x + 1 [1024, 2048] fp32": (lambda t: torch.sigmoid(t) * t + 1, (torch.randn(1024, 2048),)),
        "softmax(x * 0.125 + m) [4096, 4096] fp32": (lambda x, m: torch.softmax(x * 0.125 + m, dim=-1),
                                                     (torch.randn(4096, 4096), torch.randn(1, 4096))),
        "log_softmax(x) [4096, 4096] fp32": (lambda x: torch.log_softmax(x, dim=-1), (torch.randn(4096, 4096),)),
        "LayerNorm+GELU+residual [4096, 768] fp32": (
            lambda x, r, w, b: F.gelu(F.layer_norm(x, (768,), w, b)) + r,
            (torch.randn(4096, 768), torch.randn(4096, 768), torch.randn(768), torch.randn(768))),
        "the probe x + gelu(ln(x)) [4096, 768] fp32": (
            lambda x, w, b: x + F.gelu(F.layer_norm(x, (768,), w, b)), (torch.randn(4096, 768), torch.randn(768), torch.randn(768))),
        "the probe x + gelu(ln(x)) [4096, 768] bf16": (
            lambda x, w, b: x + F.gelu(F.layer_norm(x, (768,), w, b)),
            (torch.randn(4096, 768).bfloat16(), torch.randn(768).bfloat16(), torch.randn(768).bfloat16())),
    }
    out = {}
    with torch.no_grad():
        for k, (f, a) in cases.items():
            c = torch.compile(f, backend="fxcpp")
            out[k] = median_ms(lambda: c(*a), calls=200)
    print(json.dumps(out))
else:
    import fxcpp
    from benchmarks.ab_installs import alternate

    print("host:", fxcpp._C.host_info()["summary"])
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for k, (b, a) in alternate(os.path.abspath(__file__), "/tmp/ab/before", "/tmp/ab/after", rounds).items():
        print(f"{k:44s} before {b:8.3f} ms  after {a:8.3f} ms  after/before {a / b:.2f}")
