"""First-call choices shared within a compiled partition (runtime/shared_choices.h): a node
computing what another node already measured, on the same call signature, takes that choice
instead of timing both paths again, says whose measurement it took, and records it in the
choice cache under its own name. A different computation or signature measures for itself."""
import glob
import os
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from fxcpp import _C
from attention_cases import OP
from helpers import assert_same, errors_in_threads

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")

MEASURED = re.compile(r"measured \d+ us vs eager's \d+ us")
SHARED = re.compile(r"as node '(\w+)' measured \(\d+ us against eager's \d+ us; the same computation and signature\)"
                    r"|when node '(\w+)' measured \(\d+ us against eager's \d+ us; the same computation and signature")


@pytest.fixture(autouse=True)
def _no_forced_paths(monkeypatch):
    for var in ("FXCPP_KERNEL_CHOICE", "FXCPP_ATTENTION"):
        monkeypatch.delenv(var, raising=False)


def _rows(model, x, **opts):
    torch._dynamo.reset()
    with torch.no_grad():
        report = fxcpp.explain(model, x, options={"cache": False, **opts})
    return report, [r for r in report.rows if r.kernel == "onednn" and r.impl]


def _check_values(model, x):
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fxcpp", options={"cache": False})
    with torch.no_grad():
        assert_same(model(x), compiled(x))
        assert_same(model(x), compiled(x))


class Layers(nn.Module):
    """Identical Linear + GELU layers, as a transformer's blocks repeat them, and a last Linear
    with another post-op (ReLU) on the same shapes."""

    def __init__(self, n=4, d=64):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(n))
        self.last = nn.Linear(d, d)

    def forward(self, x):
        for layer in self.layers:
            x = F.gelu(layer(x))
        return torch.relu(self.last(x))


def test_identical_layers_measure_once_and_the_rest_take_that_choice():
    torch.manual_seed(0)
    model, x = Layers().eval(), torch.randn(32, 64)
    _, rows = _rows(model, x)
    assert len(rows) == 5, rows
    measured = [r for r in rows if MEASURED.search(r.impl)]
    shared = [r for r in rows if SHARED.search(r.impl)]
    # One of the four GELU layers measured, three took its choice; the ReLU layer measured its own.
    assert len(measured) == 2 and len(shared) == 3, [r.impl for r in rows]
    named = {m for r in shared for m in SHARED.search(r.impl).groups() if m}
    assert len(named) == 1 and named < {r.node for r in measured}, (named, [(r.node, r.impl) for r in rows])
    assert rows[-1] in measured, [(r.node, r.impl) for r in rows]  # the ReLU layer: another computation
    _check_values(model, x)


def test_first_calls_from_several_threads_at_once():
    """Four threads make the first calls of one compiled model at once, at two new batch sizes
    (nodes measure and share while other threads run the same nodes): no thread raises or hangs,
    and every result matches eager."""
    torch.manual_seed(0)
    model = Layers().eval()
    xs = [torch.randn(32, 64), torch.randn(48, 64)]
    refs = [model(x).detach() for x in xs]
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fxcpp", options={"cache": False}, dynamic=False)
    with torch.no_grad():
        compiled(torch.randn(8, 64))  # compiled (and one signature measured) before the threads start

    def call(i):
        def run():
            with torch.no_grad():
                for _ in range(3):
                    assert_same(refs[i % 2], compiled(xs[i % 2]))
        return run

    assert errors_in_threads(*(call(i) for i in range(4)), timeout=300) == []


def test_another_signature_measures_for_itself():
    """The same four layers, one of them fed a transposed (strided) input: its call signature
    differs, so it measures; the other three share one measurement."""

    class Strided(Layers):
        def forward(self, x):
            x = F.gelu(self.layers[0](x))
            x = F.gelu(self.layers[1](x.t().contiguous().t()))  # the same values, column-major
            for layer in self.layers[2:]:
                x = F.gelu(layer(x))
            return x

    torch.manual_seed(0)
    model, x = Strided().eval(), torch.randn(64, 64)
    _, rows = _rows(model, x)
    kinds = [("measured" if MEASURED.search(r.impl) else "shared" if SHARED.search(r.impl) else "other") for r in rows]
    assert kinds == ["measured", "measured", "shared", "shared"], [r.impl for r in rows]
    _check_values(model, x)


