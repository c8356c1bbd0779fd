"""Options.freeze: an inference graph releases the parameters and buffers it holds packed
(backend/freeze.py), runs on from its packs, and says clearly when something needs them."""
import gc
import logging
import threading
import time
import weakref

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from fxcpp import _C
from fxcpp.explain import recording
from fxcpp.freeze import ReleasedTensor
from helpers import assert_same, errors_in_threads

pytestmark = [pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)"),
              pytest.mark.usefixtures("onednn_forced")]

FREEZE = {"freeze": True}


def mlp(dtype=torch.float32):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32), nn.GELU(), nn.Linear(32, 8)).eval().to(dtype)


def conv_bn():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 1)).eval()
    with torch.no_grad():
        m[1].running_mean.normal_()
        m[1].running_var.uniform_(0.5, 2)
    return m


def frozen(model, x, **compile_kw):
    """(compiled, eager's result before the release, the compiled first result)."""
    with torch.no_grad():
        ref = model(x)
    f = torch.compile(model, backend="fxcpp", options=FREEZE, **compile_kw)
    with torch.no_grad():
        out = f(x)
    return f, ref, out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("path", ["gemv", "onednn"])
def test_frozen_mlp_matches_eager_and_its_weights_are_freed(dtype, path, monkeypatch):
    # gemv: our GEMV reads a Linear's rows where they lie, so freezing keeps those rows (no copy);
    # onednn: oneDNN's packed layout.
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", path)
    batch = 1 if path == "gemv" else 32
    model = mlp(dtype)
    x = torch.randn(batch, 64, dtype=dtype)
    originals = [weakref.ref(p) for p in model.parameters()]
    f, ref, out = frozen(model, x)
    assert_same(ref, out)
    assert all(isinstance(p, ReleasedTensor) for p in model.parameters())
    gc.collect()
    assert all(r() is None for r in originals)  # nothing but the packs holds their values now
    with torch.no_grad(), torch.compiler.set_stance("fail_on_recompile"):
        for _ in range(2):
            assert_same(ref, f(x))


def test_frozen_conv_batchnorm_matches_eager_and_releases_conv_and_batchnorm_tensors():
    model = conv_bn()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        ref = model(x)
        report = fxcpp.explain(model, x, options=FREEZE)  # compiles (releasing) and runs twice
        assert report.kernel_counts["onednn"] >= 2  # both convolutions, the BatchNorm folded into the first
        assert report.kernel_counts["aten"] == 0
        assert sorted(next(iter(report.released.values()))) == sorted(
            ["Conv2d.weight", "BatchNorm2d.weight", "BatchNorm2d.bias", "BatchNorm2d.running_mean",
             "BatchNorm2d.running_var", "Conv2d.weight", "Conv2d.bias"])
        assert "released" in str(report)
    for t in (model[0].weight, model[1].weight, model[1].bias, model[1].running_mean, model[1].running_var,
              model[3].weight, model[3].bias):
        assert isinstance(t, ReleasedTensor)


def test_frozen_conv_batchnorm_keeps_running_from_its_packs():
    model = conv_bn()
    x = torch.randn(2, 3, 16, 16)
    f, ref, out = frozen(model, x)
    assert_same(ref, out)
    with torch.no_grad(), torch.compiler.set_stance("fail_on_recompile"):
        assert_same(ref, f(x))


def test_a_new_batch_size_packs_its_layout_from_a_kept_pack(monkeypatch):
    # One graph for every batch size (mark_dynamic); batch 32 runs oneDNN's packed layout, batch 2
    # the GEMV's rows (M <= 4 on every host for these small fp32 weights), which a frozen kernel
    # can only get by reordering its kept pack back to the weight. No forced choice: it would
    # force one path at every M.
    monkeypatch.delenv("FXCPP_KERNEL_CHOICE")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 256), nn.GELU(), nn.Linear(256, 64)).eval()
    xs = {b: torch.randn(b, 64) for b in (32, 2, 3, 17)}
    with torch.no_grad():
        refs = {b: model(x) for b, x in xs.items()}
    torch._dynamo.mark_dynamic(xs[32], 0)
    f = torch.compile(model, backend="fxcpp", options=FREEZE)
    with torch.no_grad():
        assert_same(refs[32], f(xs[32]))
        # Each layer whose first call measured oneDNN faster than eager's ops is frozen (a tie
        # goes to oneDNN; eager must win by 10%).
        assert any(isinstance(layer.weight, ReleasedTensor) for layer in model[::2])
        packs = _C.onednn_stats()["packs"]
        with torch.compiler.set_stance("fail_on_recompile"):
            for b in (2, 3, 17, 32):
                assert_same(refs[b], f(xs[b]))
    assert _C.onednn_stats()["packs"] > packs  # the GEMV's rows, from the oneDNN packs


