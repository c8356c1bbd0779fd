"""End-to-end training: forward + backward + SGD through torch.compile(backend="fxcpp")
match eager (gradients, updated parameters, BatchNorm running stats), step after step."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from fxcpp.explain import Report, recording
from helpers import assert_same, compile_fxcpp

STEPS = 3



class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 5))

    def forward(self, x):
        return self.net(x)


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=2, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x)) + x), 2)
        return self.fc(x.mean(dim=(2, 3)))


class LNGelu(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.emb = nn.Linear(6, d)
        self.ln1 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.ln2 = nn.LayerNorm(d)
        self.head = nn.Linear(d, 5)

    def forward(self, x):
        h = self.emb(x)
        h = h + self.fc2(F.gelu(self.fc1(self.ln1(h))))
        return self.head(self.ln2(h).mean(dim=1))


class TinyAttention(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, 5)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(o.transpose(1, 2).reshape(b, s, d).mean(dim=1))


def _inputs(kind, batch=4):
    g = torch.Generator().manual_seed(1)
    if kind == "mlp":
        x = torch.randn(batch, 12, generator=g)
    elif kind == "cnn":
        x = torch.randn(batch, 3, 8, 8, generator=g)
    elif kind == "attn":
        x = torch.randn(batch, 5, 16, generator=g)
    else:
        x = torch.randn(batch, 7, 6, generator=g)
    return x, torch.randint(0, 5, (batch,), generator=g)


MODELS = {"mlp": MLP, "cnn": ConvBN, "lngelu": LNGelu, "attn": TinyAttention}


def _grads(model):
    return {n: (None if p.grad is None else p.grad.clone()) for n, p in model.named_parameters()}


def _assert_state_same(ref_model, model):
    assert_same(dict(ref_model.named_parameters()), dict(model.named_parameters()))
    assert_same(dict(ref_model.named_buffers()), dict(model.named_buffers()))


def _train(kind, steps=STEPS, lr=0.1, momentum=0.0, check_grads=True):
    torch.manual_seed(0)
    model = MODELS[kind]().train()
    ref_model = copy.deepcopy(model)
    compiled = compile_fxcpp(model, options={"fallback": "error"})
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=lr, momentum=momentum)
    graphs = []
    losses = []
    with recording(graphs):
        for step in range(steps):
            x, y = _inputs(kind)
            x = x + step  # a different batch each step
            ref_loss = F.cross_entropy(ref_model(x.clone()), y)
            loss = F.cross_entropy(compiled(x.clone()), y)
            assert_same(ref_loss, loss)
            ref_loss.backward()
            loss.backward()
            if check_grads:
                ref_g, g = _grads(ref_model), _grads(model)
                assert all(v is not None for v in g.values()), [k for k, v in g.items() if v is None]
                assert_same(ref_g, g)
            ref_opt.step()
            opt.step()
            ref_opt.zero_grad()
            opt.zero_grad()
            _assert_state_same(ref_model, model)
            losses.append(loss.item())
    return model, ref_model, graphs, losses


def _assert_ran_in_cpp(graphs):
    kinds = sorted({g.kind for g in graphs})
    assert kinds == ["backward", "forward"], kinds
    kc = Report(graphs).kernel_counts
    assert kc["interpreter"] == 0, kc
    assert kc["aten"] > 0, kc
    for g in graphs:
        assert g.single is not None and not g.fallbacks, (g.kind, g.fallbacks)


@pytest.mark.parametrize("kind", ["mlp", "lngelu", "attn"])
def test_training_steps_match_eager(kind):
    model, _, graphs, losses = _train(kind)
    _assert_ran_in_cpp(graphs)
    assert len(losses) == STEPS
    # compiled once: one forward and one backward graph served all steps
    assert len(graphs) == 2, [g.kind for g in graphs]


def test_training_cnn_batchnorm_train_mode():
    model, ref_model, graphs, _ = _train("cnn")
    _assert_ran_in_cpp(graphs)
    assert model.bn1.num_batches_tracked.item() == STEPS
    assert not torch.allclose(model.bn1.running_mean, torch.zeros(8))
    assert not torch.allclose(model.bn2.running_var, torch.ones(8))
    # after training, eval mode (running stats) also matches eager
    model.eval()
    ref_model.eval()
    x, _ = _inputs("cnn", batch=2)
    with torch.no_grad():
        assert_same(ref_model(x), compile_fxcpp(model, options={"fallback": "error"})(x))


def test_training_with_momentum():
    _, _, graphs, losses = _train("mlp", steps=5, lr=0.05, momentum=0.9)
    _assert_ran_in_cpp(graphs)
    assert len(losses) == 5


def test_grad_wrt_inputs():
    """Gradients w.r.t. inputs (not only parameters) match eager."""

    def fn(x, w):
        return (torch.tanh(x @ w).sum(dim=1) ** 2).mean()

    x = torch.randn(4, 6, requires_grad=True)
    w = torch.randn(6, 3, requires_grad=True)
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    graphs = []
    with recording(graphs):
        loss = compile_fxcpp(fn, options={"fallback": "error"})(x, w)
        loss.backward()
    ref = fn(xr, wr)
    ref.backward()
    assert_same(ref, loss)
    assert_same((xr.grad, wr.grad), (x.grad, w.grad))
    _assert_ran_in_cpp(graphs)


def test_training_dynamic_batch():
    torch.manual_seed(0)
    model = LNGelu().train()
    ref_model = copy.deepcopy(model)
    compiled = compile_fxcpp(model, dynamic=True, options={"fallback": "error"})
    graphs = []
    with recording(graphs):
        for batch in (2, 3, 5):
            x, y = _inputs("lngelu", batch=batch)
            F.cross_entropy(ref_model(x), y).backward()
            F.cross_entropy(compiled(x), y).backward()
            assert_same(_grads(ref_model), _grads(model))
            model.zero_grad()
            ref_model.zero_grad()
    _assert_ran_in_cpp(graphs)
    assert len(graphs) == 2  # one symbolic forward + backward for every batch size
