"""One op alone (a LayerNorm, a softmax) is left to ATen's kernel, which is as fast or faster,
except where ATen's output would be a fresh mapping at every call: 32 MiB and more of static
shape (cpu_fusion.cpp, maps_fresh_output). The fused kernel takes its output from the buffer
pool there (benchmarks/results/cpu-fusion-amx/lone_norms*.txt)."""
import pytest
import torch
import torch.nn.functional as F

from test_cpu_fused import compare, make_inputs


def lone_layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def lone_softmax(x):
    return torch.softmax(x, -1)


@pytest.mark.parametrize("fn, shapes", [(lone_layer_norm, [(8192, 1024), (1024,), (1024,)]),  # 32 MiB out
                                        (lone_softmax, [(2048, 4096)])])
def test_a_lone_op_with_a_32_mib_output_fuses_and_matches_eager(fn, shapes):
    compare(fn, make_inputs(shapes, torch.float32))


@pytest.mark.parametrize("fn, shapes, dtype", [(lone_layer_norm, [(64, 768), (768,), (768,)], torch.float32),
                                               (lone_softmax, [(2048, 4095)], torch.float32),  # 1 element short of 32 MiB
                                               (lone_layer_norm, [(8192, 1024), (1024,), (1024,)], torch.bfloat16)])
def test_a_lone_op_below_32_mib_stays_on_aten(fn, shapes, dtype):
    report, _, _ = compare(fn, make_inputs(shapes, dtype), check_fused=False)
    assert report.kernel_counts["cpu_fused"] == 0 and report.kernel_counts["aten"] == 1, report


def test_a_lone_op_of_symbolic_shape_stays_on_aten():
    """Its size is not known when the plan is made."""
    x = torch.randn(8192, 1024)
    torch._dynamo.reset()
    with torch.no_grad():
        import fxcpp

        torch._dynamo.mark_dynamic(x, 0)
        report = fxcpp.explain(lone_softmax, x)
        torch._dynamo.reset()
        res = torch.compile(lone_softmax, backend="fxcpp")(x)
    assert report.kernel_counts["cpu_fused"] == 0, report
    torch.testing.assert_close(res, lone_softmax(x))
