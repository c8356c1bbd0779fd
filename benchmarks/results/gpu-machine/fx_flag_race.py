# One thread compiles fresh functions under a backend while 7 threads call a function compiled
# before (no recompile): counts the callers' errors. torch.fx's _is_fx_tracing_flag is a module
# global that Tracer.trace (make_fx, inside aot_autograd) sets; Dynamo's compiled-function wrapper
# raises "Detected that you are using FX to symbolically trace a dynamo-optimized function" when
# it finds it set, from whichever thread.
import sys, threading, time, collections, torch
backend, seconds = sys.argv[1], float(sys.argv[2])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).eval()
x = torch.randn(4, 32)
with torch.no_grad():
    ref = model(x)
    served = torch.compile(model, backend=backend); served(x)
stop = time.time() + seconds
errors, calls, compiles, wrong = collections.Counter(), [0], [0], [0]
def caller():
    while time.time() < stop:
        try:
            with torch.no_grad():
                y = served(x)
            calls[0] += 1
            if not torch.allclose(y, ref, atol=1e-5, rtol=1e-4): wrong[0] += 1
        except Exception as e:
            errors[str(e)[:90]] += 1
def compiler():
    i = 0
    while time.time() < stop:
        i += 1
        ns = {"torch": torch}
        exec(f"def f(x, w):\n    return torch.relu(x @ w + {i}.0) * 2.0", ns)  # a new code object: a real compile
        with torch.no_grad():
            torch.compile(ns["f"], backend=backend)(torch.randn(2, 32), torch.randn(32, 16))
        compiles[0] += 1
ts = [threading.Thread(target=caller) for _ in range(7)] + [threading.Thread(target=compiler)]
[t.start() for t in ts]; [t.join() for t in ts]
print(f"{backend}: torch {torch.__version__}, {compiles[0]} compiles, {calls[0]} calls ok, {wrong[0]} wrong, {sum(errors.values())} errors", dict(errors))