def test_no_sharing_across_compiles():
    """A second compile of the same model measures again (one table per partition)."""
    torch.manual_seed(0)
    model, x = Layers(n=2).eval(), torch.randn(16, 64)
    for _ in range(2):
        _, rows = _rows(model, x)
        assert sum(bool(MEASURED.search(r.impl)) for r in rows) == 2, [r.impl for r in rows]


def test_the_choice_cache_holds_every_node_and_a_warm_compile_takes_them(tmp_path):
    torch.manual_seed(0)
    model, x = Layers().eval(), torch.randn(32, 64)
    _, rows = _rows(model, x, cache=True, cache_dir=str(tmp_path))
    assert sum(bool(SHARED.search(r.impl)) for r in rows) == 3
    (path,) = glob.glob(os.path.join(str(tmp_path), "choices", "*.txt"))
    with open(path) as f:
        lines = f.read().splitlines()[1:]
    assert len(lines) == 5 and len({line.split()[1] for line in lines}) == 5, lines  # one line per node
    _, again = _rows(model, x, cache=True, cache_dir=str(tmp_path))
    assert all("choice cache" in r.impl for r in again), [r.impl for r in again]


@pytest.mark.parametrize("choice", [0, 1], ids=["onednn", "aten"])
def test_a_choice_taken_from_the_cache_is_shared_with_siblings_it_does_not_name(tmp_path, choice):
    """A cache file that names only the GELU layer that measured (cut short, or written before
    its siblings existed) and says `choice` (1: eager's ATen ops) for it: that node takes the
    cached choice and its three siblings take it from that node, timing nothing. With ATen, each
    runs eager's ops (`ran` says so) and keeps no packed weight; the values are eager's."""
    torch.manual_seed(0)
    model, x = Layers().eval(), torch.randn(32, 64)
    _, rows = _rows(model, x, cache=True, cache_dir=str(tmp_path))
    (first,) = [r.node for r in rows if MEASURED.search(r.impl) and r is not rows[-1]]
    (path,) = glob.glob(os.path.join(str(tmp_path), "choices", "*.txt"))
    header, *lines = open(path).read().splitlines()
    kept = [line for line in lines if line.split()[1] == first]
    assert len(kept) == 1, (first, lines)
    with open(path, "w") as f:
        f.write("\n".join([header, f"{choice} " + kept[0].split(" ", 1)[1]]) + "\n")
    packs = _C.onednn_stats()["packs"]
    _, rows = _rows(model, x, cache=True, cache_dir=str(tmp_path))
    # A weight is packed only for a node that runs oneDNN's path (the ReLU layer's measurement runs it).
    assert _C.onednn_stats()["packs"] - packs == (1 if choice == 1 else 5), _C.onednn_stats()["packs"] - packs
    by_node = {r.node: r for r in rows}
    assert "choice cache" in by_node[first].impl and not MEASURED.search(by_node[first].impl), by_node[first].impl
    took = "as" if choice == 0 else "when"
    siblings = [r for r in rows[:-1] if r.node != first]
    assert len(siblings) == 3, [r.impl for r in rows]
    for r in siblings:
        assert re.search(rf"{took} node '{first}' measured \(\d+ us against eager's \d+ us; the same computation and "
                         r"signature; it took them from the choice cache", r.impl), r.impl
        assert r.impl.startswith("aten: eager's ops were faster") == (choice == 1), r.impl
        assert r.ran == ("aten" if choice == 1 else "onednn"), (r.node, r.ran)
    assert MEASURED.search(rows[-1].impl), rows[-1].impl  # the ReLU layer, another computation, timed its own
    _check_values(model, x)


