"""Triage of a `fuzz.py --train` failure at its second step: after step 0's SGD update (as
fuzz._check_train makes it), the gradients of 40 other random weightings of the outputs, each
compared with fp64. Prints, per input and parameter, in how many fxcpp's gradient is further
from fp64 than eager's (RMSE) and both mean errors: about half with level means is rounding
luck (the failing weighting one draw of it); fxcpp further in nearly all is a bug.

    python tests/fuzz/train_weightings.py tests/fuzz/repros/repro_seed70432.py bfloat16
"""
import copy
import importlib.util
import os
import sys

import torch

import fxcpp  # noqa: F401 - registers the backend

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzz  # noqa: E402

DRAWS = 40


def main(repro: str, dtype_name: str) -> None:
    spec = importlib.util.spec_from_file_location("repro", repro)
    r = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(r)
    dtype = getattr(torch, dtype_name)
    model = r.Program().to(dtype)
    xs = r.make_inputs(dtype)
    mine, model64 = copy.deepcopy(model), copy.deepcopy(model).double()
    compiled = torch.compile(mine, backend="fxcpp")
    fuzz._forward_backward(model, xs, 0)
    fuzz.eager_step(model, mine, model64)  # step 0, as _check_train makes it
    totals = {}
    for draw in range(1, DRAWS + 1):
        for w in [*model.parameters(), *mine.parameters(), *model64.parameters()]:
            w.grad = None  # each draw's gradients alone
        _, g_eager = fuzz._forward_backward(model, xs, draw)
        _, g64 = fuzz._forward_backward(model64, [x.double() for x in xs], draw)
        _, g_mine = fuzz._forward_backward(compiled, xs, draw, params=list(mine.parameters()))
        for k, ge in g_eager.items():
            if ge is None:
                continue
            rmse = lambda g: ((g.double() - g64[k]) ** 2).mean().sqrt().item()  # noqa: E731
            t = totals.setdefault(k, [0, 0.0, 0.0])
            t[0] += rmse(g_mine[k]) > rmse(ge)
            t[1] += rmse(ge) / DRAWS
            t[2] += rmse(g_mine[k]) / DRAWS
    for k, (further, e, f) in totals.items():
        print(f"{k}: fxcpp further from fp64 than eager in {further}/{DRAWS} weightings; "
              f"mean RMSE eager {e:.4g}, fxcpp {f:.4g}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
