"""Attention calls as models make them, shared by the attention kernels' tests
(test_attention_fp32.py, test_attention_matmuls.py)."""
import torch
import torch.nn.functional as F

import fxcpp
from helpers import assert_same

OP = "aten::_scaled_dot_product_flash_attention_for_cpu"


def attention_row(report):
    rows = [r for r in report.rows if r.op == OP]
    assert len(rows) == 1, report
    return rows[0]


def heads(x, h):  # [b, L, h*d] -> [b, h, L, d], a strided view as a model's projections give
    b, L, hd = x.shape
    return x.view(b, L, h, hd // h).transpose(1, 2)


def attention(x, wq, wk, wv, mask=None, causal=False, scale=None):
    q, k, v = (heads(F.linear(x, w), 4) for w in (wq, wk, wv))
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale)
    return o.transpose(1, 2).flatten(2)


def inputs(dtype, mask=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 24, 64, generator=g)
    ws = [torch.randn(64, 64, generator=g) / 8 for _ in range(3)]
    xs = [t.to(dtype) for t in (x, *ws)]
    if mask == "float":
        xs.append((torch.randn(2, 1, 24, 24, generator=g) * 2).to(dtype))
    elif mask == "bool":
        m = torch.rand(2, 1, 24, 24, generator=g) > 0.3
        m[..., 0] = True  # every query sees one key: no all-masked row (NaN in eager)
        xs.append(m)
    return xs


CASES = {
    "plain": (None, {}),
    "causal": (None, {"causal": True}),
    "scale": (None, {"scale": 0.3}),
    "float_mask": ("float", {}),
    "bool_mask": ("bool", {}),
}


def case_call(case, dtype):
    """(fn, inputs) of CASES[case]: the projections and attention in `dtype`."""
    mask, kw = CASES[case]
    fn = (lambda x, a, b, c, m: attention(x, a, b, c, m, **kw)) if mask else (lambda x, a, b, c: attention(x, a, b, c, **kw))
    return fn, inputs(dtype, mask)


def gpt2_attention(x, w):
    """GPT-2's: q, k and v are slices of one projection (not dense), and the output's transpose
    is viewed (not reshaped) as [b, L, h * d]: it must come back laid out as the native call's."""
    b, L, _ = x.shape
    q, k, v = F.linear(x, w).split(64, dim=2)
    q, k, v = (t.view(b, L, 4, 16).transpose(1, 2) for t in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.transpose(1, 2).view(b, L, 64), o


def random_case(seed):
    """A random attention call as models make them: shapes, the operands' layouts (contiguous
    [b, h, L, d], transposed from [b, L, h, d], or sliced from one projection), a mask (none,
    float or bool, full or broadcast), causal or not, a scale or not."""
    g = torch.Generator().manual_seed(seed)
    pick = lambda n: int(torch.randint(n, (1,), generator=g))  # noqa: E731
    b, h, d = 1 + pick(3), 1 + pick(4), (8, 16, 64)[pick(3)]
    L = 1 + pick(40)
    S = L if pick(2) else 1 + pick(40)
    layout = ("contiguous", "transposed", "sliced")[pick(3)]
    if layout == "contiguous":
        q, k, v = (torch.randn(b, h, n, d, generator=g) for n in (L, S, S))
    elif layout == "transposed":
        q, k, v = (torch.randn(b, n, h, d, generator=g).transpose(1, 2) for n in (L, S, S))
    else:
        q = torch.randn(b, L, 3 * h * d, generator=g)[..., : h * d].view(b, L, h, d).transpose(1, 2)
        kv = torch.randn(b, S, 2 * h * d, generator=g)
        k, v = (t.view(b, S, h, d).transpose(1, 2) for t in kv.split(h * d, dim=2))
    mask_kind = ("none", "float", "bool", "float_broadcast")[pick(4)]
    mask = None
    if mask_kind == "float":
        mask = torch.randn(b, h, L, S, generator=g)
    elif mask_kind == "float_broadcast":
        mask = torch.randn(1, 1, L, S, generator=g).expand(b, 1, L, S)
    elif mask_kind == "bool":
        mask = torch.rand(b, 1, L, S, generator=g) > 0.4
        mask[..., 0] = True
    causal = mask is None and L == S and bool(pick(2))
    scale = [None, 0.2][pick(2)]
    return (q, k, v, mask), dict(is_causal=causal, scale=scale), f"b{b} h{h} L{L} S{S} d{d} {layout} {mask_kind} causal={causal} scale={scale}"


def random_calls(dtype, seeds):
    """(fn, inputs, description) of random_case(seed) for each seed, in `dtype` (a float mask too)."""
    for seed in seeds:
        (q, k, v, mask), kw, what = random_case(seed)
        q, k, v = (t.to(dtype) for t in (q, k, v))
        if mask is not None and mask.is_floating_point():
            mask = mask.to(dtype)
        xs = [q, k, v] + ([mask] if mask is not None else [])
        fn = lambda q, k, v, m=None, kw=kw: F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)  # noqa: E731
        yield fn, xs, what


def assert_later_calls_stay_right(dtype):
    """Three calls of one compiled attention with other values, each 1 MiB and more (the buffer
    pool's buffers): each must match eager by the fp64 rule, and the pool must have been hit."""
    torch._dynamo.reset()
    fn = torch.compile(attention, backend="fxcpp")
    hits = fxcpp._C.cpu_fused_stats()["pool_hits"]
    with torch.no_grad():
        for seed in range(3):
            g = torch.Generator().manual_seed(seed)
            xs = [t.to(dtype) for t in (torch.randn(4, 256, 256, generator=g),
                                        *(torch.randn(256, 256, generator=g) / 16 for _ in range(3)))]
            assert_same(attention(*xs), fn(*xs), fp64_ref=attention(*[x.double() for x in xs]))
    assert fxcpp._C.cpu_fused_stats()["pool_hits"] > hits
