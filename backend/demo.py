"""`make demo`: compile two built-in models with backend="fxcpp", check them
against eager, and print which kernel ran each node and the latency against eager."""
from __future__ import annotations

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._dynamo.utils import same
from torch.utils import benchmark

import fxcpp


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 128, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def builtin_models():
    torch.manual_seed(0)
    return {
        "small_cnn (BatchNorm, eval)": (SmallCNN().eval(), (torch.randn(8, 3, 32, 32),)),
        "transformer_block (causal SDPA)": (TransformerBlock().eval(), (torch.randn(4, 64, 128),)),
    }


def median_ms(fn, *args) -> float:
    t = benchmark.Timer("fn(*args)", globals={"fn": fn, "args": args}, num_threads=torch.get_num_threads())
    return t.blocked_autorange(min_run_time=0.5).median * 1e3


def run_one(name, model, inputs) -> bool:
    print(f"\n=== {name} ===")
    compiled = torch.compile(model, backend="fxcpp")
    with torch.no_grad():
        ref = model(*inputs)
        res = compiled(*inputs)
        ok = same(ref, res, tol=1e-3)
        print(f"matches eager (fp32 tol 1e-3): {ok}")
        report = fxcpp.explain(model, *inputs)
        print(report)
        eager_ms, fxcpp_ms = median_ms(model, *inputs), median_ms(compiled, *inputs)
    print(f"latency (median, {torch.get_num_threads()} threads): eager {eager_ms:.3f} ms, fxcpp {fxcpp_ms:.3f} ms, "
          f"speedup {eager_ms / fxcpp_ms:.2f}x")
    return ok


def main() -> int:
    results = [run_one(name, m, x) for name, (m, x) in builtin_models().items()]
    print("\nall models match eager" if all(results) else "\nSOME MODELS DIFFER FROM EAGER")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
