"""Is a --train failure gradient noise? (tests/fuzz/README.md, run 28.) Over N random inputs of
the reproducer's program (its input shapes, other seeds), the RMSE against the fp64 model of
eager's and fxcpp's gradient KEY after STEPS training steps, and how often each side is above
3x the other's (the harness rule's multiplier):

    python tests/fuzz/noise/grad_noise.py REPRO_DIR SEED "input 1" fp32 [N=30] [STEPS=1]
"""
import copy
import importlib
import os
import statistics as st
import sys

import torch

import fxcpp  # noqa: F401  (registers the backend)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from fuzz import TORCH_DTYPES  # noqa: E402

repro_dir, seed, key, dt = sys.argv[1:5]
n = int(sys.argv[5]) if len(sys.argv) > 5 else 30
steps = int(sys.argv[6]) if len(sys.argv) > 6 else 1
sys.path.insert(0, repro_dir)
r = importlib.import_module(f"repro_seed{seed}")  # a --train reproducer (fuzz.write_repro)
dtype = TORCH_DTYPES[dt]
shapes = [x.shape for x in r.make_inputs(torch.float32)]


def errors(xs):
    """(eager's, fxcpp's) RMSE against fp64 of the gradient KEY at the last of STEPS steps."""
    model = r.Program().to(dtype)
    mine, m64 = copy.deepcopy(model), copy.deepcopy(model).double()
    torch._dynamo.reset()
    compiled = torch.compile(mine, backend="fxcpp")
    for step in range(steps):
        _, ge = r._forward_backward(model, xs, step)
        _, g64 = r._forward_backward(m64, [x.double() for x in xs], step)
        _, gf = r._forward_backward(compiled, xs, step, params=list(mine.parameters()))
        r.eager_step(model, mine, m64)
    return tuple((g[key].double() - g64[key]).pow(2).mean().sqrt().item() for g in (ge, gf))


def inputs(i):
    g = torch.Generator().manual_seed(1000 + i)
    return [torch.randn(s, generator=g).to(dtype) for s in shapes]


runs = [errors(inputs(i)) for i in range(n)]
e, f = [a for a, _ in runs], [b for _, b in runs]
print(f"seed {seed}, {key}, step {steps - 1}, {n} inputs: RMSE against fp64, eager median {st.median(e):.3g} "
      f"mean {st.mean(e):.3g}; fxcpp median {st.median(f):.3g} mean {st.mean(f):.3g}; fxcpp above 3x eager's in "
      f"{sum(b > 3 * a for a, b in runs)}, eager above 3x fxcpp's in {sum(a > 3 * b for a, b in runs)}")
