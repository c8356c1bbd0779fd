"""End-to-end: torch.compile(model, backend="fxcpp") matches eager on common model shapes,
and the compiled forward runs in the C++ core (no Interpreter nodes)."""
import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from fxcpp.explain import Report, recording
from helpers import assert_same, check_model, clone_inputs, compile_fxcpp, counts

import fxcpp

torch.manual_seed(0)


def assert_in_cpp(model, *inputs):
    """The compiled forward ran in C++ (ATen, oneDNN or fused CPU kernels), no Interpreter node."""
    kc = counts(model, *clone_inputs(inputs))
    assert kc["interpreter"] == 0, kc
    assert kc["aten"] + kc["onednn"] + kc["cpu_fused"] > 0, kc
    return kc


def check_e2e(model, *inputs, options=None, **kw):
    """Compiled == eager (no partition may fall back: fallback="error"), and the forward ran in C++."""
    if isinstance(model, nn.Module):
        model = model.eval()
    res = check_model(model, *inputs, options={"fallback": "error", **(options or {})}, **kw)
    assert_in_cpp(model, *inputs)
    return res


# ---------------------------------------------------------------- models


class MLP(nn.Module):
    def __init__(self, d_in=16, d_hid=32, d_out=8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hid)
        self.fc2 = nn.Linear(d_hid, d_hid)
        self.fc3 = nn.Linear(d_hid, d_out)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = torch.tanh(self.fc2(x))
        return self.fc3(x)


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def _randomize_bn(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return model


class ResidualBlock(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + x)


class Attention(nn.Module):
    def __init__(self, d=32, heads=4, causal=False):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(o.transpose(1, 2).reshape(b, s, d))


class LNGelu(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 2 * d)

    def forward(self, x):
        return F.gelu(self.fc(self.ln(x))) + F.gelu(x.repeat(1, 1, 2), approximate="tanh")


class Embed(nn.Module):
    def __init__(self, vocab=50, d=16, max_len=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.ln = nn.LayerNorm(d)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        return self.ln(self.tok(ids) + self.pos(pos))


class TransformerBlock(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


# ---------------------------------------------------------------- basic models


def test_mlp():
    check_e2e(MLP(), torch.randn(4, 16))


def test_cnn_batchnorm_eval():
    check_e2e(_randomize_bn(ConvBN()), torch.randn(2, 3, 16, 16))


def test_cnn_batchnorm_train_updates_running_stats():
    model = _randomize_bn(ConvBN()).train()
    ref_model = copy.deepcopy(model)
    init_mean = model.bn1.running_mean.clone()
    x = torch.randn(4, 3, 16, 16)
    compiled = compile_fxcpp(model)
    with torch.no_grad():
        ref = ref_model(x.clone())
        res = compiled(x.clone())
    assert_same(ref, res)
    for (name, b_ref), (_, b_res) in zip(ref_model.named_buffers(), model.named_buffers()):
        assert_same(b_ref, b_res)
    assert model.bn1.num_batches_tracked.item() == 1
    # the running stats actually moved away from their initial values
    assert not torch.allclose(model.bn1.running_mean, init_mean)
    # a second call keeps tracking eager
    with torch.no_grad():
        assert_same(ref_model(x * 2), compiled(x * 2))
    assert_same(dict(ref_model.named_buffers()), dict(model.named_buffers()))
    assert_in_cpp(copy.deepcopy(model), x)


def test_residual_block():
    check_e2e(_randomize_bn(ResidualBlock()), torch.randn(2, 8, 10, 10))


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_attention(causal):
    check_e2e(Attention(causal=causal), torch.randn(2, 6, 32))


def test_sdpa_attention_with_mask():
    def fn(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    q, k, v = (torch.randn(2, 4, 5, 8) for _ in range(3))
    mask = torch.randn(5, 5)
    check_e2e(fn, q, k, v, mask)


def test_layernorm_gelu():
    check_e2e(LNGelu(), torch.randn(2, 5, 32))


def test_embeddings():
    check_e2e(Embed(), torch.randint(0, 50, (3, 7)))


def test_transformer_block():
    check_e2e(TransformerBlock(), torch.randn(2, 6, 32))


def test_transformer_encoder_layer_eval():
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True).eval()
    check_e2e(layer, torch.randn(2, 6, 32))


# ---------------------------------------------------------------- in-place ops


def test_inplace_ops_on_intermediates():
    def fn(x, y):
        a = x * 2
        a.add_(1)
        b = a @ y
        b.relu_()
        b.mul_(0.5).sub_(x.sum())
        return b

    check_e2e(fn, torch.randn(4, 4), torch.randn(4, 4))


def test_inplace_mutation_of_input():
    def fn(x, y):
        x.add_(1)
        x.mul_(y)
        return x.sum(dim=0)

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    x_ref, x_res = x.clone(), x.clone()
    ref = fn(x_ref, y)
    res = compile_fxcpp(fn)(x_res, y)
    assert_same(ref, res)
    assert_same(x_ref, x_res)
    assert not torch.equal(x_res, x)  # it really was mutated
    assert_in_cpp(fn, x.clone(), y)


def test_inplace_mutation_of_input_slice():
    def fn(x):
        x[:, 1:3].relu_()
        x[0].zero_()
        return x * 2

    x = torch.randn(3, 5)
    x_ref, x_res = x.clone(), x.clone()
    ref = fn(x_ref)
    res = compile_fxcpp(fn)(x_res)
    assert_same(ref, res)
    assert_same(x_ref, x_res)
    assert_in_cpp(fn, x.clone())


# ---------------------------------------------------------------- views and shapes


def test_views_and_shape_ops():
    def fn(x, y):
        a = x.transpose(0, 1).reshape(6, 4)
        b = a[1:5:2, ::2]
        c = torch.cat([a, a * 2], dim=1)
        d = torch.stack([x, y], dim=0).permute(2, 0, 1)
        e = x[:, :1].expand(4, 6) + y.view(-1)[:6]
        f = x.unsqueeze(0).squeeze(0).flatten().narrow(0, 2, 5)
        g = torch.split(c, 3, dim=1)[1].contiguous()
        return b.sum() + c.mean(), d, e, f, g

    check_e2e(fn, torch.randn(4, 6), torch.randn(4, 6))


# ---------------------------------------------------------------- outputs


def test_multiple_and_nested_outputs():
    def fn(x, y):
        s = x + y
        return {"sum": s, "pair": (s * 2, [x - y, torch.relu(s)]), "mean": s.mean()}, s.sin()

    x, y = torch.randn(3, 3), torch.randn(3, 3)
    res = check_e2e(fn, x, y)
    assert isinstance(res, tuple) and isinstance(res[0], dict)
    assert isinstance(res[0]["pair"], tuple) and isinstance(res[0]["pair"][1], list)


def test_scalar_derived_tensor():
    def fn(x):
        n = x.shape[0] * x.shape[1]
        scale = 1.0 / n
        return x * scale + torch.tensor(3.5), torch.full((2,), float(n)), x.sum() / n

    check_e2e(fn, torch.randn(3, 4))


# ---------------------------------------------------------------- graph breaks


def test_graph_break():
    graphs = []

    def count_backend(gm, example_inputs, **kw):
        graphs.append(gm)
        return fxcpp.backend(gm, example_inputs)

    def fn(x):
        y = torch.sin(x) * 2
        torch._dynamo.graph_break()
        return torch.relu(y) + 1

    x = torch.randn(4, 4)
    res = torch.compile(fn, backend=count_backend)(x)
    assert_same(fn(x), res)
    assert len(graphs) == 2
    assert_same(fn(x), check_model(fn, x))
    report = fxcpp.explain(fn, x)
    assert len(report.graphs) == 2
    assert report.kernel_counts["interpreter"] == 0 and report.kernel_counts["cpu_fused"] > 0  # both pieces in C++


def test_graph_break_print(capsys):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 8)
            self.b = nn.Linear(8, 4)

        def forward(self, x):
            h = torch.relu(self.a(x))
            print("hello from eager")
            return self.b(h)

    m = M().eval()
    x = torch.randn(2, 8)
    graphs = []
    with recording(graphs):
        res = compile_fxcpp(m)(x)
    with torch.no_grad():
        ref = m(x)
    assert_same(ref, res)
    assert "hello from eager" in capsys.readouterr().out
    assert len(graphs) >= 2
    kc = Report(graphs).kernel_counts
    assert kc["interpreter"] == 0 and kc["aten"] > 0, kc


# ---------------------------------------------------------------- dynamic shapes


def test_dynamic_batch_and_seq():
    model = Attention().eval()
    compiled = compile_fxcpp(model, dynamic=True)
    with torch.no_grad():
        graphs = []
        with recording(graphs):
            for b, s in [(2, 5), (3, 7), (1, 4), (5, 9)]:
                x = torch.randn(b, s, 32)
                assert_same(model(x), compiled(x))
    assert len(graphs) == 2  # one symbolic graph, plus Dynamo's specialization of batch size 1
    kc = Report(graphs).kernel_counts
    assert kc["interpreter"] == 0 and kc["aten"] > 0, kc


def test_dynamic_mlp_counts_single_compile():
    graphs = []
    model = MLP().eval()
    compiled = compile_fxcpp(model, dynamic=True)
    with recording(graphs), torch.no_grad():
        for b in (2, 3, 7, 11):
            x = torch.randn(b, 16)
            assert_same(model(x), compiled(x))
    assert len(graphs) == 1  # one symbolic graph served all batch sizes
    assert all(g.single is not None for g in graphs)


def test_dynamic_transformer_block():
    model = TransformerBlock().eval()
    compiled = compile_fxcpp(model, dynamic=True, options={"fallback": "error"})
    graphs = []
    with recording(graphs), torch.no_grad():
        for b, s in [(2, 5), (3, 7), (4, 3)]:
            x = torch.randn(b, s, 32)
            assert_same(model(x), compiled(x))
    assert len(graphs) == 1
    kc = Report(graphs).kernel_counts
    assert kc["interpreter"] == 0 and kc["aten"] > 0, kc


def test_automatic_dynamic():
    model = LNGelu().eval()
    compiled = compile_fxcpp(model)
    graphs = []
    with recording(graphs), torch.no_grad():
        for b in (2, 3, 5):
            x = torch.randn(b, 4, 32)
            assert_same(model(x), compiled(x))
    # static for batch 2, then one dynamic graph for 3 and 5
    assert len(graphs) == 2
    kc = Report(graphs).kernel_counts
    assert kc["interpreter"] == 0 and kc["aten"] > 0, kc


# ---------------------------------------------------------------- convs and pooling


def test_depthwise_and_grouped_conv():
    model = nn.Sequential(
        nn.Conv2d(8, 8, 3, padding=1, groups=8),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=2, dilation=2, groups=4),
    )
    check_e2e(model, torch.randn(2, 8, 12, 12))


def test_conv_transpose():
    model = nn.Sequential(
        nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1),
        nn.ReLU(),
        nn.ConvTranspose2d(6, 2, 2, stride=2, groups=2),
    )
    check_e2e(model, torch.randn(2, 4, 5, 5))


