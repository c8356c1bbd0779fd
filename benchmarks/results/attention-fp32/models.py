"""Suite transformers under fxcpp with ATen's attention native (FXCPP_ATTENTION=native) and as
the host's default rule picks (runtime/aten/attention_fp32.cpp). Each side compiles in its own
process (Dynamo shares one compiled graph between copies of a model, so two kernels cannot be
compared in one process); the processes alternate, `rounds` of each, and each times `calls`
calls after two warm-up calls. The table gives each side's median over its processes.

    python benchmarks/results/attention-fp32/models.py [--dtypes bf16,fp16] [--models bert_base,...]
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


def one(model: str, batch: int, dtype: str, calls: int) -> None:
    import torch

    import fxcpp
    sys.path.insert(0, ROOT)
    from benchmarks import suite

    spec = [s for s in suite.SUITE if s.name == model][0]
    m, inputs = spec.build(batch)
    m, inputs = suite.to_dtype(m.eval(), inputs, {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype], "cpu")
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
    widened = any(r.impl.startswith("aten in fp32") for r in report.rows)
    print(json.dumps({"ms": statistics.median(ts), "widened": widened, "host": fxcpp._C.host_info()["summary"]}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="bert_base,distilbert,gpt2,t5_small,vit_b16")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--one", nargs=3)
    a = ap.parse_args()
    if a.one:
        return one(a.one[0], int(a.one[1]), a.one[2], a.calls)
    host = None
    print("| model | batch | dtype | attention native ms | default ms | default / native | default's attention |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for model in a.models.split(","):
        for batch in a.batches.split(","):
            for dtype in a.dtypes.split(","):
                res = {"native": [], "default": []}
                widened = None
                for _ in range(a.rounds):
                    for side in ("native", "default"):
                        env = dict(os.environ)
                        env.pop("FXCPP_ATTENTION", None)
                        if side == "native":
                            env["FXCPP_ATTENTION"] = "native"
                        out = subprocess.run([sys.executable, __file__, "--calls", str(a.calls), "--one", model, batch, dtype],
                                             env=env, capture_output=True, text=True, check=True).stdout
                        r = json.loads(out.strip().splitlines()[-1])
                        res[side].append(r["ms"])
                        host = r["host"]
                        if side == "default":
                            widened = r["widened"]
                n, d = statistics.median(res["native"]), statistics.median(res["default"])
                print(f"| {model} | {batch} | {dtype} | {n:.2f} | {d:.2f} | {d / n:.2f} | "
                      f"{'fp32 (widened)' if widened else 'native'} |", flush=True)
    print(f"\nhost: {host}")


if __name__ == "__main__":
    main()
