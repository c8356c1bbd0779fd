"""Seeded random pointwise / reduction / norm programs, as Python functions over tensors.

Each program draws a domain (rank 1-4, small dims with some 1s, sometimes one long row), a few
inputs broadcastable to it (fp32/bf16/fp16, some non-contiguous, maybe a bool mask), then a
chain of steps over the values built so far: unary and binary ops (broadcasting), reductions
over the last dims with keepdim (whose results are used against full-size values), softmax,
log_softmax and layer_norm. It returns one or two of the values. Values are kept in ranges
where eager itself is finite (exp only of bounded values, division by |x| + 0.5, ...), so a
difference is a bug, not overflow.
"""
from __future__ import annotations

import random

import torch
import torch.nn.functional as F

UNARY = {
    "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "abs": torch.abs, "neg": torch.neg,
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu, "erf": torch.erf,
    "sin": torch.sin, "cos": torch.cos, "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2), "elu": F.elu, "relu6": F.relu6,
    "exp_tanh": lambda x: torch.exp(torch.tanh(x)), "log1p_abs": lambda x: torch.log1p(x.abs()),
    "sqrt_abs": lambda x: torch.sqrt(x.abs() + 0.1), "rsqrt_abs": lambda x: torch.rsqrt(x.abs() + 0.5),
    "square": lambda x: x * x, "clamp": lambda x: x.clamp(-0.5, 0.75), "scale": lambda x: x * 1.5 - 0.25,
    "recip": lambda x: 1.0 / (x.abs() + 0.5), "pow3": lambda x: torch.pow(x, 3) * 0.1,
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": lambda a, b: a / (b.abs() + 0.5),
    "maximum": torch.maximum, "minimum": torch.minimum,
    "lerp_like": lambda a, b: a + 0.3 * (b - a),
}
REDUCE = {
    "sum": lambda x, d: x.sum(d, keepdim=True) * 0.1, "mean": lambda x, d: x.mean(d, keepdim=True),
    "amax": lambda x, d: x.amax(d, keepdim=True), "amin": lambda x, d: x.amin(d, keepdim=True),
    "var": lambda x, d: x.var(d, keepdim=True, correction=0),
}
NORM = {
    "softmax": lambda x: torch.softmax(x, -1), "log_softmax": lambda x: F.log_softmax(x, -1),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
}


def make_program(seed: int):
    """(fn, inputs, description) for one seed."""
    rng = random.Random(seed)
    rank = rng.choice([1, 2, 2, 3, 3, 4])
    domain = [rng.choice([1, 2, 3, 5, 8, 16, 33]) for _ in range(rank)]
    domain[-1] = rng.choice([7, 16, 64, 100, 257, 768]) if rng.random() < 0.9 else 9000  # 9000: a long row
    dtype = rng.choice([torch.float32, torch.float32, torch.bfloat16, torch.float16])
    g = torch.Generator().manual_seed(seed)
    inputs, shapes = [], []
    for k in range(rng.choice([1, 2, 2, 3])):
        shape = [d if (k == 0 or rng.random() < 0.7) else 1 for d in domain]  # input 0 is full-size
        shape = shape[rng.choice([0, 0, 0, 1]) if len(shape) > 1 and k else 0:]  # fewer dims: broadcasts
        t = torch.randn(shape, generator=g).to(dtype)
        if k and rng.random() < 0.25 and len(shape) >= 2 and shape[-1] > 1 and shape[-2] > 1:
            t = t.transpose(-1, -2).contiguous().transpose(-1, -2)  # same values, strided layout
        elif rng.random() < 0.15:
            t = torch.randn([*shape[:-1], shape[-1] * 2], generator=g).to(dtype)[..., ::2]  # sliced
        inputs.append(t)
        shapes.append(tuple(t.shape))
    use_mask = rng.random() < 0.2
    if use_mask:
        inputs.append(torch.rand(domain, generator=g) > 0.5)
    steps, desc = [], []
    n_values = len(inputs) - (1 if use_mask else 0)
    is_full = [tuple(t.shape) == tuple(domain) for t in inputs[:n_values]]  # input 0 is
    for _ in range(rng.randint(2, 7)):
        full = [i for i, f in enumerate(is_full) if f]
        kind = rng.choices(["unary", "binary", "reduce", "norm", "mask", "where"],
                           [5, 5, 2, 1, 1 if use_mask else 0, 1])[0]
        if kind == "unary":
            name, a = rng.choice(sorted(UNARY)), rng.randrange(n_values)
            steps.append(("unary", name, a))
            is_full.append(is_full[a])
        elif kind == "binary":
            name, a, b = rng.choice(sorted(BINARY)), rng.choice(full), rng.randrange(n_values)
            steps.append(("binary", name, a, b))
            is_full.append(True)
        elif kind == "reduce":
            name, a = rng.choice(sorted(REDUCE)), rng.choice(full)
            dims = -1 if rng.random() < 0.8 or rank < 2 else (-2, -1)
            steps.append(("reduce", name, a, dims, rng.choice(["sub", "mul", "div"])))  # used against `a`
            is_full.append(True)
        elif kind == "norm":
            steps.append(("norm", rng.choice(sorted(NORM)), rng.choice(full)))
            is_full.append(True)
        elif kind == "mask":
            steps.append(("mask", rng.choice(full)))
            is_full.append(True)
        else:  # a comparison of an input (exact in any implementation; a computed value's could
            # flip on a 1-ulp difference), selecting between two values
            steps.append(("where", rng.choice(full), rng.randrange(n_values)))
            is_full.append(True)
        desc.append(str(steps[-1]))
        n_values += 1
    outs = sorted({n_values - 1, rng.randrange(n_values)})

    def fn(*xs):
        mask = xs[-1] if use_mask else None
        vals = list(xs[:-1] if use_mask else xs)
        for s in steps:
            if s[0] == "unary":
                v = UNARY[s[1]](vals[s[2]])
            elif s[0] == "binary":
                v = BINARY[s[1]](vals[s[2]], vals[s[3]])
            elif s[0] == "reduce":
                r = REDUCE[s[1]](vals[s[2]], s[3])
                x = vals[s[2]]
                v = x - r if s[4] == "sub" else x * r if s[4] == "mul" else x / (r.abs() + 0.5)
            elif s[0] == "norm":
                v = NORM[s[1]](vals[s[2]])
            elif s[0] == "mask":
                v = vals[s[1]].masked_fill(mask, 0.25)
            else:
                v = torch.where(vals[0] > 0.1, vals[s[1]], vals[s[2]] * 0.5)
            vals.append(v)
        return tuple(vals[i] for i in outs)

    return fn, inputs, f"seed={seed} domain={domain} dtype={dtype} inputs={shapes} mask={use_mask} steps={desc} outs={outs}"
