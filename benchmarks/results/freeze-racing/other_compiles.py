# A frozen model (fxcpp, freeze=True) then compiled by other backends, exported, and recompiled for a new shape: each must raise or match eager, never compute from a released weight.
import torch, torch.nn as nn, sys
import fxcpp
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8)).eval()
x = torch.randn(8, 64)
with torch.no_grad():
    ref = model(x)
    f = torch.compile(model, backend="fxcpp", options={"freeze": True})
    print("frozen maxdiff", (f(x)-ref).abs().max().item())
    for be in ["aot_eager", "inductor", "eager"]:
        try:
            out = torch.compile(model, backend=be)(x)
            print(be, "NO ERROR, maxdiff:", (out-ref).abs().max().item())
        except Exception as e:
            print(be, type(e).__name__, next(l for l in str(e).splitlines() if "released" in l)[:200])
    try:
        ep = torch.export.export(model, (x,))
        print("export: exported (the program holds the stand-ins); running it:")
        ep.module()(x)
        print("export run NO ERROR")
    except Exception as e:
        print("export", type(e).__name__, str(e).splitlines()[0][:200])
    x5 = torch.randn(5, 64)
    try:
        f(x5); print("recompile NO ERROR")
    except Exception as e:
        print("recompile", type(e).__name__, next(l for l in str(e).splitlines() if "released" in l)[:200])
    print("after failed recompile, x8 maxdiff:", (f(x)-ref).abs().max().item())
    try:
        f(x5); print("recompile2 NO ERROR")
    except Exception as e:
        print("recompile2", type(e).__name__, next(l for l in str(e).splitlines() if "released" in l)[:200])
    print(repr(model[0].weight))
