"""A pre-fork server: the parent compiles and runs a model, then forks workers that serve it. GNU
OpenMP (torch's thread pool, which oneDNN and fxcpp's kernels share) cannot start a parallel
region in a forked child of a process that used one, under eager too, so a worker runs at one
thread (README, Reliability, "Fork"). Dynamo guards each compiled function on the thread count
(its GLOBAL_STATE guard), so the parent sets that count before it compiles: a child then runs the
parent's compiled code and packed weights without compiling again (a child that changes the count
recompiles everything at its first call). A new shape's compile works in the child too, and both
give eager's results.

Where torch sees a GPU, Dynamo itself initializes CUDA at every frame compile (convert_frame.py's
preserve_global_state saves `torch.cuda.get_rng_state()` when `torch.cuda.is_available()`), so the
parent's compile leaves CUDA initialized and a forked child's next compile, under any backend, meets
torch's "Cannot re-initialize CUDA in forked subprocess". There the child still serves the parent's
compiled shapes (no compile); the new shape's error is the one expected. (On the H200 machine with
torch 2.11, 2026-11-30, this test's child, which then changed the thread count, failed without
reporting why; the reason above is read from torch's source, and the child now sends its
traceback back.)"""
import multiprocessing
import queue
import traceback

import torch
import torch.nn as nn
from fxcpp.explain import Report, recording
from torch._dynamo.utils import counters

import fxcpp  # noqa: F401  (registers the backend)

WORKER_THREADS = 1


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                         nn.Linear(8 * 8 * 8, 32), nn.GELU(), nn.Linear(32, 4)).eval()


def _compiles() -> int:
    return counters["stats"]["unique_graphs"]


def test_a_forked_worker_serves_the_parents_compiled_model():
    threads = torch.get_num_threads()
    torch.set_num_threads(WORKER_THREADS)  # before compiling: the children's count (docstring)
    try:
        _serve_from_forked_workers()
    finally:
        torch.set_num_threads(threads)


def _serve_from_forked_workers():
    model = _model()
    compiled = torch.compile(model, backend="fxcpp")
    x, x_new = torch.randn(4, 3, 8, 8), torch.randn(2, 3, 8, 8)
    graphs = []
    with torch.no_grad(), recording(graphs):
        parent = compiled(x)
        expected, expected_new = model(x), model(x_new)
    assert graphs and Report(graphs).kernel_counts["onednn"] > 0
    compiled_in_parent = _compiles()

    gpu = torch.cuda.is_available()  # Dynamo initialized CUDA in the parent's compile (docstring)

    def worker(results):
        try:
            torch.set_num_threads(WORKER_THREADS)  # the parent's count: no guard fails
            with torch.no_grad():
                same = compiled(x)          # the parent's compiled code and packed weights
                compiled_for_same = _compiles() - compiled_in_parent
                try:
                    new = compiled(x_new).tolist()  # a new shape: compiled in the child
                except RuntimeError as e:
                    if not gpu:
                        raise
                    new = str(e)
            results.put(("ok", same.tolist(), compiled_for_same, new))  # plain values: the child exits after
        except BaseException:  # the parent's assert shows why, not a 120 s wait
            results.put(("error", traceback.format_exc(), None, None))

    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    children = [ctx.Process(target=worker, args=(results,)) for _ in range(2)]
    for c in children:
        c.start()
    try:
        got = [results.get(timeout=120) for _ in children]
    except queue.Empty:
        got = None
    for c in children:
        c.join(timeout=30)
        if c.is_alive():
            c.kill()
    assert got is not None, "a forked worker did not answer within 120 s"
    for status, same, compiled_for_same, new in got:
        assert status == "ok", f"a forked worker failed:\n{same}"
        assert compiled_for_same == 0, "the child compiled the parent's shape again"
        assert torch.equal(torch.tensor(same), parent)
        if gpu:
            assert isinstance(new, str) and "forked subprocess" in new, new
        else:
            torch.testing.assert_close(torch.tensor(new), expected_new)
    assert [c.exitcode for c in children] == [0, 0]
    torch.testing.assert_close(parent, expected)
