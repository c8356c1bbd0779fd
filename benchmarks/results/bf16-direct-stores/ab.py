"""A/B: a bf16 output rounded straight from the op computing it (after, put_bf16 in interp.h) or
written to a register in fp32 and converted by its Store (before). Two installs built side by
side in /tmp/ab/{before,after} (benchmarks/ab_installs.py); medians of 200 calls, 2 threads;
each case in fp32 too (unchanged code: a control) for the bf16 / fp32 ratio.
    python benchmarks/results/bf16-direct-stores/ab.py [rounds]"""
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
    base = {
        "the probe x + gelu(ln(x)) [4096, 768]": (lambda x, w, b: x + F.gelu(F.layer_norm(x, (768,), w, b)),
                                                 ((4096, 768), (768,), (768,))),
        "add + LayerNorm [4096, 768]": (lambda x, r, w, b: F.layer_norm(x + r, (768,), w, b),
                                        ((4096, 768), (4096, 768), (768,), (768,))),
        "RMSNorm [4096, 1024]": (lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
                                 ((4096, 1024), (1024,))),
        "softmax(x * 0.125 + m) [2048, 2048]": (lambda x, m: torch.softmax(x * 0.125 + m, dim=-1),
                                                ((2048, 2048), (1, 2048))),
        "gelu(x) * 2 [4096, 3072]": (lambda t: F.gelu(t) * 2, ((4096, 3072),)),
        "silu(a) * b [1024, 2048]": (lambda a, b: F.silu(a) * b, ((1024, 2048), (1024, 2048))),
        "x * 2 + 1 [4096, 4096]": (lambda t: t * 2 + 1, ((4096, 4096),)),
    }
    out = {}
    with torch.no_grad():
        for k, (f, shapes) in base.items():
            for name, dt in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
                a = [torch.randn(s).to(dt) for s in shapes]
                c = torch.compile(f, backend="fxcpp")
                out[f"{k} {name}"] = median_ms(lambda: c(*a), calls=200)
    print(json.dumps(out))
else:
    import fxcpp
    from benchmarks.ab_installs import alternate

    print("host:", fxcpp._C.host_info()["summary"])
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    res = alternate(os.path.abspath(__file__), "/tmp/ab/before", "/tmp/ab/after", rounds)
    for k, (b, a) in res.items():
        print(f"{k:46s} before {b:8.3f} ms  after {a:8.3f} ms  after/before {a / b:.2f}")
    print("bf16 / fp32 (after):")
    for k in res:
        if k.endswith(" bf16"):
            k32 = k[:-5] + " fp32"
            print(f"  {k[:-5]:44s} before {res[k][0] / res[k32][0]:.2f}  after {res[k][1] / res[k32][1]:.2f}")
