"""A/B: the attention matmuls' per-call glue (old execute vs call_args.h), FXCPP_ATTENTION=matmuls.
python ab.py BEFORE_DIR AFTER_DIR ROUNDS (each dir holds an fxcpp install; README.md)."""
import json, os, sys
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))  # the repo
if sys.argv[1] == "--child":
    os.environ["FXCPP_ATTENTION"] = "matmuls"
    import torch, torch.nn.functional as F
    import fxcpp
    from benchmarks.ab_installs import median_ms
    res = {}
    for B, H, L, E in ((1, 12, 16, 64), (1, 12, 128, 64)):
        q, k, v = (torch.randn(B, H, L, E, generator=torch.Generator().manual_seed(i)) for i in range(3))
        fn = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), backend="fxcpp")
        with torch.no_grad():
            res[f"L{L}"] = median_ms(lambda: fn(q, k, v), calls=2000, warmup=50)
    print(json.dumps(res))
else:
    from benchmarks.ab_installs import alternate
    for k, (b, a) in alternate(__file__, sys.argv[1], sys.argv[2], int(sys.argv[3])).items():
        print(f"{k}: before {b*1e3:.1f} us, after {a*1e3:.1f} us, after/before {a/b:.3f}")
