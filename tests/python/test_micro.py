"""The physical-limit micro-benchmarks build, run and report every field (no assertions on speed)."""
import json
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)  # the benchmarks package lives beside the tests, not in site-packages

from benchmarks.micro import native, run  # noqa: E402


def _has_flag(flag):
    with open("/proc/cpuinfo") as f:
        return any(line.startswith("flags") and flag in line.split() for line in f)


def test_build_is_cached_by_source_hash():
    exe = native.build("fma_peak")
    mtime = exe.stat().st_mtime_ns
    assert native.build("fma_peak") == exe and exe.stat().st_mtime_ns == mtime


def test_fma_peak_json():
    r = native.fma_peak(1, 0.05)
    assert r["isa"] in ("avx512f", "avx2_fma", "scalar") and r["threads"] == 1
    assert r["fp32"]["gflops_1core"] > 0 and r["fp32"]["gflops_total"] > 0
    if _has_flag("avx512_bf16"):
        assert r["bf16"]["gflops_1core"] > 0 and r["bf16"]["gflops_total"] > 0


def test_stream_triad_json():
    r = native.stream_triad(2, 8, 3)
    assert r["correct"] is True and r["threads"] == 2 and r["array_mib"] == 8
    assert r["gbps_best"] > 0 and r["gbps_median"] > 0 and "write-allocate" in r["convention"]


def test_quick_run_writes_every_field(tmp_path):
    threads = torch.get_num_threads()
    try:
        r = run.main(["--quick", "--no-inductor", "--out", str(tmp_path)])
    finally:
        torch.set_num_threads(threads)
    assert json.loads((tmp_path / "micro.json").read_text()) == json.loads(json.dumps(r))
    md = (tmp_path / "micro.md").read_text()
    for section in ("Host ISA", "Peak FLOP/s", "GEMM", "Bandwidth", "Small-M GEMM", "Host overhead",
                    "torch.compile(module) against a compiled function"):
        assert section in md

    m = r["machine"]
    for key in ("cpu_model", "physical_cores", "threads", "torch_version", "git_commit", "command"):
        assert m[key], key
    assert "--quick" in m["command"]
    assert r["backends"] == ["eager", "fxcpp"]
    assert r["peak"]["fp32"]["gflops_total"] > 0 and r["triad"]["gbps_best"] > 0
    assert {g["dtype"] for g in r["gemm"]} >= {"fp32"}
    assert {g["op"] for g in r["gemm"]} >= {"torch.mm (eager)", "F.linear (fxcpp, oneDNN)", "conv2d (fxcpp, oneDNN)"}
    for g in r["gemm"]:  # no bf16 FMA peak to compare with on a host without native bf16
        assert g["gflops"] > 0 and (g["pct_peak"] > 0 if g["pct_peak"] is not None else g["dtype"] == "bf16")
    assert {k["kernel"] for k in r["memory"]} == {"pointwise4", "pointwise4_tanh", "softmax_scale_mask", "add_layer_norm", "rmsnorm"}
    for k in r["memory"]:
        for b in r["backends"]:
            assert "error" not in k[b], k[b]
            assert k[b]["gbps"] > 0 and k[b]["pct_triad"] > 0 and k[b]["matches_eager"] is True
    for b in r["backends"]:
        assert r["overhead"][b]["us_per_call"] > 0
    assert set(r["module_wrapper"]["us_per_call"]) == {
        "eager", *(f"{b}: torch.compile({how})" for b in ("eager", "fxcpp") for how in ("module", "lambda x: module(x)"))}
    assert all(us > 0 for us in r["module_wrapper"]["us_per_call"].values())
    assert m["host"]["summary"] and m["host"]["onednn_isa"]
    assert {(g["dtype"], g["m"]) for g in r["gemv"]} == {("fp32", 1), ("fp32", 16), ("bf16", 1), ("bf16", 16)}
    for g in r["gemv"]:
        for path in ("eager", "fxcpp", "gemv", "onednn"):
            assert "error" not in g[path], g[path]
            assert g[path]["gbps"] > 0 and g[path]["pct_triad"] > 0
        assert g["fxcpp_path"].split()[0] in ("gemv", "onednn", "onednn:bf16-as-fp32", "aten:"), g["fxcpp_path"]
