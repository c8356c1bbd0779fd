# The freshness check each session starts with (weights changed in place under no_grad, next call against eager).
import torch, torch.nn as nn, fxcpp  # noqa: F401  (fxcpp registers the backend)
torch.manual_seed(0)
ok = True
def check(name, model, x, mutate, dtype=torch.float32, tol=1e-4):
    global ok
    torch._dynamo.reset()
    model = model.to(dtype).eval(); x = x.to(dtype)
    c = torch.compile(model, backend="fxcpp")
    with torch.no_grad():
        c(x); c(x)
        mutate(model)
        got = c(x).double()
        if dtype == torch.float32:
            ref = model(x).double()
        else:
            ref = model.double()(x.double()); model.to(dtype)
    d = (got - ref).abs().max().item()
    scale = ref.abs().max().item()
    good = d <= tol * max(1, scale) if dtype == torch.float32 else d <= 0.02 * max(1, scale)
    ok &= good
    print(f"{name:40s} maxdiff {d:.3g} {'OK' if good else 'WRONG'}")
def lin_gelu(): return nn.Sequential(nn.Linear(256, 512), nn.GELU())
for M in (8, 64):
    check(f"lin+gelu M={M} w*2", lin_gelu(), torch.randn(M, 256), lambda m: m[0].weight.data.mul_(2))
    def m2(m): m[0].weight.data[0] = 1
    check(f"lin+gelu M={M} w[0]=1", lin_gelu(), torch.randn(M, 256), m2)
    check(f"lin+gelu M={M} b+1", lin_gelu(), torch.randn(M, 256), lambda m: m[0].bias.data.add_(1))
def cbr():
    m = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU()).eval()
    m[1].running_mean.normal_(); m[1].running_var.uniform_(0.5, 2); return m
check("conv+bn+relu var*3", cbr(), torch.randn(2, 8, 16, 16), lambda m: m[1].running_var.data.mul_(3))
check("conv+bn+relu convw*2", cbr(), torch.randn(2, 8, 16, 16), lambda m: m[0].weight.data.mul_(2))
check("fp32 linear M=64 w*2", nn.Linear(256, 256), torch.randn(64, 256), lambda m: m.weight.data.mul_(2))
for M in (64, 4):
    check(f"bf16 linear M={M} w*2", nn.Linear(256, 256), torch.randn(M, 256), lambda m: m.weight.data.mul_(2), dtype=torch.bfloat16)
print("ALL OK" if ok else "SOME WRONG")
