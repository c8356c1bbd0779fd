"""A pre-fork server: the parent compiles and runs a model, then forks workers that serve it. GNU
OpenMP (torch's thread pool, which oneDNN and fxcpp's kernels share) cannot start a parallel
region in a forked child of a process that used one, under eager too, so a worker sets one thread
first (README, Reliability, "Fork"); then the compiled model, its packed weights and a new shape's
compile work in the child and give eager's results."""
import multiprocessing
import queue

import torch
import torch.nn as nn
from fxcpp.explain import Report, recording

import fxcpp  # noqa: F401  (registers the backend)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                         nn.Linear(8 * 8 * 8, 32), nn.GELU(), nn.Linear(32, 4)).eval()


def test_a_forked_worker_serves_the_parents_compiled_model():
    model = _model()
    compiled = torch.compile(model, backend="fxcpp")
    x, x_new = torch.randn(4, 3, 8, 8), torch.randn(2, 3, 8, 8)
    graphs = []
    with torch.no_grad(), recording(graphs):
        parent = compiled(x)
        expected, expected_new = model(x), model(x_new)
    assert graphs and Report(graphs).kernel_counts["onednn"] > 0

    def worker(results):
        torch.set_num_threads(1)
        with torch.no_grad():
            same = compiled(x)          # the parent's plan and packed weights
            new = compiled(x_new)       # a new shape: compiled in the child
        results.put((same.tolist(), new.tolist()))  # plain numbers: the child exits after

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
    assert [c.exitcode for c in children] == [0, 0]
    for same, new in got:
        assert torch.equal(torch.tensor(same), parent)
        torch.testing.assert_close(torch.tensor(new), expected_new)
    torch.testing.assert_close(parent, expected)