def test_conv1d_conv3d():
    def fn(x1, x3, w1, w3):
        return F.conv1d(x1, w1, padding=1), F.conv3d(x3, w3, stride=2)

    check_e2e(fn, torch.randn(2, 3, 10), torch.randn(1, 2, 6, 6, 6), torch.randn(4, 3, 3), torch.randn(3, 2, 3, 3, 3))


def test_pooling():
    def fn(x):
        a = F.max_pool2d(x, 2)
        b = F.avg_pool2d(x, 3, stride=2, padding=1)
        c = F.adaptive_avg_pool2d(x, (3, 2))
        d = F.adaptive_max_pool2d(x, 1)
        e = F.max_pool2d(x, 3, stride=1, padding=1, ceil_mode=True)
        return a, b, c, d, e

    check_e2e(fn, torch.randn(2, 3, 9, 8))


def test_softmax_log_softmax():
    def fn(x):
        return F.softmax(x, dim=-1), F.log_softmax(x, dim=1), torch.softmax(x * 100, dim=0)

    check_e2e(fn, torch.randn(4, 5, 6))


def test_reductions():
    def fn(x):
        return (
            x.sum(dim=1, keepdim=True),
            x.mean(dim=(0, 2)),
            x.amax(dim=-1, keepdim=True),
            x.amin(dim=0),
            x.sum(),
            torch.var(x, dim=1, keepdim=True),
            x.argmax(dim=2),
            torch.logsumexp(x, dim=1),
        )

    check_e2e(fn, torch.randn(3, 4, 5))