def test_eager_use_of_a_released_tensor_raises_naming_it():
    model = mlp()
    x = torch.randn(4, 64)
    frozen(model, x)
    with torch.no_grad(), pytest.raises(RuntimeError, match="'Linear.weight' was released by torch.compile"):
        model(x)
    with pytest.raises(RuntimeError, match="was released"):
        model.state_dict()


def test_a_recompile_after_the_release_raises_naming_the_released_weight():
    model = mlp()
    x8, x5 = torch.randn(8, 64), torch.randn(5, 64)
    frozen(model, x8)  # static shapes: batch 5 compiles another graph, which reads the weights
    with torch.no_grad(), pytest.raises(Exception, match="was released by torch.compile"):
        torch.compile(model, backend="fxcpp", options=FREEZE)(x5)


def test_under_fail_on_recompile_a_new_shape_raises_and_the_frozen_graph_keeps_serving():
    # What the README tells a service to do with a frozen model: a failed compile would leave
    # Dynamo running the module eagerly, which cannot read the released weights.
    model = mlp()
    x8, x5 = torch.randn(8, 64), torch.randn(5, 64)
    f, ref, _ = frozen(model, x8)
    with torch.no_grad(), torch.compiler.set_stance("fail_on_recompile"):
        with pytest.raises(RuntimeError, match="fail_on_recompile"):
            f(x5)
        assert_same(ref, f(x8))


def test_a_weight_of_another_shape_put_in_place_of_a_released_one_is_an_error():
    model = mlp()
    x = torch.randn(8, 64)
    f, _, _ = frozen(model, x)
    model[2].weight = nn.Parameter(torch.randn(32, 129))  # Dynamo no longer guards the released one
    with torch.no_grad(), pytest.raises(RuntimeError, match="was frozen"):
        f(x)


def test_a_training_graph_is_not_frozen():
    model = mlp().train()
    x = torch.randn(8, 64)
    out = torch.compile(model, backend="fxcpp", options=FREEZE)(x)
    out.sum().backward()
    assert not any(isinstance(p, ReleasedTensor) for p in model.parameters())
    assert all(p.grad is not None for p in model.parameters())


def test_a_weight_an_aten_op_reads_stays_and_the_others_go():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 32)
            self.mid = nn.Linear(32, 32)
            self.head = nn.Linear(32, 50, bias=False)
            self.head.weight = self.emb.weight  # tied: the embedding (an ATen op) reads it as it is

        def forward(self, ids):
            return self.head(torch.relu(self.mid(self.emb(ids))))

    torch.manual_seed(0)
    model = Tied().eval()
    ids = torch.randint(0, 50, (4, 16))
    mid_w, mid_b = model.mid.weight.detach().clone(), model.mid.bias.detach().clone()
    f, ref, out = frozen(model, ids)
    assert_same(ref, out)
    assert isinstance(model.mid.weight, ReleasedTensor)
    assert type(model.emb.weight) is nn.Parameter and model.head.weight is model.emb.weight
    with torch.no_grad():
        model.emb.weight.mul_(2)  # the tied weight is not frozen: both of its uses see the change
        w = model.emb.weight
        assert_same(F.linear(torch.relu(F.linear(F.embedding(ids, w), mid_w, mid_b)), w), f(ids))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("computed", ["transposed", "scaled"])
