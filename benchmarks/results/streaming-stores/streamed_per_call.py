"""Outputs written with streaming stores per call of BERT-base, GPT-2 and ViT-B/16 at batch 8 fp32:
    PYTHONPATH=AFTER_DIR python benchmarks/results/streaming-stores/streamed_per_call.py > benchmarks/results/streaming-stores/streamed_per_call.txt"""
import sys, torch
sys.path.insert(0, "/work/main")
import fxcpp
from fxcpp import _C
from benchmarks import suite
torch.set_num_threads(2)
specs = {s.name: s for s in suite.SUITE}
for name in ("bert_base", "gpt2", "vit_b16"):
    torch.manual_seed(0)
    m, i = specs[name].build(8)
    c = torch.compile(m, backend="fxcpp")
    with torch.no_grad():
        suite.call(specs[name], c, i)
        b = _C.cpu_fused_stats()["streamed"]
        suite.call(specs[name], c, i)
        print(name, "streamed outputs per call:", _C.cpu_fused_stats()["streamed"] - b)