# ---------------------------------------------------------------- dtypes


def test_bf16_model():
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 8)).to(torch.bfloat16)
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    res = check_e2e(model, x)
    assert res.dtype == torch.bfloat16


def test_mixed_dtype_ops():
    def fn(x, i):
        return x + i, (i * 2).to(torch.float32).softmax(-1), (x > 0).sum(dim=1), x.to(torch.float64).exp()

    check_e2e(fn, torch.randn(3, 4), torch.randint(0, 5, (3, 4)))


# ---------------------------------------------------------------- aliasing, indexing, layouts


def test_outputs_alias_inputs_and_each_other():
    def fn(x, y):
        s = x + y
        return x, s, s, x[0], y.t()

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    res = compile_fxcpp(fn, options={"fallback": "error"})(x, y)
    assert_same(fn(x, y), res)
    assert res[0] is x or res[0].data_ptr() == x.data_ptr()
    assert res[3].data_ptr() == x.data_ptr()  # a view of the input stays a view
    assert_in_cpp(fn, x, y)


def test_mutated_input_returned_as_view():
    def fn(x):
        v = x.view(-1)
        v.mul_(3)
        return v[:4]

    x = torch.randn(2, 4)
    x_ref, x_res = x.clone(), x.clone()
    ref = fn(x_ref)
    res = compile_fxcpp(fn, options={"fallback": "error"})(x_res)
    assert_same(ref, res)
    assert_same(x_ref, x_res)
    res.add_(1)  # still aliases the input, as in eager
    ref.add_(1)
    assert_same(x_ref, x_res)