def test_a_kernel_whose_weight_is_computed_in_the_graph_is_not_frozen(computed, dtype):
    """A Linear whose weight the model computes (`w.t()`, `w * g`) from a parameter: that value is
    no graph input the plan could freeze the kernel with, so the kernel's bias is not released
    either, and a change to the parameter is still seen. (Its bias used to be released, and the
    first call raised "Expected Tensor but got None".) The plain Linear beside it is frozen."""

    class Computed(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(32, 24) * 0.2)  # [K, N] where transposed
            self.g = nn.Parameter(torch.rand(24, 1) + 0.5)
            self.b = nn.Parameter(torch.randn(24) * 0.2)
            self.plain = nn.Linear(24, 16)

        def forward(self, x):
            w = self.w.t() if computed == "transposed" else self.w.t() * self.g
            return self.plain(torch.relu(F.linear(x, w, self.b)))

    torch.manual_seed(0)
    model = Computed().eval().to(dtype)
    x = torch.randn(16, 32).to(dtype)
    plain_params = (model.plain.weight.detach().clone(), model.plain.bias.detach().clone())
    f, ref, out = frozen(model, x)
    assert_same(ref, out)
    assert type(model.b) is nn.Parameter and type(model.w) is nn.Parameter
    assert isinstance(model.plain.weight, ReleasedTensor)
    with torch.no_grad():
        assert_same(ref, f(x))
        model.w.mul_(2)  # the kernel is not frozen: it follows w
        w = model.w.t() if computed == "transposed" else model.w.t() * model.g
        expected = F.linear(torch.relu(F.linear(x, w, model.b)), *plain_params)
        assert_same(expected, f(x))


def test_a_graph_that_mutates_an_input_is_not_frozen():
    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(16, 16)

        def forward(self, x, calls):
            calls.add_(1)
            return self.lin(x) + calls

    torch.manual_seed(0)
    model = Counting().eval()
    x, calls = torch.randn(4, 16), torch.zeros(1)
    f = torch.compile(model, backend="fxcpp", options=FREEZE)
    with torch.no_grad():
        out = f(x, calls)
    assert calls.item() == 1  # not run a second time while compiling
    assert type(model.lin.weight) is nn.Parameter
    with torch.no_grad():
        assert_same(model(x, torch.zeros(1)), out)


def test_a_graph_with_random_ops_is_frozen_and_draws_at_its_calls_only():
    # Nothing runs the graph an extra time while compiling: the first call (compile and run)
    # draws what a later call from the same seed draws.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5)).train()
    x = torch.randn(64, 16)
    with torch.no_grad():
        y = F.linear(x, model[0].weight, model[0].bias)
        f = torch.compile(model, backend="fxcpp", options=FREEZE)
        torch.manual_seed(1)
        first = f(x)
        state_first = torch.get_rng_state()
        torch.manual_seed(1)
        again = f(x)
        assert torch.equal(state_first, torch.get_rng_state())
    assert isinstance(model[0].weight, ReleasedTensor)
    assert torch.equal(first, again)
    kept = first != 0
    assert 0 < kept.sum() < first.numel()
    torch.testing.assert_close(first[kept], 2 * y[kept])


def test_the_first_call_lets_go_of_each_weight_once_packed_before_packing_the_next():
    # The peak freezing removes: had the plan kept every released weight until the first call
    # returned, that call would end holding each weight twice (weight and pack).
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8)).eval()
    x = torch.randn(32, 64)
    with torch.no_grad():
        ref = model(x)
    packs_when_freed = {}

    def on_free(i):
        return lambda _: packs_when_freed.setdefault(i, _C.onednn_stats()["packs"])

    refs = [weakref.ref(model[i].weight, on_free(i)) for i in (0, 2, 4)]  # noqa: F841 - alive for the callbacks
    f = torch.compile(model, backend="fxcpp", options=FREEZE)
    graphs = []
    with recording(graphs), torch.no_grad():
        packs = _C.onednn_stats()["packs"]
        assert_same(ref, f(x))
    assert packs_when_freed == {0: packs + 1, 2: packs + 2, 4: packs + 3}
    assert graphs[0].single.exe.adopted_count() == 0


def test_a_released_weight_eager_ops_still_read_stays_with_the_plan(monkeypatch):
    # Where eager's path runs a kernel (measured faster; forced here), the plan keeps the
    # tensor the module no longer holds: one copy, still read at every call.
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "aten")
    model = mlp()
    x = torch.randn(8, 64)
    originals = [weakref.ref(p) for p in model.parameters()]
    graphs = []
    with recording(graphs), torch.no_grad():
        ref = model(x)
        f = torch.compile(model, backend="fxcpp", options=FREEZE)
        assert_same(ref, f(x))
        assert all(isinstance(p, ReleasedTensor) for p in model.parameters())
        assert graphs[0].single.exe.adopted_count() == 6
        gc.collect()
        assert all(r() is not None for r in originals)
        with torch.compiler.set_stance("fail_on_recompile"):
            assert_same(ref, f(x))


