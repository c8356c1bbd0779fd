"""Suite transformers under fxcpp with ATen's flash attention (FXCPP_ATTENTION=native) and with
the default, where each attention node measures oneDNN's two matmuls around a softmax pass
against ATen's kernel at its first call (runtime/onednn/attention_kernel.cpp). Each side
compiles in its own process (Dynamo shares one compiled graph between copies of a model); the
processes alternate, `rounds` of each, and each times `calls` calls after two warm-up calls.
The table gives each side's median over its processes, and which kernel the default's
attention nodes kept.

    python benchmarks/results/attention-matmuls/models.py [--dtypes fp32,bf16] [--models bert_base,...]

For fp16 (`--dtypes fp16 --base fp32`), the other side is the widened ATen fp32 flash kernel
that fp16 ran before (FXCPP_ATTENTION=fp32).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
OP = "aten::_scaled_dot_product_flash_attention_for_cpu"


def one(model: str, batch: int, dtype: str, calls: int) -> None:
    import torch

    import fxcpp
    sys.path.insert(0, ROOT)
    from benchmarks import suite

    spec = [s for s in suite.SUITE if s.name == model][0]
    m, inputs = spec.build(batch)
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    m, inputs = suite.to_dtype(m.eval(), inputs, dt, "cpu")
    with torch.no_grad():
        fn = torch.compile(m, backend="fxcpp")
        for _ in range(2):
            suite.call(spec, fn, inputs)
        ts = []
        for _ in range(calls):
            t = time.perf_counter()
            suite.call(spec, fn, inputs)
            ts.append((time.perf_counter() - t) * 1e3)
        report = fxcpp.explain(suite.CallModule(spec, m), *inputs)
    rows = [r for r in report.rows if r.op == OP]
    kept = sorted({r.kernel for r in rows})
    att_us = sum(r.time_us or 0.0 for r in rows)
    print(json.dumps({"ms": statistics.median(ts), "kernels": kept, "attention_ms": att_us / 1e3,
                      "host": fxcpp._C.host_info()["summary"]}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="bert_base,distilbert,gpt2,t5_small,vit_b16")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--base", default="native", help="FXCPP_ATTENTION of the other side")
    ap.add_argument("--one", nargs=3)
    a = ap.parse_args()
    if a.one:
        return one(a.one[0], int(a.one[1]), a.one[2], a.calls)
    host = None
    base = {"native": "flash", "fp32": "flash in fp32"}[a.base]
    print(f"| model | batch | dtype | {base} ms | default ms | default / {base} | attention nodes' time, {base} -> default (explain) | default's attention kernel |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for model in a.models.split(","):
        for batch in a.batches.split(","):
            for dtype in a.dtypes.split(","):
                res = {"native": [], "default": []}
                att = {"native": [], "default": []}
                kernels = None
                for _ in range(a.rounds):
                    for side in ("native", "default"):
                        env = dict(os.environ)
                        env.pop("FXCPP_ATTENTION", None)
                        if side == "native":
                            env["FXCPP_ATTENTION"] = a.base
                        out = subprocess.run([sys.executable, __file__, "--calls", str(a.calls), "--one", model, batch, dtype],
                                             env=env, capture_output=True, text=True, check=True).stdout
                        r = json.loads(out.strip().splitlines()[-1])
                        res[side].append(r["ms"])
                        att[side].append(r["attention_ms"])
                        host = r["host"]
                        if side == "default":
                            kernels = r["kernels"]
                n, d = statistics.median(res["native"]), statistics.median(res["default"])
                an, ad = statistics.median(att["native"]), statistics.median(att["default"])
                print(f"| {model} | {batch} | {dtype} | {n:.2f} | {d:.2f} | {d / n:.2f} | {an:.2f} -> {ad:.2f} ms | "
                      f"{', '.join(kernels)} |", flush=True)
    print(f"\nhost: {host}")


if __name__ == "__main__":
    main()