def test_indexing_and_masks():
    def fn(x, idx, mask):
        a = x[idx]
        b = torch.gather(x, 1, idx.view(-1, 1).expand(-1, 2) % x.shape[1])
        c = x.masked_fill(mask, -1.0)
        d = torch.where(mask, x, torch.zeros_like(x))
        e = x.index_select(0, idx)
        f = x.clone()
        f[idx] = 0.0
        g = x[mask]
        return a, b, c, d, e, f, g.sum()

    x = torch.randn(5, 4)
    idx = torch.tensor([0, 3, 1])
    mask = x > 0
    check_e2e(fn, x, idx, mask)


def test_noncontiguous_and_channels_last_inputs():
    conv = nn.Conv2d(4, 6, 3, padding=1)

    def fn(a, img):
        return a.relu() * 2, conv(img).sum(dim=(2, 3))

    a = torch.randn(6, 5).t()  # non-contiguous
    img = torch.randn(2, 4, 7, 7).to(memory_format=torch.channels_last)
    check_e2e(fn, a, img)


def test_dropout_eval_and_identity():
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Identity(), nn.SiLU(), nn.Hardswish())
    check_e2e(model, torch.randn(3, 8))


def test_integer_and_bool_outputs():
    def fn(x):
        i = x.argsort(dim=1)
        return i, (x > 0).any(dim=1), torch.cumsum(i, dim=1), x.int() // 2, torch.topk(x, 2).values

    check_e2e(fn, torch.randn(3, 6) * 5)


def test_constant_tensor_and_non_tensor_output():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.arange(12.0).view(3, 4))

        def forward(self, x):
            return x @ self.table, x.shape[0], self.table.sum()

    res = check_e2e(M(), torch.randn(2, 3))
    assert res[1] == 2


# ---------------------------------------------------------------- options and repeated calls


def _verified_calls(model, make_input, calls=3):
    compiled = compile_fxcpp(model, options={"verify": True, "fallback": "error"})
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for _ in range(calls):  # the same plan, called again on fresh inputs
            x = make_input()
            assert_same(model(x), compiled(x))
    skipped = [str(w.message) for w in caught if "verify" in str(w.message)]
    assert not skipped, skipped  # verify really compared, it did not skip


def test_verify_mode_and_repeated_calls():
    _verified_calls(_randomize_bn(ConvBN()).eval(), lambda: torch.randn(2, 3, 16, 16))
    _verified_calls(LNGelu().eval(), lambda: torch.randn(2, 5, 32))


def test_verify_mode_with_attention():
    _verified_calls(TransformerBlock().eval(), lambda: torch.randn(2, 6, 32))


@pytest.mark.parametrize("disabled", [("remove_noops",), ("dce",), ("remove_noops", "dce")])
def test_disable_passes(disabled):
    check_e2e(_randomize_bn(ResidualBlock()), torch.randn(2, 8, 6, 6), options={"disable_passes": disabled})


def test_float64_model_and_empty_batch():
    model = MLP().double().eval()
    check_e2e(model, torch.randn(3, 16, dtype=torch.float64))
    torch._dynamo.reset()
    check_e2e(model, torch.randn(0, 16, dtype=torch.float64))
