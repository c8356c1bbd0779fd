"""Outputs of the kernels the lockstep pairs reach, saved for a bit-for-bit comparison of two installs:
    PYTHONPATH=/tmp/ab/before python bits.py before.pt; PYTHONPATH=/tmp/ab/after python bits.py after.pt
    python bits.py --compare before.pt after.pt
Pointwise chains (`+ 0` keeps a lone op fused), the rows interpreter (softmax, log_softmax, a
LayerNorm + GELU + residual in fp32 and bf16) over 6.3M values each."""
import sys

import torch
import torch.nn.functional as F

if sys.argv[1] == "--compare":
    a, b = torch.load(sys.argv[2]), torch.load(sys.argv[3])
    for k in a:
        x, y = a[k].view(torch.int16 if a[k].dtype == torch.bfloat16 else torch.int32), b[k].view(
            torch.int16 if b[k].dtype == torch.bfloat16 else torch.int32)
        print(f"{k:26s} {a[k].numel():8d} values, bits differ: {int((x != y).sum())}")
    sys.exit(0)

torch.manual_seed(0)
x = torch.cat([torch.randn(1 << 20) * s for s in (0.1, 1, 3, 10, 30)])
x = torch.cat([x, torch.linspace(-90, 90, 1 << 20)])
x[:6] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e-40])
w, bias = torch.randn(768), torch.randn(768)
fs = {"tanh": lambda t: torch.tanh(t) + 0, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh") + 0,
      "sigmoid": lambda t: torch.sigmoid(t) + 0, "silu": lambda t: F.silu(t) + 0, "exp": lambda t: torch.exp(t) + 0,
      "gelu": lambda t: F.gelu(t) + 0,
      "softmax rows": lambda t: torch.softmax(t.view(-1, 512) * 0.5, -1),
      "log_softmax rows": lambda t: torch.log_softmax(t.view(-1, 512) * 0.5, -1),  # the scale keeps it fused
      "ln_gelu_residual fp32": lambda t: t.view(-1, 768) + F.gelu(F.layer_norm(t.view(-1, 768), (768,), w, bias)),
      "ln_gelu_residual bf16": lambda t: (lambda u: u + F.gelu(F.layer_norm(u, (768,), w.bfloat16(), bias.bfloat16())))(
          t.view(-1, 768).bfloat16())}
out = {}
with torch.no_grad():
    for k, f in fs.items():
        out[k] = torch.compile(f, backend="fxcpp")(x)
torch.save(out, sys.argv[1])
