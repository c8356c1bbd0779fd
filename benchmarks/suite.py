"""The model suite: models built offline from code or transformers configs (no
weights, no downloads), each at a small batch (eager forward well under a second
on 2 cores) and a larger one."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelSpec:
    name: str
    build: Callable[[int], tuple[nn.Module, tuple]]  # batch -> (model in eval mode, inputs)
    batches: tuple[int, ...]
    quick: bool = False            # part of `make bench-quick`
    quick_batches: tuple[int, ...] = ()
    kind: str = "gemm"             # "gemm", "conv" or "memory": what bounds it
    call_kwargs: dict = field(default_factory=dict)


def call(spec: ModelSpec, model: nn.Module, inputs: tuple):
    """Run the model; transformers models return tuples (return_dict=False)."""
    return model(*inputs, **spec.call_kwargs)


class CallModule(nn.Module):
    """The model called as suite.call calls it, as an nn.Module (what exporters take)."""

    def __init__(self, spec: ModelSpec, model: nn.Module):
        super().__init__()
        self.model = model
        self.kwargs = dict(spec.call_kwargs)

    def forward(self, *inputs):
        return self.model(*inputs, **self.kwargs)


# ---- written in the repo ----

class MLP(nn.Module):
    def __init__(self, d: int = 1024, h: int = 4096):
        super().__init__()
        self.fc1, self.fc2, self.ln = nn.Linear(d, h), nn.Linear(h, d), nn.LayerNorm(d)

    def forward(self, x):
        return self.ln(self.fc2(F.gelu(self.fc1(x))))


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.short(x))


class ResNet20(nn.Module):
    """CIFAR-style ResNet-20: 3 stages of 3 basic blocks (16, 32, 64 channels)."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        blocks, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                blocks.append(BasicBlock(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1))


class LayerNormGeluResidual(nn.Module):
    """A memory-bandwidth probe: LayerNorm + GELU + residual on [rows, 768]."""

    def __init__(self, d: int = 768):
        super().__init__()
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        return x + F.gelu(self.ln(x))


class WeightNormPosConv(nn.Module):
    """wav2vec2's positional convolution alone: a weight-normalized grouped Conv1d, its
    weight computed from two parameters in the graph at every call (issue 15's probe)."""

    def __init__(self, d: int = 768):
        super().__init__()
        conv = nn.Conv1d(d, d, 128, padding=64, groups=16)
        self.conv = torch.nn.utils.parametrizations.weight_norm(conv, dim=2)

    def forward(self, x):
        return F.gelu(self.conv(x)[:, :, :-1])


def _seeded(fn):
    def build(batch):
        torch.manual_seed(0)
        return fn(batch)
    return build


def _tokens(batch, seq, vocab=1000):
    return torch.randint(0, vocab, (batch, seq))


def _hf(config_name: str, model_name: str, inputs, **config_kw):
    def build(batch):
        import transformers

        cfg = getattr(transformers, config_name)(**config_kw)
        return getattr(transformers, model_name)(cfg).eval(), inputs(batch)
    return _seeded(build)


HF = {"return_dict": False}
HF_NO_CACHE = {"return_dict": False, "use_cache": False}
IMAGE = lambda b: (torch.randn(b, 3, 224, 224),)  # noqa: E731

SUITE: list[ModelSpec] = [
    ModelSpec("bert_base", _hf("BertConfig", "BertModel", lambda b: (_tokens(b, 128),)), (1, 8), call_kwargs=HF),
    ModelSpec("distilbert", _hf("DistilBertConfig", "DistilBertModel", lambda b: (_tokens(b, 128),)), (1, 8),
              call_kwargs=HF),
    ModelSpec("gpt2", _hf("GPT2Config", "GPT2Model", lambda b: (_tokens(b, 128),)), (1, 8), call_kwargs=HF_NO_CACHE),
    ModelSpec("t5_small", _hf("T5Config", "T5Model", lambda b: (_tokens(b, 128), None, _tokens(b, 32))), (1, 8),
              call_kwargs=HF_NO_CACHE),
    ModelSpec("vit_b16", _hf("ViTConfig", "ViTModel", IMAGE), (1, 8), call_kwargs=HF),
    ModelSpec("resnet50", _hf("ResNetConfig", "ResNetModel", IMAGE), (1, 8), kind="conv", call_kwargs=HF),
    ModelSpec("mobilenetv2", _hf("MobileNetV2Config", "MobileNetV2Model", IMAGE), (1, 16), kind="conv", call_kwargs=HF),
    ModelSpec("convnext_tiny", _hf("ConvNextConfig", "ConvNextModel", IMAGE), (1, 8), kind="conv", call_kwargs=HF),
    # Speech: one second of 16 kHz audio through a 4-layer wav2vec2 (conv feature encoder,
    # weight-normalized positional conv, transformer).
    ModelSpec("wav2vec2", _hf("Wav2Vec2Config", "Wav2Vec2Model", lambda b: (torch.randn(b, 16000),), num_hidden_layers=4),
              (1, 4), kind="conv", call_kwargs=HF),
    ModelSpec("mlp", _seeded(lambda b: (MLP().eval(), (torch.randn(b, 1024),))), (1, 32), quick=True,
              quick_batches=(32,)),
    ModelSpec("resnet20", _seeded(lambda b: (ResNet20().eval(), (torch.randn(b, 3, 32, 32),))), (1, 64), kind="conv",
              quick=True, quick_batches=(1,)),
    ModelSpec("ln_gelu_residual", _seeded(lambda b: (LayerNormGeluResidual().eval(), (torch.randn(b, 768),))), (4096,),
              kind="memory", quick=True, quick_batches=(4096,)),
    ModelSpec("weight_norm_conv", _seeded(lambda b: (WeightNormPosConv().eval(), (torch.randn(b, 768, 49),))), (1,),
              kind="conv"),
]

# Tiny models for the harness's own tests (seconds, no transformers).
TINY: list[ModelSpec] = [
    ModelSpec("tiny_mlp", _seeded(lambda b: (nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval(),
                                             (torch.randn(b, 16),))), (2,)),
]


def find(names: list[str] | None, quick: bool, tiny: bool = False) -> list[tuple[ModelSpec, int]]:
    """(spec, batch) pairs to run."""
    specs = TINY if tiny else SUITE
    out = []
    for s in specs:
        if names and s.name not in names:
            continue
        if quick and not names and not s.quick:
            continue
        for b in (s.quick_batches or s.batches) if quick else s.batches:
            out.append((s, b))
    if names and not out:
        raise SystemExit(f"no model named {names}; models are: {[s.name for s in SUITE + TINY]}")
    return out


def to_dtype(model: nn.Module, inputs: tuple, dtype: torch.dtype, device: str):
    """Move a model and its inputs; floating inputs take the dtype, token ids stay integers."""
    model = model.to(device=device, dtype=dtype)
    moved = tuple(x.to(device=device, dtype=dtype if x.is_floating_point() else x.dtype)
                  if isinstance(x, torch.Tensor) else x for x in inputs)
    return model, moved
