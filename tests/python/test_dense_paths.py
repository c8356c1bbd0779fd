"""Every GEMM/convolution path, forced on any host, gives eager's numbers and says which it is.

- "onednn": oneDNN's primitive in the activations' dtype (fp32; bf16 where the host has
  native bf16 kernels).
- "onednn:bf16-as-fp32" / "onednn:fp16-as-fp32": weights packed to fp32 once, activations
  widened, the result rounded back (FXCPP_BF16=fp32 forces it for bf16 on any host; fp16
  always runs so).
- "gemv": the small-M kernel streaming the weight's [N, K] rows (FXCPP_KERNEL_CHOICE=gemv
  forces it at any M).
- "aten": eager's own ops, when measured faster or when oneDNN refuses a primitive.
Accuracy is judged as PyTorch's harness judges bf16/fp16: against an fp64 reference.
"""
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from fxcpp import _C
from helpers import assert_same, onednn_notes

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


def _check(model, *xs, options=None):
    """fxcpp against eager, both judged against the same model in fp64 (PyTorch's harness rule)."""
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fxcpp", options=options)
    with torch.no_grad():
        ref = model(*xs)
        res = compiled(*xs)
        res = compiled(*xs)  # the second call: after the first call's measured choice
        m64 = _to64(model)
        fp64 = m64(*[x.double() for x in xs])
    assert res.dtype == ref.dtype and res.shape == ref.shape
    assert_same(ref, res, fp64_ref=fp64)
    torch._dynamo.reset()
    return res


def _to64(model):
    import copy

    return copy.deepcopy(model).double()


class LinearGelu(nn.Module):
    def __init__(self, k=96, n=80):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return F.gelu(self.fc(x))


class LinearResidual(nn.Module):
    def __init__(self, k=96):
        super().__init__()
        self.fc = nn.Linear(k, k)

    def forward(self, x):
        return torch.relu(self.fc(x) + x)


class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)) + 1)


def _with_bn_stats(m):
    """m with its BatchNorm's running statistics away from the identity (so folding shows)."""
    with torch.no_grad():
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
    return m


def _models(dtype):
    torch.manual_seed(0)
    bn = _with_bn_stats(ConvBnRelu().eval())
    return {
        "linear_gelu": (LinearGelu().eval().to(dtype), (torch.randn(4, 24, 96, dtype=dtype),)),
        "linear_residual": (LinearResidual().eval().to(dtype), (torch.randn(64, 96, dtype=dtype),)),
        "conv_bn_relu": (bn.to(dtype), (torch.randn(2, 8, 10, 10, dtype=dtype),)),
    }


