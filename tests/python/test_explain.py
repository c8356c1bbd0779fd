"""explain(): the Report's kernel counts, its per-node table, and mixed C++/Interpreter graphs."""
import torch

import fxcpp
from fxcpp import _C
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
