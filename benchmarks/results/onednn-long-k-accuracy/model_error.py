"""fp32 models as a whole: how far fxcpp's output and eager's land from the model run in fp64, on
the host this runs on. Made for the AMD hosts, where eager's MKL GEMM is more accurate than
oneDNN's (gemm_error_by_k.py): does any model pass the harness rule's 2x?

    PYTHONPATH=. python benchmarks/results/onednn-long-k-accuracy/model_error.py   # model_error_zen5.txt

Each row: RMSE of the model's first output against fp64, eager's and fxcpp's (its own choices,
nothing forced), and their ratio."""
import torch

import fxcpp
from benchmarks import suite
from benchmarks.machine import machine_info

MODELS = [("bert_base", 1), ("distilbert", 1), ("gpt2", 1), ("t5_small", 1), ("vit_b16", 1), ("mlp", 32),
          ("resnet50", 1)]

m = machine_info(torch.get_num_threads(), "PYTHONPATH=. python benchmarks/results/onednn-long-k-accuracy/model_error.py")
print(m["cpu_model"], "|", fxcpp._C.host_info()["summary"], "| torch", m["torch_version"], "| commit",
      m["git_commit"][:10], m["date"])
print(f"{'model':>12} {'batch':>5} | {'eager RMSE':>10} {'fxcpp RMSE':>10} {'ratio':>5}")
for name, batch in MODELS:
    spec = next(s for s in suite.SUITE if s.name == name)
    torch._dynamo.reset()
    model, inputs = spec.build(batch)
    wide = tuple(i.double() if i is not None and i.is_floating_point() else i for i in inputs)
    with torch.no_grad():
        ye = suite.call(spec, model, inputs)[0]
        y64 = suite.call(spec, spec.build(batch)[0].double(), wide)[0]
        yc = torch.compile(suite.CallModule(spec, model), backend="fxcpp")(*inputs)[0]
    rmse = lambda y: ((y.double() - y64) ** 2).mean().sqrt().item()  # noqa: E731
    print(f"{name:>12} {batch:>5} | {rmse(ye):>10.3g} {rmse(yc):>10.3g} {rmse(yc) / rmse(ye):>5.2f}", flush=True)
