"""static_values: which values are marked as parameter-derived, idempotence, and the executor
running their steps once (and again only when a parameter changes), with the same numbers."""
import torch
import torch.nn.functional as F

from fxcpp import _C
from graphs import lowered, pipeline_until


def _lora(x, w, a, b):
    merged = w + a @ b              # parameters only: static
    scale = merged.abs().amax()     # still static
    return F.linear(x, merged / scale)


def _marked(fn, *xs, static=None):
    _, g = lowered(fn, *xs, static=static)
    pipeline_until(g, "dce")
    assert _C.run_pass(g, "static_values") is True
    assert _C.run_pass(g, "static_values") is False  # idempotent
    return g, set(g.static_values())


def _xs():
    torch.manual_seed(0)
    return torch.randn(4, 8), torch.randn(6, 8), torch.randn(6, 2), torch.randn(2, 8)


def test_parameter_derived_values_are_marked_and_inputs_derived_ones_are_not():
    xs = _xs()
    g, marked = _marked(_lora, *xs)
    names = {n: t for n, t in zip(g.node_names(), g.node_targets())}
    targets = {names[n] for n in marked}
    assert {"aten::mm", "aten::add.Tensor", "aten::abs", "aten::amax", "aten::div.Tensor"} <= targets
    assert not any(names[n] in ("aten::addmm", "aten::mm") and n not in marked for n in marked)
    # With x static too, nothing more is marked: the only node reading x is the graph's output,
    # which is never marked (the caller gets a fresh tensor, as from eager).
    _, marked2 = _marked(_lora, *xs, static={0, 1, 2, 3})
    assert marked2 == marked


def test_random_and_empty_ops_are_never_marked():
    _, g = lowered(lambda x, w: F.linear(x, w + torch.rand_like(w) + torch.empty_like(w).fill_(0)), *_xs()[:2])
    pipeline_until(g, "static_values")
    marked_targets = {t for n, t in zip(g.node_names(), g.node_targets()) if n in set(g.static_values())}
    assert not any("rand" in t or "empty" in t or "fill" in t for t in marked_targets), marked_targets


def test_static_steps_run_once_and_again_after_a_parameter_changes():
    xs = list(_xs())
    _, g = lowered(_lora, *xs)
    pipeline_until(g, "dce_after_fusion")
    exe = _C.Executable(g)
    assert exe.static_steps(), str(exe)
    ref = _lora(*xs)
    torch.testing.assert_close(exe.run(xs)[0], ref)
    _, times = exe.run_profiled(xs)  # cached: the static steps do not run
    steps = [s[0] for s in exe.steps()]
    assert all(times[steps.index(n)] == 0 for n in exe.static_steps())
    xs[2].data.mul_(3)  # a write that moves no version counter, to a parameter of the static part
    torch.testing.assert_close(exe.run(xs)[0], _lora(*xs))
    xs[3] = torch.randn(2, 8)  # a new parameter tensor
    torch.testing.assert_close(exe.run(xs)[0], _lora(*xs))
    xs[0] = torch.randn(4, 8)  # a new activation: the static part stays cached
    _, times = exe.run_profiled(xs)
    assert all(times[steps.index(n)] == 0 for n in exe.static_steps())
    torch.testing.assert_close(exe.run(xs)[0], _lora(*xs))


def test_an_op_that_copies_a_guarded_input_to_read_it_gets_a_view():
    """_weight_norm_interface takes a writable pointer to v: on a write-guarded v that copies v
    at every call. The executor sees it in the step's first runs and hands it a view of v."""
    v, g_ = torch.randn(16, 8, 3), torch.rand(1, 1, 3) + 0.5
    x = torch.randn(2, 8, 10)

    def f(x, v, g):
        return F.conv1d(x, torch._weight_norm(v, g, 2), padding=1)

    _, g = lowered(f, x, v, g_)
    pipeline_until(g, "dce_after_fusion")
    exe = _C.Executable(g)
    ref = f(x, v.clone(), g_)  # eager's own _weight_norm would copy a guarded v: once, on a copy
    for _ in range(4):
        torch.testing.assert_close(exe.run([x, v, g_])[0], ref, atol=1e-4, rtol=1e-4)
    if _C.has_onednn():  # the conv's pack guards its weight; v is guarded by the static part
        assert torch._C._is_cow_tensor(v)
        packs = _C.onednn_stats()["packs"]
        exe.run([x, v, g_])
        assert _C.onednn_stats()["packs"] == packs
