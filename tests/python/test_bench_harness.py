"""The benchmark harness on a tiny model, in seconds: fields, accuracy flags, failing configurations."""
import json
import os
import sys
import warnings

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)  # the benchmarks package lives beside the tests, not in site-packages

from benchmarks import configs, harness  # noqa: E402
from fxcpp import _C

FIELDS = {"model", "kind", "batch", "dtype", "device", "config", "status", "error", "accuracy_ok", "kernel_counts",
          "compile_s_cold", "compile_s_warm", "latency_ms_median", "latency_ms_p25", "latency_ms_p75", "repeats",
          "speedup", "peak_rss_mb", "peak_rss_since", "peak_rss_ratio", "settled_rss_mb", "settled_rss_ratio"}


def _run(tmp_path, *extra):
    out = tmp_path / "out"
    assert harness.main(["--tiny", "--repeats", "5", "--dtypes", "fp32", "--out", str(out), *extra]) == 0
    with open(out / "results.json") as f:
        return json.load(f), out


def test_records_have_every_field_and_outputs_are_written(tmp_path):
    results, out = _run(tmp_path, "--configs", "eager,fxcpp")
    assert {r["config"] for r in results["records"]} == {"eager", "fxcpp"}
    for r in results["records"]:
        assert FIELDS <= set(r), FIELDS - set(r)
        assert r["status"] == "ok" and r["accuracy_ok"] is True
        assert r["latency_ms_median"] > 0 and r["repeats"] == 5 and r["peak_rss_mb"] > 0 and r["settled_rss_mb"] > 0
    fx = next(r for r in results["records"] if r["config"] == "fxcpp")
    ran = "onednn" if _C.has_onednn() else "aten"  # the Linears: oneDNN unless built without it
    assert fx["kernel_counts"][ran] > 0 and fx["kernel_counts"]["interpreter"] == 0
    # What ran (explain's ran_counts): every node counted once at least, a oneDNN node that kept
    # eager's ops under aten; the table's kernels cell says so only where they differ.
    assert set(fx["ran_counts"]) == set(fx["kernel_counts"])
    assert sum(fx["ran_counts"].values()) >= sum(fx["kernel_counts"].values())
    for key in ("cpu_model", "threads", "torch_version", "git_commit", "command", "date"):
        assert key in results["meta"]
    assert "--tiny" in results["meta"]["command"]
    assert set(results["summary"]["geomean_speedup"]) == {"eager", "fxcpp"}
    for name in ("results.json", "results.md", "speedup.png", "compile_time.png"):
        assert (out / name).stat().st_size > 0
    assert "| tiny_mlp | 2 | fp32 |" in (out / "results.md").read_text()


@pytest.fixture
def extra_configs(monkeypatch):
    def wrong(fn):
        return lambda *a: fn(*a) + 1  # compiles fine, returns wrong numbers

    def raising(fn):
        def call(*a):
            raise RuntimeError("boom: this configuration cannot compile")
        return call

    monkeypatch.setitem(configs.CONFIGS, "wrong", configs.Config("wrong", wrong))
    monkeypatch.setitem(configs.CONFIGS, "raising", configs.Config("raising", raising))


def test_accuracy_failures_are_flagged_and_never_counted(tmp_path, extra_configs):
    results, out = _run(tmp_path, "--configs", "eager,wrong,fxcpp", "--no-isolated")
    wrong = next(r for r in results["records"] if r["config"] == "wrong")
    assert wrong["accuracy_ok"] is False and wrong["status"] == "accuracy_fail"
    assert results["summary"]["geomean_speedup"]["wrong"] is None  # not a speedup
    assert results["summary"]["geomean_speedup"]["fxcpp"] is not None
    assert "✗" in (out / "results.md").read_text()


def test_a_configuration_that_fails_to_compile_is_reported(tmp_path, extra_configs):
    results, out = _run(tmp_path, "--configs", "eager,raising,fxcpp", "--no-isolated")
    bad = next(r for r in results["records"] if r["config"] == "raising")
    assert bad["status"] == "compile_error" and "boom" in bad["error"]
    assert "latency_ms_median" not in bad
    good = next(r for r in results["records"] if r["config"] == "fxcpp")
    assert good["status"] == "ok" and good["latency_ms_median"] > 0
    assert any(f["config"] == "raising" for f in results["summary"]["failures"])


