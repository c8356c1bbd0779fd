"""One op alone (a LayerNorm, a softmax) is left to ATen's kernel, which is as fast or faster,
except where ATen's output would be a fresh mapping at every call: 32 MiB and more of static
shape (cpu_fusion.cpp, maps_fresh_output). The fused kernel takes its output from the buffer
pool there (benchmarks/results/cpu-fusion-amx/lone_norms*.txt). Also except the ops whose fused
kernel alone beats ATen's, as measured per ISA (cpu_ops.cpp, faster_fused_alone;
benchmarks/results/lone-ops/ on AVX2, lone-ops-avx512/ on AVX-512): the exp family in every dtype,
erf-GELU in bf16/fp16 (fp16 only on AVX-512), sin, cos and sqrt in fp32; on AVX-512 also log in
fp32 and sin, cos and rsqrt in bf16/fp16. And a mean in bf16/fp16 on every ISA (lone-mean/)."""
import pytest
import torch
import torch.nn.functional as F

from test_cpu_fused import compare, make_inputs


def lone_layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def lone_softmax(x):
    return torch.softmax(x, -1)


@pytest.mark.parametrize("fn, shapes", [(lone_layer_norm, [(8192, 1024), (1024,), (1024,)]),  # 32 MiB out
                                        (lone_softmax, [(2048, 4096)])])
def test_a_lone_op_with_a_32_mib_output_fuses_and_matches_eager(fn, shapes):
    compare(fn, make_inputs(shapes, torch.float32))


@pytest.mark.parametrize("fn, shapes, dtype", [(lone_layer_norm, [(64, 768), (768,), (768,)], torch.float32),
                                               (lone_softmax, [(2048, 4095)], torch.float32),  # 1 element short of 32 MiB
                                               (lone_layer_norm, [(8192, 1024), (1024,), (1024,)], torch.bfloat16)])
def test_a_lone_op_below_32_mib_stays_on_aten(fn, shapes, dtype):
    report, _, _ = compare(fn, make_inputs(shapes, dtype), check_fused=False)
    assert report.kernel_counts["cpu_fused"] == 0 and report.kernel_counts["aten"] == 1, report


def test_a_lone_op_of_symbolic_shape_stays_on_aten():
    """Its size is not known when the plan is made."""
    x = torch.randn(8192, 1024)
    torch._dynamo.reset()
    with torch.no_grad():
        import fxcpp

        torch._dynamo.mark_dynamic(x, 0)
        report = fxcpp.explain(lone_softmax, x)
        torch._dynamo.reset()
        res = torch.compile(lone_softmax, backend="fxcpp")(x)
    assert report.kernel_counts["cpu_fused"] == 0, report
    torch.testing.assert_close(res, lone_softmax(x))


ALL, LOW = {"fp32", "bf16", "fp16"}, {"bf16", "fp16"}
# name: (op, dtypes it fuses alone in under AVX2 and the portable build, the same under AVX-512)
FASTER_ALONE = {
    "exp": (torch.exp, ALL, ALL), "sigmoid": (torch.sigmoid, ALL, ALL), "silu": (F.silu, ALL, ALL),
    "mish": (F.mish, ALL, ALL), "softplus": (F.softplus, ALL, ALL), "tanh": (torch.tanh, ALL, ALL),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), ALL, ALL),
    "gelu": (F.gelu, LOW, {"fp16"}), "sin": (torch.sin, {"fp32"}, ALL), "cos": (torch.cos, {"fp32"}, ALL),
    "sqrt": (torch.sqrt, {"fp32"}, {"fp32"}), "log": (torch.log, set(), {"fp32"}), "rsqrt": (torch.rsqrt, set(), LOW),
}
SLOWER_ALONE = {"erf": torch.erf, "relu": torch.relu, "abs": torch.abs, "expm1": torch.expm1}  # in every dtype, every ISA
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _isa():
    import fxcpp

    return fxcpp._C.host_info()["aten_isa"]  # what torch dispatches to here, and so the rule


def _inputs(name, dtype):
    x = make_inputs([(37, 1000)], dtype, seed=3)[0]  # rows not a multiple of a vector: tails too
    if name in ("sqrt", "log", "rsqrt"):
        x = x.abs()
    x.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0])
    return [x]


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(FASTER_ALONE))
def test_a_lone_op_faster_fused_fuses_in_its_dtypes(name, dtype):
    op, where_avx2, where_avx512 = FASTER_ALONE[name]
    fuses = dtype in (where_avx512 if _isa() == "avx512" else where_avx2)
    report, _, _ = compare(lambda x: op(x), _inputs(name, DTYPES[dtype]), check_fused=fuses)
    if not fuses:
        assert report.kernel_counts["cpu_fused"] == 0 and report.kernel_counts["aten"] == 1, report


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(SLOWER_ALONE))
def test_a_lone_op_aten_runs_faster_stays_on_aten(name, dtype):
    report, _, _ = compare(lambda x: SLOWER_ALONE[name](x), _inputs(name, DTYPES[dtype]), check_fused=False)
    assert report.kernel_counts["cpu_fused"] == 0 and report.kernel_counts["aten"] == 1, report