@pytest.mark.parametrize("bad", [{"freeze": True, "verify": True}, {"freeze": True, "pack_weights": False}])
def test_freeze_refuses_options_that_need_the_parameters(bad):
    with pytest.raises(ValueError, match="freeze"):
        fxcpp.Options.parse(bad)


def test_attention_without_dropout_is_frozen():
    # SDPA carries the nondeterministic_seeded tag for its dropout; with dropout_p = 0 it draws nothing.
    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(32, 96)
            self.out = nn.Linear(32, 32)

        def forward(self, x):
            q, k, v = self.qkv(x).view(2, 8, 3, 4, 8).permute(2, 0, 3, 1, 4)
            return self.out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(2, 8, 32))

    torch.manual_seed(0)
    model = Attention().eval()
    f, ref, out = frozen(model, torch.randn(2, 8, 32))
    assert_same(ref, out)
    assert isinstance(model.qkv.weight, ReleasedTensor) and isinstance(model.out.weight, ReleasedTensor)


def test_threads_calling_a_frozen_graph_at_new_batch_sizes_get_eager_results(monkeypatch):
    # The first calls at each new size pack their layouts from the kept packs, concurrently.
    monkeypatch.delenv("FXCPP_KERNEL_CHOICE")
    model = mlp()
    xs = {b: torch.randn(b, 64) for b in (32, 2, 3, 5, 9, 17, 24)}
    with torch.no_grad():
        refs = {b: model(x) for b, x in xs.items()}
    torch._dynamo.mark_dynamic(xs[32], 0)
    f = torch.compile(model, backend="fxcpp", options=FREEZE)
    with torch.no_grad():
        f(xs[32])
    def serve(sizes):
        with torch.no_grad():
            for _ in range(3):
                for b in sizes:
                    assert_same(refs[b], f(xs[b]))

    with torch.compiler.set_stance("fail_on_recompile"):  # one graph serves every size
        errors = errors_in_threads(*[lambda s=s: serve(s) for s in ([2, 3, 5], [5, 9, 2], [17, 24, 3], [24, 2, 17])])
    assert not errors, errors


def test_the_plan_runs_from_what_it_adopted_and_calls_beside_its_first_wait_for_it():
    # The plan alone (no Dynamo, which compiles a frame once per thread that calls it first):
    # after adopt_released, what a call passes for those weights is a stand-in of the same shape
    # (zeros here), and calls made at once from threads all get the eager result.
    import sys

    sys.path.insert(0, __file__.rsplit("/python/", 1)[0] + "/cpp")
    from graphs import lowered

    def fn(x, w1, b1, w2, b2):
        return F.linear(torch.relu(F.linear(x, w1, b1)), w2, b2)

    torch.manual_seed(0)
    args = [torch.randn(32, 64), torch.randn(128, 64), torch.randn(128), torch.randn(16, 128), torch.randn(16)]
    ref = fn(*args)
    _, g = lowered(fn, *args)  # every input but x static, as a module's parameters are
    _C.run_pipeline(g)
    exe = _C.Executable(g)
    positions = exe.freeze_candidates(args)
    assert positions == [1, 2, 3, 4]
    exe.adopt_released(args, positions)
    stand_ins = [args[0]] + [torch.zeros_like(t) for t in args[1:]]
    start = threading.Barrier(4)

    def serve():
        start.wait()
        for _ in range(3):
            assert_same(ref, exe.run(stand_ins)[0])

    errors = errors_in_threads(*[serve] * 4)
    assert not errors, errors
    assert exe.adopted_count() == 0


@pytest.mark.parametrize("fullgraph", [True, False], ids=["fullgraph", "graph-breaks-allowed"])
def test_first_calls_racing_from_threads_all_get_eager_results(fullgraph):
    # Threads making a frozen model's first call at once each start a Dynamo compile (Dynamo
    # looks its cache up before taking its compile lock); those after the first trace the
    # released stand-ins and get the first compile's plan again (freeze.reuse): no call raises.
    model = mlp()
    x = torch.randn(8, 64)
    with torch.no_grad():
        ref = model(x)
    f = torch.compile(model, backend="fxcpp", options=FREEZE, fullgraph=fullgraph)
    start = threading.Barrier(4)
    got = []

    def first_call():
        start.wait()
        with torch.no_grad():
            got.append(f(x))

    errors = errors_in_threads(*[first_call] * 4, timeout=600)
    assert not errors, errors
    assert len(got) == 4
    for out in got:
        assert_same(ref, out)
    with torch.no_grad():
        for _ in range(3):
            assert_same(ref, f(x))
    assert all(isinstance(t, ReleasedTensor) for t in (model[0].weight, model[2].weight, model[4].weight))


