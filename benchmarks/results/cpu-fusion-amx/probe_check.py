"""Why the LayerNorm+GELU+residual probe ([4096, 768]) does not gain from bf16 or streaming
stores on the Intel AMX host: per dtype, a copy of the probe's input (what moving its bytes
costs here), the probe under eager and fxcpp, with the host's cache size (480 MiB reported:
nothing streams) and with FXCPP_LLC_BYTES=32 MiB (the output streams), each setting in a
process of its own (the size is read once), two rounds. Medians of 300 calls, 2 threads.

    python benchmarks/results/cpu-fusion-amx/probe_check.py > benchmarks/results/cpu-fusion-amx/probe_check.txt
"""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def median_ms(fn, n=300):
    for _ in range(10):
        fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def child():
    import torch
    import torch.nn.functional as F

    import fxcpp

    torch.set_num_threads(2)
    ln = torch.nn.LayerNorm(768).eval()
    probe = lambda x: x + F.gelu(ln(x))  # noqa: E731
    with torch.no_grad():
        for dt in (torch.float32, torch.bfloat16):
            x = torch.randn(4096, 768).to(dt)
            ln.to(dt)
            out = torch.empty_like(x)
            torch._dynamo.reset()
            compiled = torch.compile(probe, backend="fxcpp")
            before = fxcpp._C.cpu_fused_stats()["streamed"]
            row = {"dtype": str(dt).split(".")[1], "llc_bytes": fxcpp._C.host_info()["llc_bytes"],
                   "copy_ms": median_ms(lambda: out.copy_(x)), "eager_ms": median_ms(lambda: probe(x)),
                   "fxcpp_ms": median_ms(lambda: compiled(x))}
            row["streamed"] = fxcpp._C.cpu_fused_stats()["streamed"] > before
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        sys.path = [p for p in sys.path if os.path.abspath(p or ".") != ROOT]
        child()
        sys.exit(0)
    sys.path.insert(0, ROOT)
    from benchmarks.machine import machine_info

    print(json.dumps(machine_info(2, "benchmarks/results/cpu-fusion-amx/probe_check.py")))
    for rnd in (1, 2):
        for llc in (None, str(32 << 20)):
            env = {k: v for k, v in os.environ.items() if k != "FXCPP_LLC_BYTES"}
            if llc:
                env["FXCPP_LLC_BYTES"] = llc
            print(f"# round {rnd}, FXCPP_LLC_BYTES={llc or 'unset'}", flush=True)
            out = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, cwd="/tmp")
            print(out.stdout, end="", flush=True)
