"""The choice cache (backend/choice_cache.py, runtime/choice_cache.h): a oneDNN kernel's
first-call choice, measured once, is taken by later compiles and new processes instead of
being timed again; a damaged or foreign file is ignored with a warning; it can be turned off."""
import glob
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from fxcpp import _C
from attention_cases import attention_row
from fxcpp.explain import Report, recording
from helpers import assert_same

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


class ConvLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 16)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1)).tanh()


def _model_and_input():
    torch.manual_seed(0)
    return ConvLinear().eval(), torch.randn(4, 3, 8, 8)


def _impls(report):
    return [r.impl for r in report.rows if r.kernel == "onednn" and r.impl]


def _measured(impl):  # this process timed both paths ("measured 12 us vs eager's 30 us")
    return "vs eager's" in impl


def _explain(model, x, cache_dir, **opts):
    torch._dynamo.reset()
    with torch.no_grad():
        return fxcpp.explain(model, x, options={"cache_dir": str(cache_dir), **opts})


def _files(cache_dir):
    return sorted(glob.glob(os.path.join(str(cache_dir), "choices", "*.txt")))


@pytest.fixture(autouse=True)
def _cache_on(monkeypatch):
    monkeypatch.delenv("FXCPP_CACHE", raising=False)


def test_a_later_compile_takes_the_measured_choices(tmp_path):
    model, x = _model_and_input()
    first = _impls(_explain(model, x, tmp_path))
    assert len(first) == 2 and all(_measured(i) and "choice cache" not in i for i in first), first
    (path,) = _files(tmp_path)
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines[0].startswith("fxcpp-choices 2 ") and len(lines) == 3, lines  # a header, one line per node
    for line in lines[1:]:  # "<choice> <node> <signature> <ours us> <eager's us>"
        choice, node, sig, ours, eager = line.split()
        assert choice in "01" and float(ours) > 0 and float(eager) > 0, line
    again = _impls(_explain(model, x, tmp_path))
    assert len(again) == 2 and all("choice cache" in i and not _measured(i) for i in again), again
    assert all(re.search(r"measured \(\d+ us against eager's \d+ us; choice cache", i) for i in again), again
    compiled = torch.compile(model, backend="fxcpp", options={"cache_dir": str(tmp_path)})
    with torch.no_grad():
        assert_same(model(x), compiled(x))


def test_a_new_process_takes_them_and_gives_the_same_bits(tmp_path):
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import fxcpp, test_choice_cache as t
        model, x = t._model_and_input()
        report = t._explain(model, x, {str(tmp_path)!r})
        print("IMPLS", t._impls(report))
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="fxcpp", options={{"cache_dir": {str(tmp_path)!r}}})
        with torch.no_grad():
            torch.save(compiled(x), sys.argv[1])
    """)
    outs = []
    for run in range(2):
        out = tmp_path / f"out{run}.pt"
        p = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        impls = next(line for line in p.stdout.splitlines() if line.startswith("IMPLS"))
        assert ("vs eager's" in impls) == (run == 0) and ("choice cache" in impls) == (run == 1), impls
        outs.append(torch.load(out))
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign", "bad_choice", "bad_time", "empty"])
def test_a_damaged_or_foreign_file_is_ignored_with_a_warning(tmp_path, damage):
    model, x = _model_and_input()
    _explain(model, x, tmp_path)
    (path,) = _files(tmp_path)
    text = open(path, "rb").read()
    damaged = {
        "garbage": b"\x00\xff not a cache \n" * 3,
        "truncated": text[:-7],
        "foreign": text.replace(b"fxcpp-choices 2 ", b"fxcpp-choices 2 0", 1),
        "bad_choice": text.replace(b"\n0 ", b"\n7 ", 1).replace(b"\n1 ", b"\n7 ", 1),
        "bad_time": re.sub(rb" [0-9.]+\n", b" -3.0\n", text, count=1),
        "empty": b"",
    }[damage]
    assert damaged != text
    with open(path, "wb") as f:
        f.write(damaged)
    with pytest.warns(UserWarning, match="ignored the choice cache file"):
        report = _explain(model, x, tmp_path)
    assert all(_measured(i) and "choice cache" not in i for i in _impls(report)), report
    compiled = torch.compile(model, backend="fxcpp", options={"cache_dir": str(tmp_path)})
    with torch.no_grad():
        assert_same(model(x), compiled(x))
    # The file was started afresh and holds this process's choices again.
    assert all("choice cache" in i for i in _impls(_explain(model, x, tmp_path)))


def test_what_a_choice_depends_on_gets_its_own_file(tmp_path):
    model, x = _model_and_input()
    _explain(model, x, tmp_path)
    _explain(model, x, tmp_path, pack_weights=False)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        _explain(model, x, tmp_path)
    finally:
        torch.set_num_threads(threads)
    _explain(model, torch.randn(2, 3, 8, 8), tmp_path)  # another input shape
    assert len(_files(tmp_path)) == 4


def test_it_can_be_turned_off(tmp_path, monkeypatch):
    model, x = _model_and_input()
    report = _explain(model, x, tmp_path, cache=False)
    assert all(_measured(i) for i in _impls(report)) and not _files(tmp_path)
    monkeypatch.setenv("FXCPP_CACHE", "0")
    _explain(model, x, tmp_path)
    assert not _files(tmp_path)
    monkeypatch.delenv("FXCPP_CACHE")
    with torch.compiler.config.patch(force_disable_caches=True):
        _explain(model, x, tmp_path)
    assert not _files(tmp_path)


def test_a_cache_dir_that_cannot_be_made_only_costs_the_measurement(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    model, x = _model_and_input()
    with pytest.warns(UserWarning, match="choice cache is off"):
        report = _explain(model, x, blocker)  # cache_dir is a file: no directory can be made in it
    assert all(_measured(i) for i in _impls(report))


def test_fxcpp_cache_dir_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("FXCPP_CACHE_DIR", str(tmp_path / "env"))
    model, x = _model_and_input()
    torch._dynamo.reset()
    with torch.no_grad():
        fxcpp.explain(model, x)
    assert len(_files(tmp_path / "env")) == 1


def test_a_graph_without_a_measured_kernel_writes_no_file(tmp_path):
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: torch.relu(x) * 2 + 1, backend="fxcpp", options={"cache_dir": str(tmp_path)})
    x = torch.randn(64)
    assert_same(torch.relu(x) * 2 + 1, compiled(x))
    assert not _files(tmp_path)


def _attention_impl(cache_dir):
    """A compiled SDPA called at six sequence lengths (one dynamic graph), its attention node's impl."""
    torch._dynamo.reset()
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    compiled = torch.compile(fn, backend="fxcpp", dynamic=True, options={"cache_dir": str(cache_dir)})
    graphs = []
    with torch.no_grad(), recording(graphs):
        for L in (16, 24, 32, 40, 48, 64):
            q, k, v = (torch.randn(2, 4, L, 32, generator=torch.Generator().manual_seed(L + i)) for i in range(3))
            assert_same(fn(q, k, v), compiled(q, k, v))
    return attention_row(Report(graphs)).impl


