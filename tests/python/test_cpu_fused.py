"""The CPU fused kernels: every pattern fuses (explain() shows its nodes as cpu_fused and no
ATen pointwise or reduction left), and matches eager in fp32/bf16/fp16, with broadcasting,
strided, channels-last, empty and non-finite inputs."""
import pytest
import torch
import torch.nn.functional as F

import fxcpp
from helpers import assert_same, explain_and_run

EPS = 1e-6


def rmsnorm_t5(x, w):  # T5 / LLaMA: in fp32, back to the input's dtype, then the weight
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return w * h.to(x.dtype)


def ln_gelu_residual(x, r, w, b):  # the residual sum is a second output
    s = x + r
    return s, F.gelu(F.layer_norm(s, (s.shape[-1],), w, b))


def gelu_tanh_written_out(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3))))


def standardize(x):
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-5)


# name: (fn, input shapes; "bool" marks a boolean mask)
PATTERNS = {
    "pointwise_chain": (lambda x: torch.sigmoid(x * 2.0 + 1.0).relu() - x, [(64, 96)]),
    "gelu_tanh_written_out": (gelu_tanh_written_out, [(33, 70)]),
    "bias_gelu": (lambda x, b: F.gelu(x + b), [(16, 40, 96), (96,)]),
    "silu_gated": (lambda a, b: F.silu(a) * b, [(8, 128), (8, 128)]),
    "masked_fill": (lambda x, m: x.masked_fill(m, -1e4) * 0.5, [(4, 12, 30), "bool:4,1,30"]),
    "clamp_chain": (lambda x: x.clamp(-1.0, 1.0) * 3 - x.clamp_min(0.0), [(20, 50)]),
    "residual_ln_gelu": (ln_gelu_residual, [(64, 128), (64, 128), (128,), (128,)]),
    "softmax_scale_mask": (lambda s, m: torch.softmax(s * 0.125 + m, -1), [(2, 4, 16, 16), (2, 1, 1, 16)]),
    "log_softmax": (lambda x: F.log_softmax(x * 2.0, -1), [(10, 257)]),
    "rmsnorm_t5": (rmsnorm_t5, [(6, 10, 64), (64,)]),
    "standardize": (standardize, [(12, 200)]),
    "sum_amax_epilogue": (lambda x: x.exp().sum(-1) * 2 + x.amax(-1), [(9, 33)]),
    "mean_no_keepdim": (lambda x: x.relu().mean(-1) + 1, [(7, 5, 40)]),
    "two_row_dims": (lambda x: x - (x * x).sum((-2, -1), keepdim=True).sqrt(), [(3, 4, 6, 8)]),
    "long_rows": (lambda x: torch.softmax(x - 1.0, -1), [(3, 10000)]),  # rows longer than a block
    # Row reductions of computed values (run in the loop computing them; rows of 70: tails).
    "reduce_of_expressions": (lambda x: (x * 2.0 + 1.0).amax(-1) - (x - 3.0).amin(-1) + (x * 0.5).sum(-1), [(9, 70)]),
    "weighted_row_sums": (lambda x, w: (x * w).sum(-1) + (x + w).amax(-1), [(12, 100), (100,)]),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def make_inputs(shapes, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in shapes:
        if isinstance(s, str):
            out.append(torch.rand(tuple(int(d) for d in s.split(":")[1].split(",")), generator=g) > 0.5)
        else:
            out.append(torch.randn(s, generator=g).to(dtype))
    return out


def compare(fn, xs, check_fused=True):
    """Compiled vs eager by the harness rule (fp64 reference for low precision); returns the report."""
    report, res, ref, ref64 = explain_and_run(fn, xs)
    assert_same(ref, res, fp64_ref=ref64)
    if check_fused:
        left = [(r.op, r.kernel) for r in report.rows if r.kernel not in ("cpu_fused", "prim", "removed")]
        assert report.kernel_counts["cpu_fused"] > 0 and not left, f"not fused: {left}\n{report}"
    return report, ref, res


def at_one_and_more_threads(run):
    """run() at 1 thread and at max(2, the current count), recompiled for each: its two results."""
    old = torch.get_num_threads()
    try:
        outs = []
        for n in (1, max(2, old)):
            torch.set_num_threads(n)
            torch._dynamo.reset()
            outs.append(run())
        return outs
    finally:
        torch.set_num_threads(old)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_pattern_fuses_and_matches_eager(name, dtype):
    fn, shapes = PATTERNS[name]
    compare(fn, make_inputs(shapes, DTYPES[dtype]))


def test_ln_residual_writes_both_outputs_from_one_node():
    fn, shapes = PATTERNS["residual_ln_gelu"]
    report, _, _ = compare(fn, make_inputs(shapes, torch.float32))
    groups = {r.group for r in report.rows if r.kernel == "cpu_fused"}
    assert len(groups) == 1, report  # add, layer_norm and gelu: one kernel, two outputs


def test_strided_inputs():
    x = torch.randn(40, 64).t()[::2]  # transposed and sliced: no unit stride anywhere useful
    b = torch.randn(64, 20)[:, 3]     # a strided broadcast operand
    compare(lambda x, b: torch.tanh(x * 3.0) + b.sum() * x, [x, b], check_fused=False)
    compare(lambda x: F.layer_norm(x * 2.0, (x.shape[-1],)) + 1.0, [torch.randn(32, 48)[:, ::2]])


def test_channels_last_inputs_keep_their_layout():
    x = torch.randn(2, 16, 7, 9).contiguous(memory_format=torch.channels_last)
    _, ref, res = compare(lambda x: torch.sigmoid(x) * x + 1.0, [x])
    assert res.stride() == ref.stride() and res.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("shape", [(0, 64), (5, 0), (0,)])
def test_empty_tensors(shape):
    x = torch.randn(shape)
    compare(lambda x: (x * 2.0 + 1.0).relu(), [x], check_fused=False)
    if len(shape) == 2 and shape[1] > 0:
        compare(lambda x: F.layer_norm(x + 1.0, (shape[1],)), [x], check_fused=False)


# Reductions over a zero-length row: ATen defines them (sum 0, mean and var NaN, an empty
# softmax, amax raising); the fusion pass leaves such a row to ATen. Found by the bf16/fp16
# OpInfo sweep (linalg.vecdot on (5, 0) returned uninitialized memory; softmin on (5, 0, 0) raised).
EMPTY_ROWS = {
    "vecdot": (lambda a, b: torch.linalg.vecdot(a, b), [(5, 0), (5, 0)]),
    "sum_epilogue": (lambda a, b: (a * b).sum(-1) * 2.0 + 1.0, [(3, 4, 0), (3, 4, 0)]),
    "mean_var": (lambda a, b: (a + b).mean(-1) + (a - b).var(-1), [(6, 0), (6, 0)]),
    "softmin_no_rows": (lambda a, b: F.softmin(a * b, -1), [(5, 0, 0), (5, 0, 0)]),
    "softmax_empty_rows": (lambda a, b: torch.softmax(a + b, -1), [(5, 0), (1, 0)]),
}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(EMPTY_ROWS))
def test_reductions_over_an_empty_row(name, dtype):
    fn, shapes = EMPTY_ROWS[name]
    report, ref, res = compare(fn, make_inputs(shapes, DTYPES[dtype]), check_fused=False)
    fused = [r.op for r in report.rows if r.kernel == "cpu_fused"]
    assert not any(op in ("aten::sum.dim_IntList", "aten::mean.dim", "aten::var.correction", "aten::_softmax")
                   for op in fused), f"a zero-length row was fused:\n{report}"


def test_amax_over_an_empty_row_raises_as_eager_does():
    x = torch.randn(4, 0)
    fn = torch.compile(lambda x: x.exp().amax(-1) + 1.0, backend="fxcpp")
    torch._dynamo.reset()
    with pytest.raises(Exception, match="zero-size|non-zero size"):  # Dynamo raises while tracing
        fn(x)


SPECIAL = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-40, -1e-40, 3.4e38, -3.4e38, 1.0, -1.0, 88.0, -104.0]


