"""One attention call under fxcpp: ATen's flash kernel (FXCPP_ATTENTION=native) against the two
oneDNN matmuls around the softmax pass (FXCPP_ATTENTION=matmuls), per shape and dtype; for fp16
(`--dtypes fp16 --base fp32`) ATen's fp32 flash kernel on widened operands against the matmuls on
the same. Each side is compiled afresh (torch._dynamo.reset(), the variable is read when the
kernel is made); `rounds` alternating rounds, each the median of 5 loops of `calls` calls; the
table gives the median round of each side.

    python benchmarks/results/attention-matmuls/sdpa_alone.py [--rounds 3] [--dtypes fp32,bf16] [--base native]
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

import fxcpp

SHAPES = [  # name, b, heads, L, S, head dim, layout
    ("BERT b1", 1, 12, 128, 128, 64, "transposed"),
    ("BERT b8", 8, 12, 128, 128, 64, "transposed"),
    ("ViT-B/16 b1", 1, 12, 197, 197, 64, "transposed"),
    ("GPT-2 b1 (sliced qkv, causal)", 1, 12, 128, 128, 64, "sliced"),
    ("T5-small b1", 1, 8, 128, 128, 64, "transposed"),
    ("L 512", 1, 12, 512, 512, 64, "transposed"),
    ("decode L 1, S 128", 1, 12, 1, 128, 64, "contiguous"),
    ("decode L 1, S 1024", 1, 12, 1, 1024, 64, "contiguous"),
]


def operands(b, h, L, S, d, layout, dtype):
    g = torch.Generator().manual_seed(0)
    if layout == "contiguous":
        return [torch.randn(b, h, n, d, generator=g).to(dtype) for n in (L, S, S)]
    if layout == "transposed":
        return [torch.randn(b, n, h, d, generator=g).to(dtype).transpose(1, 2) for n in (L, S, S)]
    qkv = torch.randn(b, L, 3 * h * d, generator=g).to(dtype)
    return [t.view(b, L, h, d).transpose(1, 2) for t in qkv.split(h * d, dim=2)]


def timed(fn, xs, calls):
    for _ in range(3):
        fn(*xs)
    loops = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(calls):
            fn(*xs)
        loops.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(loops)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--base", default="native", help="FXCPP_ATTENTION of the side compared with the matmuls")
    a = ap.parse_args()
    dtypes = [{"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[d] for d in a.dtypes.split(",")]
    print(f"host: {fxcpp._C.host_info()['summary']}, {torch.get_num_threads()} threads, torch {torch.__version__}\n")
    base = {"native": "flash", "fp32": "flash in fp32"}[a.base]
    print(f"| shape | dtype | {base} us | matmuls us | matmuls / {base} | matmuls' kernels |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, b, h, L, S, d, layout in SHAPES:
        causal = layout == "sliced"
        for dtype in dtypes:
            xs = operands(b, h, L, S, d, layout, dtype)
            f = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
            res = {a.base: [], "matmuls": []}
            impl = ""
            with torch.no_grad():
                for _ in range(a.rounds):
                    for side in res:
                        os.environ["FXCPP_ATTENTION"] = side
                        torch._dynamo.reset()
                        res[side].append(timed(torch.compile(f, backend="fxcpp"), xs, a.calls))
                        if side == "matmuls" and not impl:
                            torch._dynamo.reset()
                            rows = fxcpp.explain(f, *xs).rows
                            impl = [r.impl for r in rows if "attention" in r.op][0].split(";")[-2 if dtype == torch.float16 else 0].strip()
            n, m = statistics.median(res[a.base]), statistics.median(res["matmuls"])
            print(f"| {name} | {str(dtype)[6:]} | {n:.0f} | {m:.0f} | {m / n:.2f} | {impl} |", flush=True)
    os.environ.pop("FXCPP_ATTENTION")


if __name__ == "__main__":
    main()