def test_attention_choices_are_kept_with_their_times(tmp_path, monkeypatch):
    """An attention node's first-call measurement against ATen's flash kernel
    (attention_kernel.cpp) goes into the cache with both times; a later compile takes each,
    times nothing, and the signature it never measured (48 x 48, under twice the work of those
    before) still inherits a choice (whose rule reads the saving per unit of work, which the
    cached times give back)."""
    monkeypatch.delenv("FXCPP_ATTENTION", raising=False)
    cold = _attention_impl(tmp_path)
    measured_now = re.compile(r"measured \d+ us vs ATen's flash attention \d+ us at (\d+) x \1")
    assert sorted(int(m) for m in measured_now.findall(cold)) == [16, 24, 32, 40, 64], cold
    lines = [line.split() for path in _files(tmp_path) for line in open(path).read().splitlines()[1:]]
    assert len(lines) == 5 and all(float(f[3]) > 0 and float(f[4]) > 0 for f in lines), lines
    warm = _attention_impl(tmp_path)
    assert not measured_now.search(warm), warm
    for L in (16, 24, 32, 40, 64):
        assert re.search(rf"measured \(\d+ us vs ATen's flash attention \d+ us at {L} x {L}; choice cache\)", warm), (L, warm)
    assert "at 48 x 48" not in warm, warm
    assert "as measured for an earlier shape" in warm or "building the matmuls costs more" in warm, warm


@pytest.mark.parametrize("choice", [0, 1], ids=["matmuls", "flash"])
def test_a_cached_attention_choice_is_taken_as_it_stands(tmp_path, monkeypatch, choice):
    """Whichever path the file names runs, with eager's values (a choice only costs speed); where
    it names ATen's flash kernel, no oneDNN primitive is built for that signature."""
    monkeypatch.delenv("FXCPP_ATTENTION", raising=False)
    _attention_impl(tmp_path)
    (path,) = _files(tmp_path)
    header, *lines = open(path).read().splitlines()
    with open(path, "w") as f:
        f.write("\n".join([header] + [f"{choice} " + line.split(" ", 1)[1] for line in lines]) + "\n")
    built = _C.onednn_stats()["primitives"]
    warm = _attention_impl(tmp_path)
    new_primitives = _C.onednn_stats()["primitives"] - built
    if choice == 0:
        assert warm.count("; faster when an earlier process measured") == 5, warm
        assert new_primitives >= 10, new_primitives  # two per signature
    else:
        assert warm.count("aten: its flash attention was faster when an earlier process measured") == 5, warm
        assert new_primitives == 0, new_primitives
