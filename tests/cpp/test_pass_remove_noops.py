"""remove_noops: which nodes go, which stay, numbers, idempotence."""
import pytest
import torch

from fxcpp import _C
from graphs import lowered, run, targets


def _noops(x):
    y = x.view(4, 4).reshape(4, 4).clone()
    y = torch.ops.aten.alias(y)
    y = torch.nn.functional.dropout(y, p=0.5, training=False)
    y = torch.ops.aten.dropout(y, 0.3, False)
    y = y.to(torch.float32)[:, 0:4]
    y = torch.ops.aten._to_copy(y)
    return torch.relu(y).neg()


def test_removes_noops_and_keeps_numbers():
    x = torch.randn(4, 4)
    _, before = lowered(_noops, x)
    _, g = lowered(_noops, x)
    assert _C.run_pass(g, "remove_noops") is True
    assert targets(g) == ["aten::relu", "aten::neg"]
    assert _C.run_pass(g, "remove_noops") is False  # idempotent (before an Executable freezes the graph)
    torch.testing.assert_close(run(g, x), run(before, x))
    torch.testing.assert_close(run(g, x)[0], _noops(x))


@pytest.mark.parametrize("fn, shape, kept", [
    (lambda x: x.view(16), (4, 4), "aten::view"),                                   # changes the shape
    (lambda x: x.clone(memory_format=torch.channels_last), (1, 4, 4, 4), "aten::clone"),  # changes the layout
    (lambda x: x.to(torch.float64), (4, 4), "aten::_to_copy"),                     # changes the dtype
    (lambda x: x[:, 1:3], (4, 4), "aten::slice.Tensor"),                            # a real slice
    (lambda x: torch.nn.functional.dropout(x, 0.5, True), (4, 4), "aten::bernoulli_.float"),  # training dropout
])
def test_keeps_nodes_that_are_not_noops(fn, shape, kept):
    _, g = lowered(lambda x: fn(x).relu(), torch.randn(shape))
    assert _C.run_pass(g, "remove_noops") is False
    assert kept in targets(g)


def test_keeps_a_noop_whose_output_is_a_graph_output():
    # Returning the input itself would alias it where eager returns a fresh tensor.
    x = torch.randn(4, 4)
    _, g = lowered(lambda x: (x.clone(), x.view(4, 4)), x)
    assert _C.run_pass(g, "remove_noops") is False
    out = run(g, x)
    assert out[0].data_ptr() != x.data_ptr()
