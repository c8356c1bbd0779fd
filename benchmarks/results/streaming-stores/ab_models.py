"""The streaming-store rule on whole models: BERT-base, GPT-2 and ViT-B/16 at batch 8, fp32
(their fused LayerNorms move 9-19 MB per call: around the new threshold of half the 32 MiB
last-level cache). Two installs as in ab.py; each round runs one process per install,
alternating; a process compiles the three models and times them interleaved, 8 samples each
after three settling calls. Reported: the median over rounds of each process's median, in ms.

    python benchmarks/results/streaming-stores/ab_models.py BEFORE_DIR AFTER_DIR [rounds] > benchmarks/results/streaming-stores/ab_models.txt
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.append(ROOT)
from benchmarks.ab_installs import main as ab_main, time_interleaved  # noqa: E402

MODELS = ["bert_base", "gpt2", "vit_b16"]


def child():
    import torch

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
    print(json.dumps(time_interleaved(fns, 8, 3)))


if __name__ == "__main__":
    child() if "--child" in sys.argv else ab_main(__file__, "benchmarks/results/streaming-stores/ab_models.py", ["model (batch 8, fp32)"], 3, ".1f")