@pytest.mark.parametrize("name", ["pointwise_chain", "clamp_chain", "gelu_tanh_written_out", "silu_gated",
                                  "sum_amax_epilogue", "softmax_scale_mask", "reduce_of_expressions",
                                  "weighted_row_sums"])
def test_non_finite_values(name):
    """NaN, ±inf, signed zeros and denormals come out as eager's kernels give them (max/min/clamp keep NaN)."""
    fn, shapes = PATTERNS[name]
    xs = make_inputs(shapes, torch.float32)
    special = torch.tensor(SPECIAL)
    for x in xs:
        flat = x.view(-1)
        flat[: min(len(SPECIAL), flat.numel())] = special[: flat.numel()]
    torch._dynamo.reset()
    with torch.no_grad():
        ref = fn(*xs)
        res = torch.compile(fn, backend="fxcpp")(*xs)
    for r, c in zip(torch.utils._pytree.tree_leaves(ref), torch.utils._pytree.tree_leaves(res)):
        assert torch.equal(r.isnan(), c.isnan()), f"NaN positions differ\n{r}\n{c}"
        fin = ~r.isnan()
        assert torch.equal(r[fin].isinf(), c[fin].isinf()) and torch.equal(r[fin][r[fin].isinf()], c[fin][r[fin].isinf()])
        zero = fin & (r == 0)
        assert torch.equal(r[zero].signbit(), c[zero].signbit()), "signed zeros differ"
        ok = fin & ~r.isinf()
        torch.testing.assert_close(c[ok], r[ok], rtol=1e-4, atol=1e-5)


