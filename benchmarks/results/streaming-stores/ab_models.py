"""The streaming-store rule on whole models: BERT-base, GPT-2 and ViT-B/16 at batch 8, fp32
(their fused LayerNorms move 9-19 MB per call: around the new threshold of half the 32 MiB
last-level cache). Two installs as in ab.py; each round runs one process per install,
alternating; a process compiles the three models and times them interleaved, 8 samples each
after three settling calls. Reported: the median over rounds of each process's median, in ms.

    python benchmarks/results/streaming-stores/ab_models.py BEFORE_DIR AFTER_DIR [rounds] > benchmarks/results/streaming-stores/ab_models.txt
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODELS = ["bert_base", "gpt2", "vit_b16"]


def child():
    import torch

    sys.path.insert(0, ROOT)
    import fxcpp  # noqa: F401  (the install on PYTHONPATH)
    from benchmarks import suite

    torch.set_num_threads(2)
    specs = {s.name: s for s in suite.SUITE}
    fns = {}
    for name in MODELS:
        torch.manual_seed(0)
        model, inputs = specs[name].build(8)
        compiled = torch.compile(model, backend="fxcpp")
        fns[name] = lambda c=compiled, i=inputs, s=specs[name]: suite.call(s, c, i)
    samples = {k: [] for k in fns}
    with torch.no_grad():
        for f in fns.values():
            for _ in range(3):
                f()
        for _ in range(8):
            for k, f in fns.items():
                t0 = time.perf_counter()
                f()
                samples[k].append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({k: statistics.median(v) for k, v in samples.items()}))


def main():
    before, after = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    runs = {"before": [], "after": []}
    for _ in range(rounds):
        for label, d in (("before", before), ("after", after)):
            env = dict(os.environ, PYTHONPATH=d)
            out = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, check=True)
            runs[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
    import torch

    sys.path.insert(0, after)
    from fxcpp import _C

    print(f"host: {_C.host_info()['summary']}; torch {torch.__version__}; {rounds} rounds; median over rounds, ms")
    print(f"command: python benchmarks/results/streaming-stores/ab_models.py {' '.join(sys.argv[1:])}")
    print("| model (batch 8, fp32) | before | after | after / before |")
    print("|---|---|---|---|")
    for k in MODELS:
        b = statistics.median(r[k] for r in runs["before"])
        a = statistics.median(r[k] for r in runs["after"])
        print(f"| {k} | {b:.1f} | {a:.1f} | {a / b:.3f} |")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