class TiedLinears(nn.Module):
    """Two Linears sharing one weight (read by oneDNN kernels only: released, one stand-in)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Linear(32, 32), nn.Linear(32, 32)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


@pytest.mark.parametrize("name", ["mlp", "conv_bn", "tied"])
def test_a_compile_of_the_frame_made_while_the_first_one_runs_reuses_its_plan(name, caplog):
    # The race made certain: the first compile waits (in a pre pass) until a second thread has
    # called the model, missed Dynamo's cache and queued on its compile lock; that second
    # compile traces the stand-ins the first one put in place.
    model, x = {"mlp": (mlp, (8, 64)), "conv_bn": (conv_bn, (2, 3, 8, 8)), "tied": (TiedLinears, (4, 32))}[name]
    model, x = model().eval(), torch.randn(x)
    first_compile = threading.Event()

    def hold_the_first_compile(gm):
        if not first_compile.is_set():
            first_compile.set()
            time.sleep(1.0)  # the second thread's cache miss happens meanwhile
        return gm

    with torch.no_grad():
        ref = model(x)
    f = torch.compile(model, backend="fxcpp", options={**FREEZE, "pre_passes": [hold_the_first_compile]}, fullgraph=True)
    got = []

    def call():
        with torch.no_grad():
            got.append(f(x))

    def second_call():
        first_compile.wait(60)
        call()

    with caplog.at_level(logging.INFO, logger="fxcpp"):
        errors = errors_in_threads(call, second_call, timeout=600)
    assert not errors, errors
    assert sum("reuses its plan" in r.getMessage() for r in caplog.records) == 1
    assert sum("parameter/buffer tensor(s) of inference graph" in r.getMessage() for r in caplog.records) == 1
    assert len(got) == 2
    for out in got:
        assert_same(ref, out)
    released = [t for t in list(model.parameters()) + list(model.buffers()) if isinstance(t, ReleasedTensor)]
    assert released
    if name == "tied":
        assert isinstance(model.a.weight, ReleasedTensor) and model.a.weight is model.b.weight


@pytest.mark.parametrize("backend", ["aot_eager", "fxcpp"])
def test_another_compile_reading_a_released_weight_raises_naming_it(backend):
    # Dynamo can trace the stand-ins (for reuse), but nothing may bake a read of one into a
    # graph: aot's trace of another backend raises, and fxcpp's compile of any other graph
    # (here: other options) raises too. Never a result computed from no weight.
    model = mlp()
    x = torch.randn(8, 64)
    frozen(model, x)
    options = {"pack_weights": True} if backend == "fxcpp" else None
    with torch.no_grad(), pytest.raises(Exception, match="'Linear.weight' was released by torch.compile"):
        torch.compile(model, backend=backend, options=options)(x)


def test_a_plan_given_a_tensor_without_memory_raises_naming_the_input():
    # A meta tensor or a storage-less subclass where the plan reads memory: an error, not a
    # kernel reading a null pointer (it crashed the process before).
    import sys

    sys.path.insert(0, __file__.rsplit("/python/", 1)[0] + "/cpp")
    from graphs import lowered

    def fn(x, w, b):
        return torch.relu(F.linear(x, w, b)) * 2

    args = [torch.randn(8, 64), torch.randn(128, 64), torch.randn(128)]
    for static in (set(), {1, 2}):
        _, g = lowered(fn, *args, static=static)
        _C.run_pipeline(g)
        exe = _C.Executable(g)
        assert_same(fn(*args), exe.run(args)[0])
        for i, name in enumerate(["x", "w", "b"]):
            for empty in (ReleasedTensor(args[i], "t"), torch.empty_like(args[i], device="meta")):
                bad = list(args)
                bad[i] = empty
                with pytest.raises(ValueError, match=f"input '{name}.*' of the compiled graph is a tensor without memory"):
                    exe.run(bad)
        assert_same(fn(*args), exe.run(args)[0])