@pytest.mark.parametrize("name", ["linear_gelu", "linear_residual", "conv_bn_relu"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_as_fp32(name, dtype, monkeypatch):
    """bf16 forced through the fp32 path (any host), fp16 always: fp32 kernels, rounded once."""
    monkeypatch.setenv("FXCPP_BF16", "fp32")
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")
    model, xs = _models(dtype)[name]
    _check(model, *xs)
    tag = "onednn:bf16-as-fp32" if dtype == torch.bfloat16 else "onednn:fp16-as-fp32"
    assert all(n.startswith(tag) for n in onednn_notes(model, *xs)), onednn_notes(model, *xs)


@pytest.mark.parametrize("name", ["linear_gelu", "conv_bn_relu"])
def test_bf16_native_where_the_host_has_it(name, monkeypatch):
    """FXCPP_BF16=native: oneDNN's bf16 kernels where the host has them; where it refuses, a
    stated fallback to ATen (never silent), with eager's numbers either way."""
    monkeypatch.setenv("FXCPP_BF16", "native")
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")
    model, xs = _models(torch.bfloat16)[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(model, *xs)
        notes = onednn_notes(model, *xs)
    if _C.host_info()["onednn_isa"] in ("avx512_core_bf16", "avx512_core_fp16", "avx512_core_amx", "avx512_core_amx_fp16"):
        assert all(n.startswith("onednn ") and "as-fp32" not in n for n in notes), notes
    else:
        assert all(n.startswith("onednn ") or "oneDNN refused" in n for n in notes), notes


def test_default_bf16_path_follows_the_host(monkeypatch):
    """Unforced, bf16 runs natively exactly where host_info says so: oneDNN has bf16 kernels and
    they are the faster path (AMX, or bf16 dot products outrunning fp32 FMAs)."""
    monkeypatch.delenv("FXCPP_BF16", raising=False)
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")
    model, xs = _models(torch.bfloat16)["linear_residual"]
    notes = onednn_notes(model, *xs)
    want = "onednn " if _C.host_info()["native_bf16"] else "onednn:bf16-as-fp32 "
    assert all(n.startswith(want) for n in notes), (notes, _C.host_info())


def test_refused_primitive_is_stated_and_correct():
    """A primitive oneDNN refuses (bf16 forced native on a host oneDNN treats as AVX2) runs as
    ATen ops, with a warning naming the node and the reason in explain(). In a subprocess:
    ONEDNN_MAX_CPU_ISA is read once, when oneDNN starts."""
    code = textwrap.dedent("""
        import warnings, torch, torch.nn as nn, fxcpp
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(64, 32), nn.ReLU()).eval().bfloat16()
        x = torch.randn(40, 64, dtype=torch.bfloat16)
        with torch.no_grad(), warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = fxcpp.explain(m, x)
            out = torch.compile(m, backend="fxcpp")(x)
        notes = [row.impl for row in r.rows if row.kernel == "onednn"]
        print("NOTES", notes)
        ref = m.double()(x.double()).bfloat16()
        print("CLOSE", bool(torch.allclose(out.float(), ref.float(), atol=3e-2, rtol=3e-2)))
    """)
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", FXCPP_BF16="native", FXCPP_KERNEL_CHOICE="onednn")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "aten: oneDNN refused the primitive" in p.stdout, p.stdout
    assert "CLOSE True" in p.stdout, p.stdout
    # The warning names the node; TORCH_WARN outside a Python-wrapped call reaches stderr.
    assert "': oneDNN refused the primitive (" in p.stderr, p.stderr[-3000:]


# --- the small-M GEMV -------------------------------------------------------------------------

class MatmulByParam(nn.Module):
    """x @ W with W a [K, N] parameter: the GEMV reads it from a pack of [N, K] rows."""

    def __init__(self, k=72, n=40):
        super().__init__()
        self.w = nn.Parameter(torch.randn(k, n) / 8)

    def forward(self, x):
        return torch.tanh(x @ self.w)


class LinearBn(nn.Module):
    def __init__(self, k=72, n=40):
        super().__init__()
        self.fc, self.bn = nn.Linear(k, n), nn.BatchNorm1d(n)

    def forward(self, x):
        return self.bn(self.fc(x))


def _gemv_models(dtype, m):
    torch.manual_seed(1)
    lbn = _with_bn_stats(LinearBn().eval())
    return {
        "linear_gelu": (LinearGelu(k=100, n=37).eval().to(dtype), torch.randn(m, 100, dtype=dtype), "rows read"),
        "linear_nobias": (nn.Linear(64, 50, bias=False).eval().to(dtype), torch.randn(m, 64, dtype=dtype), "rows read"),
        "linear_residual": (LinearResidual(k=64).eval().to(dtype), torch.randn(m, 64, dtype=dtype), "rows read"),
        "linear_3d": (LinearGelu(k=33, n=20).eval().to(dtype), torch.randn(1, m, 33, dtype=dtype), "rows read"),
        "matmul_kn": (MatmulByParam().eval().to(dtype), torch.randn(m, 72, dtype=dtype), "packed once"),
        "linear_bn": (lbn.to(dtype), torch.randn(m, 72, dtype=dtype), "packed once"),
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m", [1, 3, 16, 33])
@pytest.mark.parametrize("name", ["linear_gelu", "linear_nobias", "linear_residual", "linear_3d", "matmul_kn", "linear_bn"])
def test_gemv_forced(name, m, dtype, monkeypatch):
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "gemv")
    model, x, how = _gemv_models(dtype, m)[name]
    _check(model, x)
    notes = onednn_notes(model, x)
    assert all(n.startswith("gemv ") and how in n for n in notes), notes


def test_gemv_reads_live_weights_and_repacks_changed_ones(monkeypatch):
    """Rows read in place see every write; a packed [N, K] copy is re-packed after one."""
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "gemv")
    for name in ("linear_gelu", "matmul_kn"):
        model, x, _ = _gemv_models(torch.float32, 2)[name]
        compiled = torch.compile(model, backend="fxcpp")
        with torch.no_grad():
            compiled(x)
            for p in model.parameters():
                p.data.mul_(2)
            assert_same(model(x), compiled(x))
        torch._dynamo.reset()


def test_gemv_at_small_m_by_default(monkeypatch):
    """Unforced, a batch-1 Linear runs the GEMV or (if measured faster here) eager's op; a
    large batch never takes the GEMV."""
    monkeypatch.delenv("FXCPP_KERNEL_CHOICE", raising=False)
    torch.manual_seed(0)
    model = nn.Linear(512, 1024).eval()
    for m, allowed in ((1, ("gemv ", "aten: eager's ops were faster")), (64, ("onednn ", "aten: eager"))):
        x = torch.randn(m, 512)
        _check(model, x)
        notes = onednn_notes(model, x)
        assert all(n.startswith(allowed) for n in notes), notes


_SMALL_M_RULE = textwrap.dedent("""
    import json, torch, torch.nn as nn, fxcpp
    from fxcpp import _C
    info = _C.host_info()
    seen = []
    for dtype in (torch.float32, torch.bfloat16):
        for k, n in ((256, 512), (1024, 1280), (2048, 1280)):  # 0.5, 5 and 10 MB in fp32
            for m in (1, 2, 16, 33):
                for packed in (True, False):
                    torch._dynamo.reset()
                    torch.manual_seed(0)
                    model = nn.Linear(k, n).eval().to(dtype)
                    with torch.no_grad():
                        r = fxcpp.explain(model, torch.randn(m, k, dtype=dtype), options={"pack_weights": packed})
                    notes = [row.impl for row in r.rows if row.kernel == "onednn" and row.impl]
                    seen.append([str(dtype), m, packed, k * n * dtype.itemsize, notes])
    print("RULE", json.dumps({"isa": info["onednn_isa"], "native_bf16": info["native_bf16"], "seen": seen}))
""")


def _gemv_limit(onednn_isa, bf16, native_bf16, packed, weight_bytes):
    """matmul_kernel.cpp's measured limits: against oneDNN's AVX-512 brgemm on a packed weight
    the GEMV keeps M = 1 (M <= 4 on weights up to 4 MiB) in fp32, M <= 4 for a bf16 weight
    computed in fp32 (oneDNN reads its fp32 pack, the GEMV the bf16 rows), nothing against
    native bf16; otherwise M <= 16 (M <= 4 against native bf16)."""
    if packed and onednn_isa.startswith("avx512"):
        if native_bf16:
            return 0
        return 4 if bf16 or weight_bytes <= 4 << 20 else 1
    return 4 if native_bf16 else 16


@pytest.mark.parametrize("onednn_isa", [None, "AVX2"])
def test_small_m_rule_follows_the_measured_crossover(onednn_isa):
    """Unforced, each M and weight kind takes the path the rule names: the GEMV (its impl ends
    in "rows") or oneDNN, whether it then ran or eager's op was measured faster (the note
    still names what was measured). In a subprocess, on this host's oneDNN and with oneDNN
    capped at AVX2 (the other host class)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FXCPP_KERNEL_CHOICE", "FXCPP_BF16")}
    if onednn_isa:
        env["ONEDNN_MAX_CPU_ISA"] = onednn_isa
    p = subprocess.run([sys.executable, "-c", _SMALL_M_RULE], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    import json
    r = json.loads(p.stdout.split("RULE ", 1)[1])
    if onednn_isa:
        assert not r["isa"].startswith("avx512"), r["isa"]
    paths = set()
    for dtype, m, packed, weight_bytes, notes in r["seen"]:
        bf16 = dtype == "torch.bfloat16"
        gemv = m <= _gemv_limit(r["isa"], bf16, bf16 and r["native_bf16"], packed, weight_bytes)
        assert notes, (dtype, m, packed)
        for n in notes:
            ran_gemv = n.startswith("gemv ") or (n.startswith("aten: eager's ops were faster") and n.endswith(" rows)"))
            assert ran_gemv == gemv, (r["isa"], dtype, m, packed, n)
            paths.add(gemv)
    assert paths == {True, False}, r  # both sides of the rule were exercised


def test_packs_are_shared_across_signatures(monkeypatch):
    """Two batch sizes with the same weight layout keep one pack, not one each; one change of
    the weight re-packs it without marking it volatile."""
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")
    torch.manual_seed(0)
    model = nn.Linear(256, 384).eval()
    compiled = torch.compile(model, backend="fxcpp", dynamic=True)  # one graph, so one kernel, for both
    xs = [torch.randn(m, 256) for m in (64, 65)]
    with torch.no_grad():
        compiled(xs[0])
        before = _C.onednn_stats()["packs"]
        compiled(xs[1])
        assert _C.onednn_stats()["packs"] == before  # M = 65 shares M = 64's pack
        model.weight.data.mul_(2)
        for x in xs:
            assert_same(model(x), compiled(x))
    torch._dynamo.reset()
    notes = onednn_notes(model, xs[0])
    assert all("weight packed once" in n for n in notes), notes


def test_host_info_is_recorded():
    h = _C.host_info()
    assert h["onednn_isa"] and h["aten_isa"] in ("avx512", "avx2", "default")
    assert h["onednn_bf16"] == (h["onednn_isa"] in ("avx512_core_bf16", "avx512_core_fp16", "avx512_core_amx",
                                                    "avx512_core_amx_fp16"))
    # native bf16: oneDNN has the kernels, and AMX or bf16 dot products outrunning fp32 FMAs
    fast = h["amx"] or h["bf16_dot_rate"] >= h["min_bf16_dot_rate"]
    assert h["native_bf16"] == (h["onednn_bf16"] and fast)
    assert (h["bf16_dot_rate"] > 0) == h["avx512_bf16"]
    # oneDNN never claims more than the CPU says (it reads the same CPUID)
    assert not h["avx512_bf16"] or h["avx512"]
    assert h["l1d"] >= 0 and h["l3"] >= 0


@pytest.mark.parametrize("choice", ["onednn", "aten"])
def test_size_one_dims_with_arbitrary_strides_run_on_onednn(choice, monkeypatch):
    # Found by the fuzzer (seed 81): a transposed [17, 32, 1] input viewed as [544, 1] has
    # strides (1, 32); oneDNN 3.2 built the matmul for them and refused to execute it.
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", choice)
    lin = nn.Linear(1, 3).eval()
    x = torch.randn(17, 1, 32).transpose(-1, -2)
    fn = lambda x: lin(x - 1.5)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a refused primitive warns
        notes = onednn_notes(fn, x)
    assert not any("refused" in n for n in notes), notes
    assert all(n.startswith("onednn") if choice == "onednn" else n.startswith("aten") for n in notes), notes
    torch._dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(fn, backend="fxcpp")(x), fn(x))


@pytest.mark.parametrize("choice", ["onednn", "aten"])
def test_a_weight_operand_with_a_size_one_dim_of_any_stride_runs_on_onednn(choice, monkeypatch):
    # Found by the fuzzer's training steps (seed 1113): a Linear's weight gradient is
    # mm(grad.t(), x.view(-1, 1)), and a transposed x makes that [6, 1] operand's strides (1, 2).
    # The primitive was built for those strides and each call described the memory with the
    # size-1 dim made dense: oneDNN refused to execute.
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", choice)
    g, x = torch.randn(6, 17), torch.randn(3, 1, 2).transpose(-1, -2).reshape(6, 1)
    assert x.stride() == (1, 2)
    fn = lambda g, x: torch.mm(g.t() * 1.5, x)  # noqa: E731 (M = 17: past the small-M path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a refused primitive warns
        notes = onednn_notes(fn, g, x)
    assert not any("refused" in n for n in notes), notes
    assert all(n.startswith("onednn") if choice == "onednn" else n.startswith("aten") for n in notes), notes
    torch._dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(fn, backend="fxcpp")(g, x), fn(g, x))


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_a_binary_post_op_after_a_clamp_runs_on_onednn(kind, monkeypatch):
    # Found by the fuzzer (seed 1820): clamp is several oneDNN post-ops (NaN-preserving), and
    # the binary add after it was given its operand at the clamp's index: oneDNN refused to
    # execute, and the node fell back to ATen with a warning.
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")
    torch.manual_seed(0)
    if kind == "linear":
        w, b, p = torch.randn(5, 17), torch.randn(5), torch.randn(5)
        x = torch.randn(85, 17)
        fn = lambda x: (F.linear(x, w, b).clamp(-1.0, 2.0) + p).clamp(-1.0, 2.0)  # noqa: E731
    else:
        w, r = torch.randn(8, 4, 3, 3), torch.randn(2, 8, 6, 6)
        x = torch.randn(2, 4, 6, 6)
        fn = lambda x: F.relu6(F.conv2d(x, w, None, 1, 1)) * r  # noqa: E731
    notes = onednn_notes(fn, x)
    assert all(n.startswith("onednn") for n in notes), notes
    torch._dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(fn, backend="fxcpp")(x), fn(x))


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_a_convolution_of_an_input_with_no_channels_is_shaped_as_eager_shapes_it(dim):
    # Found by the fuzzer (seeds 2664, 3246): eager returns 0 output channels when the input has
    # none; fxcpp's shape rule said the weight's, the verifier saw the mismatch and the whole
    # graph fell back to the Interpreter with a warning.
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[dim]
    x, w = torch.randn((1, 0) + (8,) * dim), torch.randn((4, 0) + (3,) * dim)
    fn = lambda x: conv(x, w, None, 2) + 1.0  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the Interpreter fallback warns
        with torch.no_grad():
            out = torch.compile(fn, backend="fxcpp")(x)
    assert out.shape == fn(x).shape
