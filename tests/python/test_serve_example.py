"""benchmarks/serve.py, the serving load test, kept working: many client threads against one
compiled model behind a thread pool, with no error and every checked output equal to eager's."""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

serve = pytest.importorskip("benchmarks.serve")


def test_load_test_runs_clean(tmp_path):
    res = serve.main(["--tiny", "--model", "tiny_mlp", "--batch", "2", "--configs", "eager", "fxcpp",
                      "--clients", "4", "--requests", "60", "--workers", "2", "--check-every", "7",
                      "--rounds", "1", "--out", str(tmp_path)])
    runs = res["rounds"][0]
    assert [r["config"] for r in runs] == ["eager", "fxcpp"]
    for r in runs:
        assert "failed" not in r, r
        assert r["completed"] == r["requests"] == 240 and r["errors"] == 0, r
        assert r["checked"] >= 30 and r["wrong"] == 0, r
        assert r["p99_ms"] >= r["p50_ms"] > 0
    table = (tmp_path / "serve.md").read_text()
    assert "| 0 | eager | " in table and "| 0 | fxcpp | " in table