_RULE_PROBE = """
import json, torch, torch.nn.functional as F, fxcpp
ops = {"gelu": F.gelu, "log": torch.log, "sin": torch.sin, "rsqrt": torch.rsqrt, "sqrt": torch.sqrt}
out = {"isa": fxcpp._C.host_info()["aten_isa"]}
for dt in ("float32", "bfloat16", "float16"):
    for name, op in ops.items():
        torch._dynamo.reset()
        with torch.no_grad():
            r = fxcpp.explain(lambda x: op(x), torch.rand(64, 100).add(0.5).to(getattr(torch, dt)))
        out[name + " " + dt] = r.kernel_counts["cpu_fused"]
print(json.dumps(out))
"""


@pytest.mark.parametrize("cap", ["avx2", "avx512"])
def test_the_lone_op_rule_follows_the_isa_torch_dispatches_to(cap):
    """Both rules on one host: ATEN_CPU_CAPABILITY lowers torch's dispatch, ATen's kernels and ours
    with it (an AVX-512 host runs the AVX2 rule under avx2; an AVX2 host cannot run the AVX-512 one)."""
    import json
    import os
    import subprocess
    import sys

    if cap == "avx512" and torch.backends.cpu.get_cpu_capability() != "AVX512":
        pytest.skip("this host has no AVX-512: its rule cannot run here")
    env = dict(os.environ, ATEN_CPU_CAPABILITY=cap)
    out = json.loads(subprocess.run([sys.executable, "-c", _RULE_PROBE], env=env, capture_output=True, text=True,
                                    check=True, timeout=600).stdout.strip().splitlines()[-1])
    assert out.pop("isa") == cap
    for key, fused in out.items():
        name, dt = key.split()
        short = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}[dt]
        expected = short in FASTER_ALONE[name][2 if cap == "avx512" else 1]
        assert fused == int(expected), (key, fused, out)


def test_a_lone_op_faster_fused_keeps_strided_and_channels_last_layouts():
    x = torch.randn(2, 16, 7, 9).contiguous(memory_format=torch.channels_last)
    _, ref, res = compare(torch.sigmoid, [x])
    assert res.stride() == ref.stride()
    _, ref, res = compare(torch.exp, [torch.randn(40, 64).t()[::2]])
    assert res.shape == ref.shape


def test_a_lone_op_faster_fused_fuses_at_symbolic_sizes_too():
    """Unlike the 32 MiB rule, this one needs no static size: every size the plan sees runs fused."""
    import fxcpp

    x = torch.randn(3, 100)
    torch._dynamo.reset()
    torch._dynamo.mark_dynamic(x, 1)
    with torch.no_grad():
        report = fxcpp.explain(torch.sigmoid, x)
    assert report.kernel_counts["cpu_fused"] == 1 and report.kernel_counts["aten"] == 0, report
    torch._dynamo.reset()
    f = torch.compile(torch.sigmoid, backend="fxcpp", dynamic=True)
    with torch.no_grad():
        for n in (5, 17, 1000, 4099):
            x = torch.randn(3, n)
            torch.testing.assert_close(f(x), torch.sigmoid(x))


@pytest.mark.parametrize("shape", [(4097,), (6143,), (8193,), (12289,), (5, 3001), (3, 4099), (7, 1500), (3, 7, 1025),
                                   (32768,)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("threads", [2, 3])
def test_a_transcendental_program_split_across_threads_from_4k_elements_matches_eager(shape, dtype, threads):
    """A pointwise program with a transcendental runs on several threads above 4096 elements
    (kGrainLong in runtime/cpu/interp.h), and where each thread gets few blocks its rows are cut into
    shorter blocks whose count the threads divide (balance_blocks); these sizes give blocks with a
    short last one, rows whose blocks straddle a task's boundary, block counts rounded up to a
    multiple of 2 and of 3 threads, and NaN, infinities and -0 among the values."""
    x = torch.randn(shape).to(dtype)
    x.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0]).to(dtype)
    x.view(-1)[-3:] = torch.tensor([30.0, -30.0, 1e-30]).to(dtype)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)  # a split needs several, whatever the machine running the tests has
    try:
        compare(lambda t: torch.tanh(t) * 2 + F.silu(t), [x])
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("shape", [(6144,), (6145,), (8192,), (8193,), (3, 2731), (2, 4097)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("threads", [2, 3])
def test_a_one_exp_program_around_its_avx512_grain_matches_eager(shape, dtype, threads):
    """Under AVX-512 a program worth one exp splits above 8192 elements in fp32 and 6144 with a bf16
    operand (pointwise_grain_long in runtime/cpu/interp.h); these sizes sit on each side of both
    (on AVX2 they all split: the same check)."""
    x = torch.randn(shape).to(dtype)
    x.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0]).to(dtype)
    x.view(-1)[-2:] = torch.tensor([90.0, -110.0]).to(dtype)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        compare(lambda t: torch.exp(t) * t, [x])
    finally:
        torch.set_num_threads(before)