def test_unknown_configuration_is_a_clear_error():
    with pytest.raises(SystemExit, match="unknown configuration"):
        configs.get(["eager", "nope"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the GPU machine); CI has none")
def test_cuda_device_runs_its_peers_and_records_gpu_memory(tmp_path):
    results, out = _run(tmp_path, "--device", "cuda", "--configs", "eager,inductor,inductor_reduce_overhead,fxcpp")
    assert results["meta"]["device"] == "cuda" and results["meta"]["gpu"]
    for r in results["records"]:
        assert r["device"] == "cuda" and r["status"] == "ok" and r["accuracy_ok"] is True, r
        assert r["latency_ms_median"] > 0 and r["cuda_max_alloc_mb"] > 0 and r["cuda_max_alloc_ratio"] > 0
    assert "peak CUDA MB" in (out / "results.md").read_text()


def test_peak_rss_restarts_after_the_model_is_built():
    from benchmarks import isolated

    big = torch.ones(64 * 2**20)  # 256 MB, freed before the reset: not part of the measured peak
    del big
    before = isolated.peak_rss_mb()
    assert isolated.reset_peak_rss(), "clear_refs is not writable: peaks would include the model's build"
    assert isolated.peak_rss_mb() < before - 200


def _inline_nn_modules():
    with warnings.catch_warnings():  # deprecated (and without effect) from torch 2.13, still stored
        warnings.simplefilter("ignore", FutureWarning)
        return torch._dynamo.config.inline_inbuilt_nn_modules


def test_serving_peers_run_beside_fxcpp_and_a_failing_one_is_recorded(tmp_path):
    """ONNX Runtime and OpenVINO (benchmarks/peers.py): fp32 runs and matches eager for all three;
    in bf16 ONNX Runtime 1.32's CPU provider has no bf16 Gemm, so its session cannot be made: that
    case is recorded as failed, and the run goes on (OpenVINO converts and runs it).
    `import openvino.torch` sets Dynamo's inline_inbuilt_nn_modules to False process-wide (on
    torch 2.11 every later compile then takes parameters for constants): the run leaves it
    as it found it."""
    out = tmp_path / "out"
    assert _inline_nn_modules() is True
    assert harness.main(["--tiny", "--repeats", "5", "--dtypes", "fp32,bf16", "--out", str(out),
                         "--configs", "eager,onnxruntime,openvino,openvino_compile"]) == 0
    assert _inline_nn_modules() is True
    records = json.loads((out / "results.json").read_text())["records"]
    by = {(r["dtype"], r["config"]): r for r in records}
    for cfg in ("onnxruntime", "openvino", "openvino_compile"):
        r = by[("fp32", cfg)]
        assert r["status"] == "ok" and r["accuracy_ok"] is True and r["latency_ms_median"] > 0, r
    failed = by[("bf16", "onnxruntime")]
    assert failed["status"] == "compile_error" and "NOT_IMPLEMENTED" in failed["error"], failed
    for cfg in ("openvino", "openvino_compile"):
        assert by[("bf16", cfg)]["status"] == "ok" and by[("bf16", cfg)]["accuracy_ok"] is True, by[("bf16", cfg)]
    assert "onnxruntime" in (out / "results.md").read_text()


def test_fxcpp_over_best_peer_is_reported_per_case():
    from benchmarks import report

    rec = lambda cfg, ms, status="ok": {"model": "m", "batch": 1, "dtype": "fp32", "config": cfg,  # noqa: E731
                                        "status": status, "latency_ms_median": ms, "speedup": 1.0}
    summ = report.summarize([rec("eager", 4.0), rec("fxcpp", 1.0), rec("inductor", 3.0), rec("onnxruntime", 2.0),
                             rec("openvino", 0.5, "accuracy_fail")], ["eager", "fxcpp", "inductor", "onnxruntime"])
    # openvino was faster but wrong: it never counts; the best correct peer is onnxruntime.
    assert summ["fxcpp_vs_best_peer"]["m/1/fp32"] == {"fxcpp_over_best_peer": 0.5, "best_peer": "onnxruntime"}



def test_the_kernels_cell_says_what_ran_where_it_differs_from_what_was_compiled():
    from benchmarks import report

    kc = {"onednn": 4, "cpu_fused": 1, "cuda": 0, "aten": 0, "interpreter": 0}
    kept = {"onednn": 0, "cpu_fused": 1, "cuda": 0, "aten": 4, "interpreter": 0}
    recs = [{"model": "m", "batch": b, "dtype": "fp32", "config": "fxcpp", "status": "ok", "latency_ms_median": 1.0,
             "speedup": 1.0, "kernel_counts": kc, "ran_counts": ran} for b, ran in ((1, kc), (8, kept))]
    results = {"records": recs, "meta": {"cpu_model": "cpu", "threads": 2, "torch_version": "t", "git_commit": "c",
                                         "command": "c"}, "summary": report.summarize(recs, ["fxcpp"])}
    rows = {line.split(" | ")[1]: line for line in report.markdown(results).splitlines() if line.startswith("| m | ")
            and "onednn=4" in line}
    assert rows["1"].endswith("| onednn=4, cpu_fused=1 |"), rows["1"]
    assert rows["8"].endswith("| onednn=4, cpu_fused=1 (ran: cpu_fused=1, aten=4) |"), rows["8"]


def test_each_sample_follows_untimed_calls_of_its_own_configuration():
    # The sample must time its configuration, not the cache the previous configuration left.
    import time

    def call_of(name, calls):
        return lambda: (calls.append(name), time.sleep(0.003))  # > 2 ms: one call per sample

    def runs(settle):
        calls = []
        harness.timed({"a": call_of("a", calls), "b": call_of("b", calls)}, (), "cpu", repeats=3, warmup=0,
                      settle=settle)
        seq = "".join(calls[2:])  # after the one call per configuration that sizes the sample
        return [len(r) for r in seq.replace("ab", "a b").replace("ba", "b a").split()]

    assert set(runs(0)) == {1}  # the old way: each sample directly after the other configuration
    assert set(runs(1)) == {2}  # one untimed call of its own, then the timed one


def test_a_run_measures_its_own_choices_unless_a_cache_dir_is_given(tmp_path, monkeypatch):
    from benchmarks import machine

    monkeypatch.delenv("FXCPP_CACHE_DIR", raising=False)
    with machine.own_choice_cache("test"):
        d = os.environ["FXCPP_CACHE_DIR"]
        assert os.path.isdir(d) and not os.listdir(d)
    assert "FXCPP_CACHE_DIR" not in os.environ and not os.path.exists(d)
    monkeypatch.setenv("FXCPP_CACHE_DIR", str(tmp_path))
    with machine.own_choice_cache("test"):
        assert os.environ["FXCPP_CACHE_DIR"] == str(tmp_path)
    assert os.environ["FXCPP_CACHE_DIR"] == str(tmp_path) and tmp_path.is_dir()


def test_interleaved_dtypes_time_every_dtype_and_configuration_in_one_loop(tmp_path, monkeypatch):
    loops = []
    real = harness.timed

    def spy(fns, inputs, *a, **k):
        loops.append(sorted(map(str, fns)))
        return real(fns, inputs, *a, **k)

    monkeypatch.setattr(harness, "timed", spy)
    dtypes = ["fp32", "bf16"] if harness.bf16_supported("cpu") else ["fp32"]
    out = tmp_path / "out"
    assert harness.main(["--tiny", "--repeats", "5", "--dtypes", ",".join(dtypes), "--configs", "eager,fxcpp",
                         "--no-isolated", "--interleave-dtypes", "--out", str(out)]) == 0
    with open(out / "results.json") as f:
        results = json.load(f)
    cases = {(r["model"], r["batch"]) for r in results["records"]}
    assert len(loops) == len(cases) and all(len(names) == 2 * len(dtypes) for names in loops), loops
    assert {(r["dtype"], r["config"]) for r in results["records"]} == {(d, c) for d in dtypes for c in ("eager", "fxcpp")}
    for r in results["records"]:
        assert r["status"] == "ok" and r["accuracy_ok"] and r["latency_ms_median"] > 0 and r["repeats"] == 5, r
    assert results["meta"]["interleave_dtypes"] is True
    assert "one interleaved loop" in (out / "results.md").read_text()


@pytest.mark.skipif(not _C.has_onednn(), reason="freeze releases what oneDNN kernels pack")
def test_the_frozen_configuration_compiles_warm_on_a_model_copy_of_its_own(tmp_path):
    # Its cold compile releases its copy's parameters: the warm compile needs another copy.
    results, _ = _run(tmp_path, "--configs", "eager,fxcpp_frozen", "--no-isolated")
    frozen = [r for r in results["records"] if r["config"] == "fxcpp_frozen"]
    assert frozen and all(r["status"] == "ok" and r["accuracy_ok"] and r["compile_s_warm"] > 0 for r in frozen)
