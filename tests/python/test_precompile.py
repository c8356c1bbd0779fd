"""Precompile (backend/precompile.py): torch's aot_compile saves a function compiled by fxcpp,
and a fresh process loads and runs it without Dynamo tracing; weights are the function's
inputs, so they are never saved and a changed weight is seen."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn

import fxcpp
from helpers import assert_same

pytestmark = pytest.mark.skipif(not hasattr(torch.compiler, "load_compiled_function"), reason="torch has no aot_compile")


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 10)).eval()


def f(model, x):
    return model(x).softmax(-1)


def test_saved_in_one_process_runs_in_another_without_dynamo(tmp_path):
    model, x = _model(), torch.randn(2, 3, 8, 8)
    path = tmp_path / "f.pt2"
    opts = {"guard_filter_fn": fxcpp.precompile.keep_serializable_guards_unsafe, "cache_dir": str(tmp_path)}
    with torch.no_grad(), torch._dynamo.config.patch(enable_aot_compile=True):  # off by default in torch 2.11
        saved = torch.compile(f, fullgraph=True, backend="fxcpp", options=opts).aot_compile(((model, x), {}))
        assert isinstance(saved._artifacts.compiled_fn, fxcpp.precompile.PrecompiledGraph)
        assert_same(f(model, x), saved(model, x))
        saved.save_compiled_function(str(path))
    torch.save({"model": model.state_dict(), "x": x}, tmp_path / "data.pt")
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import fxcpp, test_precompile as t
        from torch._dynamo.utils import compilation_time_metrics
        data = torch.load({str(tmp_path / "data.pt")!r})
        model = t._model()
        model.load_state_dict(data["model"])
        x = data["x"]
        with torch.no_grad():
            loaded = torch.compiler.load_compiled_function(open({str(path)!r}, "rb"))
            torch.testing.assert_close(loaded(model, x), t.f(model, x))
            model[0].weight.data.mul_(2)  # a weight changed: seen, it is an input
            torch.testing.assert_close(loaded(model, x), t.f(model, x))
            other = t._model()  # another model of the same kind: its own weights are used
            torch.nn.init.normal_(other[3].weight)
            torch.testing.assert_close(loaded(other, x), t.f(other, x))
        assert "bytecode_tracing" not in compilation_time_metrics, sorted(compilation_time_metrics)
        # The saved inference ATen graph was compiled: aot_autograd did not trace again.
        assert loaded._artifacts.compiled_fn.warm_path == "saved ATen graph"
        assert not any("aot" in k for k in compilation_time_metrics), sorted(compilation_time_metrics)
        print("OK")
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "FXCPP_CACHE_DIR": str(tmp_path)})
    assert p.returncode == 0 and "OK" in p.stdout, p.stderr[-3000:]


def test_plain_torch_compile_gets_a_plain_callable():
    model, x = _model(), torch.randn(2, 3, 8, 8)
    seen = []
    from fxcpp.compiler import backend

    def spy(gm, example_inputs):
        fn = backend(gm, example_inputs)
        seen.append(fn)
        return fn

    with torch.no_grad():
        assert_same(f(model, x), torch.compile(f, backend=spy)(model, x))
    assert seen and not any(isinstance(fn, fxcpp.precompile.PrecompiledGraph) for fn in seen)


def g(model, x):  # another function: its artifact is foreign to f
    return model(x) * 2


def f3(model, x):  # f3 and f2 differ in a constant only
    return model(x).softmax(-1) * 3


@pytest.mark.parametrize("damage", ["none", "truncated", "garbage", "empty", "missing", "other_function",
                                    "other_constant"])
def test_load_warns_and_compiles_afresh_on_a_damaged_or_foreign_file(tmp_path, damage):
    model, x = _model(), torch.randn(2, 3, 8, 8)
    path = tmp_path / "f.pt2"
    with torch.no_grad():
        saved_fn = {"other_function": g, "other_constant": f2}.get(damage, f)
        fxcpp.precompile.save(saved_fn, (model, x), path, options={"cache_dir": str(tmp_path)})
        data = path.read_bytes()
        if damage == "truncated":
            path.write_bytes(data[: len(data) // 2])
        elif damage == "garbage":
            path.write_bytes(b"\x80\x04not a pickle" + data[64:])
        elif damage == "empty":
            path.write_bytes(b"")
        elif damage == "missing":
            path.unlink()
        torch._dynamo.reset()
        fn = f3 if damage == "other_constant" else f
        with pytest.warns(UserWarning, match="not used") if damage != "none" else _no_fxcpp_warning():
            loaded = fxcpp.precompile.load(path, fn)
        assert_same(fn(model, x), loaded(model, x))
        model[0].weight.data.mul_(2)  # weights are inputs either way
        assert_same(fn(model, x), loaded(model, x))
    if damage not in ("none", "other_function", "other_constant"):  # (another function's file is a valid file)
        with pytest.raises(Exception):
            fxcpp.precompile.load(path)  # without a function to fall back on: the error


def f2(model, x):
    return model(x).softmax(-1) * 2


def test_a_call_the_saved_guards_reject_compiles_afresh(tmp_path):
    model, x = _model(), torch.randn(2, 3, 8, 8)
    path = tmp_path / "f.pt2"
    with torch.no_grad():
        fxcpp.precompile.save(f, (model, x), path, options={"cache_dir": str(tmp_path)})
        torch._dynamo.reset()
        loaded = fxcpp.precompile.load(path, f)
        assert_same(f(model, x), loaded(model, x))
        other = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Tanh(), nn.Flatten(), nn.Linear(8 * 8 * 8, 10)).eval()
        with pytest.warns(UserWarning, match="does not fit this call"):
            out = loaded(other, x)  # another kind of model: the saved guards say no
        assert_same(f(other, x), out)
        assert_same(f(model, x), loaded(model, x))  # from then on, the cold compile serves every call


class _no_fxcpp_warning:
    def __enter__(self):
        import warnings
        self._w = warnings.catch_warnings(record=True)
        self.caught = self._w.__enter__()
        warnings.simplefilter("always")

    def __exit__(self, *exc):
        self._w.__exit__(*exc)
        assert not [w for w in self.caught if str(w.message).startswith("fxcpp:")], [str(w.message) for w in self.caught]


def test_a_loaded_function_never_runs_its_inference_graph_for_autograd(tmp_path):
    """The saved ATen graph is an inference graph. A call with grad enabled on weights that
    require grad fails the saved guards (grad mode is one): load()'s wrapper warns and compiles
    afresh, and gradients flow. Behind the guards, the graph itself refuses such a call too."""
    model, x = _model(), torch.randn(2, 3, 8, 8)
    path = tmp_path / "f.pt2"
    with torch.no_grad():
        fxcpp.precompile.save(f, (model, x), path, options={"cache_dir": str(tmp_path)})
    loaded = fxcpp.precompile.load(path, f, options={"cache_dir": str(tmp_path)})
    with pytest.warns(UserWarning, match="does not fit this call"):
        out = loaded(model, x)
    assert_same(out, f(model, x))
    out.sum().backward()
    assert model[0].weight.grad is not None
    saved = loaded.loaded._artifacts.compiled_fn
    args = [model[0].weight, model[0].bias, x, model[3].weight, model[3].bias]  # Dynamo's graph's order
    assert [tuple(a.shape) for a in args] == [tuple(p.meta["val"].shape) for p in saved.aten.graph.find_nodes(op="placeholder")]
    assert saved.aten is not None and saved._from_saved_aten(args) is None
    with torch.no_grad():
        assert saved._from_saved_aten(args) is not None