def test_dynamic_shapes_run_one_plan():
    """A symbolic row count: one compiled program serves every batch size."""
    fn, _ = PATTERNS["residual_ln_gelu"]
    w, b = torch.randn(64), torch.randn(64)
    compiled = torch.compile(fn, backend="fxcpp", dynamic=True)
    with torch.no_grad():
        for rows in (3, 17, 64):
            x, r = torch.randn(rows, 64), torch.randn(rows, 64)
            assert_same(fn(x, r, w, b), compiled(x, r, w, b))


def _plain_run(fn, xs):
    """fn through the C++ pipeline directly (an Executable): intermediates really die inside it."""
    import sys

    sys.path.insert(0, __file__.rsplit("/python/", 1)[0] + "/cpp")
    from graphs import lowered
    from fxcpp import _C

    _, g = lowered(fn, *xs, static=set())
    _C.run_pipeline(g)
    return _C.Executable(g).run(list(xs)), g


def test_in_place_outputs_take_only_buffers_that_die():
    """A pointwise group may write its output into an input that dies at it (the matmul's
    result below); never into one still read later or returned, never into a broadcast one."""
    x, w, b = torch.randn(32, 48), torch.randn(48, 48), torch.randn(48)

    def dies(x, w, b):
        a = torch.mm(x, w)
        return torch.sigmoid(a) * 2.0 + a - b

    def also_returned(x, w, b):
        a = torch.mm(x, w)
        return a, torch.sigmoid(a) * 2.0 + a

    def read_later(x, w, b):
        a = torch.mm(x, w)
        c = torch.tanh(a) * 3.0 - a
        return torch.mm(c, w) + a.sum()

    def broadcast(x, w, b):
        a = torch.mm(x[:1], w)  # [1, 48], broadcast against [32, 48]
        return torch.relu(a * x[:, :48] + b) - a

    from fxcpp import _C

    for fn in (dies, also_returned, read_later, broadcast):
        before = _C.cpu_fused_stats()["in_place"]
        with torch.no_grad():
            res, g = _plain_run(fn, [x, w, b])
            ref = fn(x, w, b)
        assert (_C.cpu_fused_stats()["in_place"] > before) == (fn is dies), fn.__name__
        ref = list(ref) if isinstance(ref, tuple) else [ref]
        assert g.cpu_fused_nodes(), fn.__name__
        for r, c in zip(ref, res):
            torch.testing.assert_close(c, r, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("order", [(0, 1, 2), (0, 2, 1), (2, 0, 1), (1, 0, 2)])
@pytest.mark.parametrize("low", [torch.float16, torch.bfloat16])
def test_an_output_storing_a_loaded_input_keeps_that_input_out_of_in_place(order, low):
    """widen_chains drops the round trip of t.to(fp16).float(), so that output stores the fp32
    input's load itself, a register that reads the input's memory in place; another output
    written into that (dying) input's buffer by an earlier store changed it (fuzz seed 90739:
    an SDPA whose value was an interpolated input, 0.56 off). The input now hosts no output
    (fused_kernel.cpp, read_after_a_store); the other one may still."""
    from fxcpp import _C

    def fn(x, y, p):
        u = x.repeat(1, 1, 2, 1)  # dies at the fused group: it could host an output
        t = u.to(low)
        outs = ((t + p).float(), t.float(), t.float() * 0.59)
        return tuple(outs[i] for i in order) + (torch.sigmoid(y.repeat(2, 1)) * 2.0,)

    torch.manual_seed(0)
    x, y, p = torch.randn(1, 2, 8, 8), torch.randn(16, 64), torch.randn(8).to(low)
    before = _C.cpu_fused_stats()["in_place"]
    with torch.no_grad():
        res, g = _plain_run(fn, [x, y, p])
        ref = fn(x, y, p)
    assert g.cpu_fused_nodes()
    assert _C.cpu_fused_stats()["in_place"] > before  # the sigmoid's own group still writes in place
    u16 = x.repeat(1, 1, 2, 1).to(low).float()  # the rounding widen_chains drops: up to half an ulp
    for r, c in zip(ref, res):
        torch.testing.assert_close(c, r, rtol=1e-2, atol=1e-2 * float(u16.abs().max()))


def test_report_gives_the_planned_peak():
    with torch.no_grad():
        report = fxcpp.explain(lambda x: F.gelu(F.layer_norm(x * 2.0, (64,))) + x, torch.randn(128, 64))
    (peak,) = report.planned_peak_bytes.values()
    assert 0 < peak <= 3 * 128 * 64 * 4  # one fused node: its output, nothing in between
    assert "planned peak" in str(report)


def test_large_outputs_are_recycled_only_after_they_are_freed():
    """Outputs of 1 MiB and more come from fxcpp's buffer pool: a buffer the caller still holds is
    never handed out again; a freed one is reused (no page faults); a pooled tensor can still
    carry a copy-on-write guard (its DataPtr is simple)."""
    from fxcpp import _C

    x = torch.randn(1 << 20)  # 4 MiB
    fn = torch.compile(lambda x: torch.tanh(x * 2.0 + 1.0), backend="fxcpp")
    with torch.no_grad():
        a = fn(x)
        b = fn(x)
        assert a.untyped_storage()._cdata != b.untyped_storage()._cdata and torch.equal(a, b)
        expected = b.clone()
        del a, b
        hits = _C.cpu_fused_stats()["pool_hits"]
        c = fn(x)
        assert _C.cpu_fused_stats()["pool_hits"] > hits
        torch.testing.assert_close(c, expected)
    guard = torch._lazy_clone(c)
    assert torch._C._is_cow_tensor(c)
    c.mul_(2)  # a write copies c away from the guard
    torch.testing.assert_close(guard, expected)


@pytest.mark.parametrize("name, fused", [("softmax_2d", True), ("weighted_row_sums", True),
                                         ("reduce_of_expressions", True), ("residual_ln_gelu", True),
                                         ("sum_amax_epilogue", False)])
def test_a_row_reduction_runs_in_the_pass_of_the_op_computing_its_operand(name, fused):
    """Scaled scores and their max, exponentials and their sum, a residual sum and its mean:
    each pair in one pass over a block of whole rows (interp_rows.h, apply_reduce), eager's
    values. An exp summed (sum_amax_epilogue: exp is not among those ops) runs as two."""
    from fxcpp import _C

    softmax_2d = (lambda s, m: torch.softmax(s * 0.125 + m, -1), [(64, 300), (1, 300)])
    fn, shapes = softmax_2d if name == "softmax_2d" else PATTERNS[name]
    before = _C.cpu_fused_stats()["fused_reductions"]
    for dtype in (torch.float32, torch.bfloat16):
        compare(fn, make_inputs(shapes, dtype))
    assert (_C.cpu_fused_stats()["fused_reductions"] > before) == fused


@pytest.mark.parametrize("affine, fused", [("weight_and_bias", True), ("weight", False), ("none", False)])
def test_a_layer_norms_affine_tail_runs_in_one_pass(affine, fused):
    """A residual LayerNorm's (x - mean) * rstd * weight + bias runs as one pass over the block
    (interp_rows.h, fused_affine_tail): the normalized rows are not written and read back.
    Eager's values in fp32 and bf16, on contiguous rows and rows of a wider tensor, short rows
    (many to a block) and long ones (two to a block). Without a bias the tail is two products
    and runs as written."""
    from fxcpp import _C

    def fn(x, r, w, b):
        n = x.shape[-1]
        if affine == "weight_and_bias":
            return F.layer_norm(x + r, (n,), w, b)
        return F.layer_norm(x + r, (n,), w if affine == "weight" else None)

    before = _C.cpu_fused_stats()["fused_affine_tails"]
    for dtype in (torch.float32, torch.bfloat16):
        for rows, n in ((64, 128), (5, 3000)):
            x, r, w, b = make_inputs([(rows, n + 8), (rows, n), (n,), (n,)], dtype)
            compare(fn, [x[:, :n], r, w, b])
            compare(fn, [x[:, :n].contiguous(), r, w, b])
    assert (_C.cpu_fused_stats()["fused_affine_tails"] > before) == fused


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_blocks_fetching_the_next_block_match_eager(dtype):
    """While a transcendental computes a block of rows, the next block's input rows are
    prefetched (NextRows, interp.h): rows that follow each other (one run of lines), rows
    of a sliced view (a run per row), a shorter last block, blocks split across threads. The
    prefetch changes no value; this runs each of its paths against eager. Rows too long for a
    block (a vocabulary's) fetch the next row instead: whole, sliced, and a mask shared by all
    rows (not fetched again); pointwise programs fetch a block ahead."""
    softmax = lambda s, m: torch.softmax(s * 0.125 + m, -1)
    ln_gelu = lambda x: F.gelu(F.layer_norm(x, (x.shape[-1],)))
    for rows, cols, width in ((1001, 300, 512), (9, 9000, 9100)):
        wide = make_inputs([(rows, width)], dtype)[0]
        mask = make_inputs([(1, cols)], dtype, seed=1)[0]
        for x in (wide[:, :cols], wide[:, :cols].contiguous()):
            compare(softmax, [x, mask])
            compare(ln_gelu, [x])
    # Pointwise blocks fetch the block two ahead within their row and task: a flat tensor, rows of
    # a sliced view (blocks of 1024 values, the last one short), a one-value operand not fetched.
    gated = lambda a, b, c: F.silu(a) * torch.tanh(b) + c
    flat = make_inputs([(50000,), (50000,), (1,)], dtype, seed=2)
    compare(gated, flat)
    a, b = make_inputs([(12, 5100), (12, 5100)], dtype, seed=3)  # rows past a packed block's 4096
    compare(gated, [a[:, :5000], b[:, :5000], make_inputs([(5000,)], dtype, seed=4)[0]])


def test_rmsnorm_scales_by_row_and_weight_in_one_instruction():
    """x * rsqrt(mean(x^2) + eps) * w: the two products are one mulmul (no block written in
    between), rounded as eager's two multiplies are."""
    fn = lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w
    x, w = torch.randn(16, 1000), torch.randn(1000)
    res, g = _plain_run(fn, [x, w])
    (node,) = g.cpu_fused_nodes()
    assert "mulmul" in node["program"] and " mul " not in node["program"], node["program"]
    torch.testing.assert_close(res[0], fn(x, w), rtol=1e-6, atol=1e-6)


def two_groups_around_an_outside_op(t, s, g, u, u2):
    m3 = t * s
    m4 = t * g  # a second group: m4, -m4
    sb = m3 * m3
    ng = -m4
    o = torch.cumsum(m4, 0)  # no fused op: read from m4's group
    ad = o + 1.0
    m5 = sb * u
    m6 = sb * u2
    a2 = ad + m6  # ad's group merges with m3's
    a3 = ng + m5  # m5's group now reads o: a3 may not join m4's group (that would be a cycle)
    return a2, a3


def test_a_node_joins_no_group_another_group_it_reads_is_computed_from():
    """A value of a fused group depends on everything that group reads: joining a3 to the group
    of -m4 made that group wait for m5's group, which waits for the cumsum, which waits for -m4's
    group (the backward of an attention whose output feeds a gate, fuzzer --train seed 180563:
    the whole graph ran in the Interpreter, "the graph has a cycle")."""
    xs = [torch.randn(8, 8, generator=torch.Generator().manual_seed(i)) for i in range(5)]
    report, res, ref, _ = explain_and_run(two_groups_around_an_outside_op, xs)
    assert not report.fallbacks, report.fallbacks
    group = {r.node: r.group for r in report.rows if r.kernel == "cpu_fused"}
    assert report.kernel_counts == {"onednn": 0, "cpu_fused": 9, "cuda": 0, "aten": 1, "interpreter": 0}, report
    # m4 and -m4 in one group; a3 (add_2) joined the other, which reads -m4 and nothing of its own
    assert {n for n, g in group.items() if g == group["neg"]} == {"mul_1", "neg"}, report
    assert group["add_2"] == group["add_1"] == group["mul"], report
    for r, c in zip(ref, res):
        assert_same(r, c)
