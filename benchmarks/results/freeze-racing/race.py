import sys, threading, torch, torch.nn as nn, collections
import fxcpp
from fxcpp.freeze import ReleasedTensor
fullgraph = sys.argv[1] == "full"
rounds = int(sys.argv[2])
outcomes = collections.Counter()
for r in range(rounds):
    torch._dynamo.reset()
    torch.manual_seed(r)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32), nn.GELU(), nn.Linear(32, 8)).eval()
    x = torch.randn(8, 64)
    with torch.no_grad():
        ref = model(x)
    f = torch.compile(model, backend="fxcpp", options={"freeze": True}, fullgraph=fullgraph)
    start = threading.Barrier(4)
    res = []
    def call():
        start.wait()
        try:
            with torch.no_grad():
                out = f(x)
            res.append("ok" if torch.allclose(out, ref, atol=1e-5, rtol=1e-4) else "WRONG")
        except Exception as e:
            res.append("raised " + type(e).__name__ + ": " + str(e).splitlines()[0][:120])
    ts = [threading.Thread(target=call) for _ in range(4)]
    [t.start() for t in ts]; [t.join() for t in ts]
    for o in res: outcomes[o] += 1
    # every later call
    try:
        with torch.no_grad():
            for _ in range(3):
                assert torch.allclose(f(x), ref, atol=1e-5, rtol=1e-4)
        outcomes["after: ok"] += 1
    except Exception as e:
        outcomes["after: " + type(e).__name__ + str(e)[:100]] += 1
    outcomes["released"] += isinstance(model[0].weight, ReleasedTensor)
for k, v in sorted(outcomes.items()): print(v, k)