# A mean alone in bf16/fp16 fuses on every ISA (cpu_ops.cpp, faster_fused_alone): ATen's sums
# through an fp32 copy of its whole input (benchmarks/results/lone-mean/). Global pools in both
# layouts, a row mean, mean pooling over a sequence, a batch mean, a whole-tensor mean, odd sizes.
LONE_MEANS = {
    "pool_channels_last": ((2, 24, 7, 9), lambda t: t.mean((2, 3), keepdim=True), True),
    "pool_contiguous": ((2, 24, 7, 9), lambda t: t.mean((2, 3), keepdim=True), False),
    "pool_flat": ((3, 40, 5, 5), lambda t: t.mean((-1, -2)), True),
    "rows": ((37, 1000), lambda t: t.mean(-1), False),
    "sequence_pooling": ((3, 129, 70), lambda t: t.mean(1), False),
    "batch": ((513, 33), lambda t: t.mean(0, keepdim=True), False),
    "whole": ((67, 31), lambda t: t.mean(), False),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", sorted(LONE_MEANS))
def test_a_lone_mean_in_low_precision_fuses_and_matches_eager(name, dtype):
    shape, fn, channels_last = LONE_MEANS[name]
    x = make_inputs([shape], dtype, seed=5)[0]
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    report, ref, res = compare(fn, [x])
    assert report.kernel_counts["cpu_fused"] == 1 and report.kernel_counts["aten"] == 0, report
    assert res.shape == ref.shape and res.dtype == ref.dtype


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_lone_mean_in_low_precision_carries_nan_and_infinities_as_eager(dtype):
    x = make_inputs([(6, 50)], dtype, seed=6)[0]
    x[1, 3], x[2, 0], x[3, 7], x[3, 8], x[4, 9] = float("nan"), float("inf"), float("inf"), -float("inf"), -0.0
    _, ref, res = compare(lambda t: t.mean(-1), [x])
    assert torch.equal(res.isnan(), ref.isnan()) and torch.equal(res.isinf(), ref.isinf())


@pytest.mark.parametrize("fn", [lambda t: t.mean((2, 3)), lambda t: t.mean(1), lambda t: t.mean()])
def test_a_lone_mean_in_fp32_stays_on_aten(fn):
    """ATen's fp32 mean beats the fused kernel on channels-last pools and short outer rows."""
    x = torch.randn(2, 24, 7, 9).contiguous(memory_format=torch.channels_last)
    report, _, _ = compare(fn, [x], check_fused=False)
    assert report.kernel_counts["cpu_fused"] == 0 and report.kernel_counts["aten"] == 1, report


def test_a_lone_mean_into_fp32_from_bf16_stays_on_aten():
    """mean(dtype=float32) of a bf16 input gives fp32: the rule reads the output's dtype."""
    x = torch.randn(16, 64).bfloat16()
    report, _, _ = compare(lambda t: t.mean(-1, dtype=torch.float32), [x], check_fused=False)
    assert report.kernel_counts["cpu_fused"] == 0, report


def test_a_lone_mean_over_an_empty_dim_stays_on_aten_and_gives_nan():
    x = torch.randn(4, 0, 8).bfloat16()
    report, ref, res = compare(lambda t: t.mean(1), [x], check_fused=False)
    assert report.kernel_counts["cpu_fused"] == 0 and res.isnan().all() and ref.isnan().all(), report


def test_a_whole_tensor_mean_above_one_threads_share_stays_on_aten():
    """A reduction over every dim is one row on one thread, taken only up to 32768 elements
    (cpu_fusion.cpp, kOneThreadElements), the rule above notwithstanding."""
    x = torch.randn(300, 200).bfloat16()
    report, _, _ = compare(lambda t: t.mean(), [x], check_fused=False)
    assert report.kernel_counts["cpu_fused"] == 0, report


def test_a_lone_mean_in_bf16_fuses_at_symbolic_sizes():
    import fxcpp

    torch._dynamo.reset()
    x = torch.randn(3, 77, 16).bfloat16()
    torch._dynamo.mark_dynamic(x, 1)
    with torch.no_grad():
        report = fxcpp.explain(lambda t: t.mean(1), x)
    assert report.kernel_counts["cpu_fused"] == 1 and report.kernel_counts["aten"] == 0, report
    torch._dynamo.reset()
    f = torch.compile(lambda t: t.mean(1), backend="fxcpp", dynamic=True)
    with torch.no_grad():
        for n in (5, 33, 200):
            x = torch.randn(3, n, 16).bfloat16()
            ref = x.double().mean(1)
            torch.testing.assert_close(f(x).double(), ref, atol=1e-2, rtol=1e-2)
