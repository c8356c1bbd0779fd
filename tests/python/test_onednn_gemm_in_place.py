"""Where oneDNN runs a matmul on its gemm (fp32 on AVX2-only hosts: oneDNN 3.2 has no brgemm
matmul there), the gemm packs B itself at every call, so fxcpp's pack keeps the weight's own
layout and is the weight itself: no second copy of each Linear weight; a bf16 weight, which
the gemm reads widened to fp32, is widened at each call instead of held widened. Every kind
of weight change must still be seen. In a subprocess with oneDNN capped at AVX2, so that any host
runs this path (ONEDNN_MAX_CPU_ISA is read once, when oneDNN starts)."""
import json
import os
import subprocess
import sys
import textwrap

_CODE = textwrap.dedent("""
    import copy, json, torch, torch.nn as nn, fxcpp
    from fxcpp import _C
    torch.manual_seed(0)
    res = {"isa": _C.host_info()["onednn_isa"], "checks": {}}

    def close(a, b, tol=1e-4):
        return bool(torch.allclose(a.float(), b.float(), rtol=tol, atol=tol))

    def notes(m, x):
        return [r.impl for r in fxcpp.explain(m, x).rows if r.kernel == "onednn" and r.impl]

    m = nn.Sequential(nn.Linear(96, 80), nn.ReLU()).eval()
    x = torch.randn(64, 96)  # above the GEMV's M: oneDNN's primitive
    res["notes"] = notes(m, x)
    c = torch.compile(m, backend="fxcpp")
    ck = res["checks"]
    with torch.no_grad():
        s0 = _C.onednn_stats()
        ck["first"] = close(c(x), m(x))
        res["in_place_packs"] = _C.onednn_stats()["packs_in_place"] - s0["packs_in_place"]
        m[0].weight.data.mul_(2)
        ck["weight.data.mul_"] = close(c(x), m(x))
        m[0].weight.data[0] = 1.0
        ck["weight.data[0] = 1"] = close(c(x), m(x))
        m[0].bias.data.add_(1)
        ck["bias.data.add_"] = close(c(x), m(x))
        m[0].weight.mul_(0.5)
        ck["weight.mul_ (version bump)"] = close(c(x), m(x))
        m.load_state_dict(nn.Sequential(nn.Linear(96, 80), nn.ReLU()).state_dict())
        ck["load_state_dict"] = close(c(x), m(x))
        m[0].weight = nn.Parameter(torch.randn(80, 96))
        ck["parameter replaced"] = close(c(x), m(x))

    # bf16 without native kernels: widened to fp32 at each call, no copy held at all.
    mb = nn.Sequential(nn.Linear(96, 80), nn.ReLU()).eval().bfloat16()
    xb = torch.randn(64, 96, dtype=torch.bfloat16)
    res["notes_bf16"] = notes(mb, xb)
    cb = torch.compile(mb, backend="fxcpp")
    with torch.no_grad():
        s0 = _C.onednn_stats()
        fp64 = lambda: copy.deepcopy(mb).double()(xb.double())
        ck["bf16 first"] = close(cb(xb), fp64(), 3e-2)
        ck["bf16 again"] = close(cb(xb), fp64(), 3e-2)
        s1 = _C.onednn_stats()
        res["packs_bf16"] = s1["packs"] - s0["packs"] + s1["packs_in_place"] - s0["packs_in_place"]
        mb[0].weight.data.mul_(2)
        ck["bf16 weight.data.mul_"] = close(cb(xb), fp64(), 3e-2)
        mb[0].weight.data[0] = 1.0
        ck["bf16 weight.data[0] = 1"] = close(cb(xb), fp64(), 3e-2)
        mb[0].bias.data.add_(1)
        ck["bf16 bias.data.add_"] = close(cb(xb), fp64(), 3e-2)

    # Options.freeze releases the weight: there it is packed (widened once) after all.
    from fxcpp.freeze import ReleasedTensor
    mf = nn.Sequential(nn.Linear(96, 80), nn.ReLU()).eval().bfloat16()
    with torch.no_grad():
        ref64 = copy.deepcopy(mf).double()(xb.double())
        s0 = _C.onednn_stats()
        cf = torch.compile(mf, backend="fxcpp", options={"freeze": True})
        ck["bf16 frozen first"] = close(cf(xb), ref64, 3e-2)
        ck["bf16 frozen again"] = close(cf(xb), ref64, 3e-2)
    res["frozen_released"] = all(isinstance(p, ReleasedTensor) for p in mf.parameters())
    res["frozen_packs"] = _C.onednn_stats()["packs"] - s0["packs"]
    print("RESULT " + json.dumps(res))
""")


def test_gemm_reads_the_weight_itself_and_sees_every_change():
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", FXCPP_KERNEL_CHOICE="onednn")
    env.pop("FXCPP_BF16", None)
    p = subprocess.run([sys.executable, "-c", _CODE], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.split("RESULT ", 1)[1])
    assert not r["isa"].startswith("avx512"), r["isa"]
    assert r["notes"] and all(n.startswith("onednn gemm:") and "the weight itself, no copy" in n for n in r["notes"]), r
    assert r["in_place_packs"] >= 1, r
    assert r["notes_bf16"] and all("widened to fp32 at each call, no fp32 copy held" in n for n in r["notes_bf16"]), r
    assert r["packs_bf16"] == 0, r
    assert r["frozen_released"] and r["frozen_packs"] >= 1, r
    assert all(r["checks"].values()), r["checks"]