class Blocks(nn.Module):
    """Two identical attention blocks (projections, SDPA with a float mask)."""

    def __init__(self, d=64, h=4):
        super().__init__()
        self.h = h
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(2))

    def forward(self, x, mask):
        b, L, d = x.shape
        for qkv in self.qkv:
            q, k, v = (t.view(b, L, self.h, d // self.h).transpose(1, 2) for t in qkv(x).chunk(3, -1))
            x = x + F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(b, L, d)
        return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_identical_attention_calls_measure_once(dtype, monkeypatch):
    if dtype == torch.bfloat16:
        if not _C.host_info()["onednn_bf16"]:
            pytest.skip("bf16 attention runs ATen's kernel without native bf16 matmuls")
        monkeypatch.setenv("FXCPP_BF16", "native")  # also where fp32 is faster (host.h, native_bf16)
    torch.manual_seed(0)
    model = Blocks().eval().to(dtype)
    x, mask = torch.randn(4, 32, 64, dtype=dtype), torch.randn(4, 1, 32, 32, dtype=dtype)
    torch._dynamo.reset()
    with torch.no_grad():
        report = fxcpp.explain(model, x, mask, options={"cache": False})
    rows = [r for r in report.rows if r.op == OP]
    assert len(rows) == 2, report
    measured = [r for r in rows if re.search(r"measured \d+ us vs ATen's flash attention \d+ us", r.impl)]
    shared = [r for r in rows if re.search(r"when node '\w+' measured \(\d+ us vs ATen's flash attention \d+ us at 32 x 32; "
                                           r"the same signature\)", r.impl)]
    assert len(measured) == 1 and len(shared) == 1, [r.impl for r in rows]
    assert f"node '{measured[0].node}'" in shared[0].impl
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fxcpp", options={"cache": False})
    with torch.no_grad():
        ref64 = model.double()(x.double(), mask.double())
        model.to(dtype)
        assert_same(model(x, mask), compiled(x, mask), fp64_ref=ref64)


def test_an_attention_choice_taken_from_the_cache_is_shared_too(tmp_path):
    """The attention kernel's counterpart of the test above: a file naming only the attention
    node that measured, with the matmuls as its choice; the other takes that node's cached choice
    and times nothing. (A cached ATen choice builds no primitives, so it names no implementation
    a sibling could match: that sibling measures, as before.)"""
    torch.manual_seed(0)
    model = Blocks().eval()
    x, mask = torch.randn(4, 32, 64), torch.randn(4, 1, 32, 32)

    def attention_rows():
        torch._dynamo.reset()
        with torch.no_grad():
            report = fxcpp.explain(model, x, mask, options={"cache_dir": str(tmp_path)})
        return [r for r in report.rows if r.op == OP]

    cold = attention_rows()
    (first,) = [r.node for r in cold if re.search(r"measured \d+ us vs ATen's flash attention", r.impl)
                and "when node" not in r.impl]
    (path,) = glob.glob(os.path.join(str(tmp_path), "choices", "*.txt"))
    header, *lines = open(path).read().splitlines()
    other = {r.node for r in cold} - {first}
    kept = [("0 " + line.split(" ", 1)[1]) if line.split()[1] == first else line
            for line in lines if line.split()[1] not in other]
    assert len(kept) == len(lines) - 1, (first, other, lines)
    with open(path, "w") as f:
        f.write("\n".join([header] + kept) + "\n")
    warm = {r.node: r.impl for r in attention_rows()}
    assert "an earlier process measured" in warm[first], warm
    (sibling,) = other
    assert warm[sibling].startswith("onednn "), warm
    assert re.search(rf"when node '{first}' measured \(\d+ us vs ATen's flash attention \d+ us at 32 x 32; "
                     r"the same signature; it took them from the choice cache\)", warm[sibling]), warm
