"""explain(): the Report's kernel counts, its per-node table, and mixed C++/Interpreter graphs."""
import pytest
import torch

import fxcpp
from fxcpp import _C
from fxcpp.explain import Report, recording
from helpers import assert_same, compile_fxcpp


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x))).mean((2, 3))


def test_report_counts_and_table():
    model = Net().eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        report = fxcpp.explain(model, x)
    assert set(report.kernel_counts) == {"onednn", "cpu_fused", "cuda", "aten", "interpreter"}
    if not _C.has_onednn():  # a build without oneDNN (FXCPP_ONEDNN=0): conv and BN in ATen, relu + mean fused
        assert report.kernel_counts["aten"] == 2 and report.kernel_counts["cpu_fused"] == 2
        assert report.kernel_counts["onednn"] == 0
        return
    # convolution + batch norm + relu are one oneDNN node (3 FX nodes); the mean alone stays in
    # ATen (one op gains nothing from a fused node)
    assert report.kernel_counts["onednn"] == 3 and report.kernel_counts["aten"] == 1
    assert report.kernel_counts["interpreter"] == 0
    text = str(report)
    header = text.splitlines()[0].split()
    assert header == ["graph", "node", "op", "partition", "group", "kernel", "shape", "dtype", "time_us", "impl"]
    conv = next(r for r in report.rows if r.op == "aten::convolution")
    assert conv.kernel == "onednn" and conv.shape == "[2, 8, 6, 6]" and conv.dtype == "float32"
    assert conv.group == conv.node and conv.time_us is not None and conv.time_us > 0
    assert "kernel counts: onednn=3, cpu_fused=0, cuda=0, aten=1, interpreter=0" in text
    with torch.no_grad():
        off = fxcpp.explain(model, x, options={"disable_passes": ["onednn_lower", "cpu_fusion"]})
    assert off.kernel_counts["aten"] == 4 and off.kernel_counts["onednn"] == 0 and off.kernel_counts["cpu_fused"] == 0


def test_removed_nodes_are_reported():
    def f(x):
        return torch.relu(x.clone()) + 1

    report = fxcpp.explain(f, torch.randn(5))
    kinds = {r.op: r.kernel for r in report.rows}
    assert kinds["aten::clone"] == "removed"
    assert kinds["aten::relu"] == "cpu_fused"  # relu + 1: one fused node


@torch.library.custom_op("fxcpp_test::add_one_", mutates_args=("x",))
def add_one_(x: torch.Tensor) -> None:
    x.add_(1)


@add_one_.register_fake
def _(x):
    return None


def test_higher_order_ops_run_in_the_interpreter_and_the_rest_in_cpp():
    def f(x, y):
        z = x.abs()  # one op ATen runs faster alone (neither fp32 sin nor tanh any longer: faster_fused_alone)
        add_one_(z)  # a mutating custom op: functionalized into a higher-order op
        w = torch.cond(y.sum() > 0, lambda a: a.cos(), lambda a: a.exp(), (z,))
        return w * 2

    x, y = torch.randn(4), torch.randn(3)
    compiled = compile_fxcpp(f)
    for yy in (y.abs() + 0.1, -y.abs() - 0.1):
        assert_same(compiled(x, yy), f(x, yy))
    report = fxcpp.explain(f, x, y)
    by_op = {r.op: r for r in report.rows}
    assert by_op["torch.ops.higher_order.cond"].kernel == "interpreter"
    assert by_op["torch.ops.higher_order.auto_functionalized_v2"].kernel == "interpreter"
    assert by_op["aten::abs"].kernel == "aten" and by_op["aten::abs"].partition.startswith("cpp")
    assert by_op["aten::mul.Tensor"].kernel == "aten"  # a single op: not worth a fused node
    assert by_op["aten::sum"].kernel == "cpu_fused" and by_op["aten::gt.Scalar"].kernel == "cpu_fused"
    assert report.kernel_counts["aten"] >= 2 and report.kernel_counts["interpreter"] >= 2


def test_graph_breaks_give_one_graph_each():
    def f(x):
        x = x * 2
        torch._dynamo.graph_break()
        return x + 1

    report = fxcpp.explain(f, torch.randn(3))
    assert len({r.graph for r in report.rows}) == 2
    assert report.kernel_counts["aten"] == 2


def _two_linears():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32)).eval()


@pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")
def test_the_kernel_column_says_when_a_onednn_node_ran_atens_ops(monkeypatch):
    """A oneDNN node that kept eager's ATen ops (here forced; by default where they measured
    faster) is still a oneDNN node in kernel_counts (the fusion fired), but its row and
    ran_counts say what ran; where everything ran as compiled the two counts agree."""
    model, x = _two_linears(), torch.randn(8, 64)
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "aten")
    with torch.no_grad():
        report = fxcpp.explain(model, x)
    fused = [r for r in report.rows if r.kernel == "onednn"]
    assert len(fused) == 5 and all(r.ran == "aten" for r in fused), report  # t, addmm, relu, t, addmm
    assert report.ran_counts["onednn"] == 0 and report.ran_counts["aten"] == report.kernel_counts["aten"] + 5
    text = str(report)
    assert "onednn, ran aten" in text and "ran: onednn=0, cpu_fused=0, cuda=0, aten=5, interpreter=0" in text, text
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")
    torch._dynamo.reset()
    with torch.no_grad():
        report = fxcpp.explain(model, x)
    assert all(r.ran == r.kernel for r in report.rows), report
    assert report.ran_counts == report.kernel_counts and "\nran: " not in str(report)


@pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")
def test_a_node_that_ran_both_paths_says_both(monkeypatch):
    """The attention matmuls hand a call whose softmax is not finite to ATen's kernel and take
    the next finite call back: the row says onednn+aten and counts under both."""
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    compiled = torch.compile(lambda q, k, v: op(q, k, v, 0.0, False)[0], backend="fxcpp")
    q, k, v = (torch.randn(1, 2, 6, 8, generator=torch.Generator().manual_seed(i)) for i in range(3))
    bad = q.clone()
    bad[0, 0, 0, 0] = float("nan")
    graphs: list = []
    with torch.no_grad(), recording(graphs):
        compiled(q, k, v)
        compiled(bad, k, v)
        compiled(q, k, v)
    report = Report(graphs)
    (row,) = [r for r in report.rows if r.op == "aten::_scaled_dot_product_flash_attention_for_cpu"]
    assert row.kernel == "onednn" and row.ran == "onednn+aten", (row.ran, row.impl)
    assert "not finite" in row.impl
    assert report.ran_counts["onednn"] == 1 and report.ran_counts["aten"] == report.kernel_counts["aten"] + 1
