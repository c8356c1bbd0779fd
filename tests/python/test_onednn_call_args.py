"""oneDNN calls reuse their memory objects (runtime/onednn/call_args.h): a conv, a linear or the
attention's two matmuls make one per argument at their first calls and later calls point them at
their own tensors. Calls from several threads at once each take a set of their own: every output
matches eager."""
import threading

import pytest
import torch
import torch.nn as nn

import fxcpp
from fxcpp import _C

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="built without oneDNN")


def _models():
    torch.manual_seed(0)
    conv = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 8, 1)).eval()
    mlp = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 32)).eval()
    # A first convolution's plain (NCHW) input is reordered into the primitive's layout by a
    # oneDNN reorder at every call, which keeps its memory objects as the convolution does.
    first = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 8, 1)).eval()
    return {"conv": (conv, lambda g: torch.randn(2, 8, 12, 12, generator=g)),
            "first_conv": (first, lambda g: torch.randn(2, 3, 20, 20, generator=g)),
            "mlp": (mlp, lambda g: torch.randn(16, 64, generator=g)),
            "attention": (_Attention(), lambda g: torch.randn(2, 4, 24, 16, generator=g))}


class _Attention(nn.Module):  # FXCPP_ATTENTION=matmuls (the fixture below): oneDNN's two matmuls
    def forward(self, x):
        return torch.nn.functional.scaled_dot_product_attention(x, x * 0.5, x)


@pytest.fixture(autouse=True)
def _onednn_paths(monkeypatch):  # never eager's ops, whatever a first call would measure
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")


@pytest.mark.parametrize("name", ["conv", "first_conv", "mlp", "attention"])
def test_later_calls_make_no_memory_objects(name):
    model, make = _models()[name]
    c = torch.compile(model, backend="fxcpp")
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        start = _C.onednn_stats()["arg_memories"]
        for _ in range(3):
            c(make(g))
        before, reorders = _C.onednn_stats()["arg_memories"], _C.onednn_stats()["input_reorders"]
        assert before > start  # the first calls made them (call_args.h)
        for _ in range(20):
            x = make(g)  # new input and output buffers at every call
            torch.testing.assert_close(c(x), model(x))
        assert _C.onednn_stats()["arg_memories"] == before
        if name == "first_conv":  # the reorder ran at each call
            assert _C.onednn_stats()["input_reorders"] - reorders == 20, _C.onednn_stats()
        assert fxcpp.explain(model, make(g)).ran_counts["onednn"] > 0


@pytest.mark.parametrize("name", ["conv", "first_conv", "mlp", "attention"])
def test_calls_from_eight_threads_at_once_match_eager(name):
    model, make = _models()[name]
    c = torch.compile(model, backend="fxcpp")
    with torch.no_grad():
        c(make(torch.Generator().manual_seed(0)))
    errors = []
    start = threading.Barrier(8)

    def work(k):
        g = torch.Generator().manual_seed(100 + k)
        try:
            start.wait()
            with torch.no_grad():
                for _ in range(30):
                    x = make(g)
                    torch.testing.assert_close(c(x), model(x))
        except Exception as e:  # noqa: BLE001  reported below with its thread
            errors.append((k, repr(e)))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
