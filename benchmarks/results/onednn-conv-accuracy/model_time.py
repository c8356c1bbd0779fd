"""What running long-reduction fp32 convolutions on oneDNN's NCHW-blocked layouts (layout_propagation's
blocked_layout) costs and gains on whole models: fxcpp's error against fp64 over eager's, and its
time, per FXCPP_CONV_LONG_K setting (0: every convolution NHWC, as before; 1024: the default; 512,
which also takes the 64-channel 3 x 3 convolutions; 1, in model_time_run1.txt: every ungrouped
fp32 convolution), each
setting in its own process, the settings alternated for ROUNDS rounds so that all see the same
drift of this VM.

    PYTHONPATH=. python benchmarks/results/onednn-conv-accuracy/model_time.py   # model_time.txt

Error: RMSE of the model's first output against the model run in fp64, over eager's (fp32, NCHW
inputs as the suite builds them). Time: median of 30 calls after 3 warm-up calls, in ms; the
table gives the median over rounds, and each setting's time over the NHWC setting's."""
import json
import os
import statistics
import subprocess
import sys
import time

MODELS = [("resnet50", 1), ("resnet50", 8), ("wav2vec2", 1)]
SETTINGS = ["0", "512", "1024"]
ROUNDS = 5


def _one_process(name: str, batch: int):
    import torch

    import fxcpp
    from benchmarks import suite
    spec = next(s for s in suite.SUITE if s.name == name)
    model, inputs = spec.build(batch)
    with torch.no_grad():
        ye = suite.call(spec, model, inputs)[0]
        y64 = suite.call(spec, spec.build(batch)[0].double(),
                         tuple(i.double() if i.is_floating_point() else i for i in inputs))[0]
        cm = torch.compile(suite.CallModule(spec, model), backend="fxcpp")
        yc = cm(*inputs)[0]
        for _ in range(3):
            cm(*inputs)
        ts = []
        for _ in range(30):
            t0 = time.perf_counter()
            cm(*inputs)
            ts.append(time.perf_counter() - t0)
        rows = fxcpp.explain(suite.CallModule(spec, model), *inputs).rows
    rmse = lambda y: ((y.double() - y64) ** 2).mean().sqrt().item()  # noqa: E731
    blocked = sum(1 for r in rows if r.kernel == "onednn" and "on NCHW blocked" in (r.impl or ""))
    convs = sum(1 for r in rows if r.kernel == "onednn" and "conv" in r.op)
    print(json.dumps({"err": rmse(yc) / rmse(ye), "ms": statistics.median(ts) * 1e3, "blocked": blocked,
                      "convs": convs}))


def main():
    if len(sys.argv) == 3:
        return _one_process(sys.argv[1], int(sys.argv[2]))
    sys.path.insert(0, os.getcwd())
    from benchmarks.machine import machine_info
    import fxcpp
    m = machine_info(1, "PYTHONPATH=. python benchmarks/results/onednn-conv-accuracy/model_time.py")
    print(m["cpu_model"], "|", fxcpp._C.host_info()["summary"], "| torch", m["torch_version"], "| commit",
          m["git_commit"][:10], m["date"], "| 2 threads")
    res = {(n, b, s): [] for n, b in MODELS for s in SETTINGS}
    for _ in range(ROUNDS):
        for n, b in MODELS:
            for s in SETTINGS:
                env = dict(os.environ, FXCPP_CONV_LONG_K=s)
                out = subprocess.run([sys.executable, __file__, n, str(b)], env=env, capture_output=True, text=True,
                                     check=True).stdout
                res[n, b, s].append(json.loads(out.strip().splitlines()[-1]))
    print(f"{'model':>10} {'batch':>5} | " + " | ".join(f"LONG_K={s}: err/eager, ms (x NHWC), jit convs" for s in SETTINGS))
    for n, b in MODELS:
        base = statistics.median(r["ms"] for r in res[n, b, "0"])
        cells = []
        for s in SETTINGS:
            rs = res[n, b, s]
            ms = statistics.median(r["ms"] for r in rs)
            cells.append(f"{rs[0]['err']:.3f}, {ms:.2f} ({ms / base:.2f}), {rs[0]['blocked']}/{rs[0]['convs']}")
        print(f"{n:>10} {b:>5} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
