"""benchmarks/warm_start.py kept working: a fresh process with the choice cache filled takes
every choice from it, gives the cold process's bits, and a truncated cache warns and stays
correct."""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

warm_start = pytest.importorskip("benchmarks.warm_start")
from fxcpp import _C  # noqa: E402


@pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0): no choices to cache")
def test_warm_start_runs_and_checks_itself(tmp_path):
    res = warm_start.main(["--models", "tiny_mlp", "--batches", "2", "--rounds", "1", "--out", str(tmp_path)])
    rec, pre = res["records"]
    assert (rec["mode"], pre["mode"]) == ("torch.compile", "precompile")
    # precompile: the warm process loads the saved function: no Dynamo trace, choices from the cache.
    assert pre["cold"][0]["dynamo_s"] > 0 and pre["warm"][0]["dynamo_s"] == 0, pre
    assert pre["warm"][0]["cache_hits"] == 2 and pre["warm"][0]["matches_eager"] and pre["outputs_identical"], pre
    assert rec["outputs_identical"] and rec["cold"][0]["matches_eager"] and rec["warm"][0]["matches_eager"]
    assert not rec["cold"][0]["warnings"] and not rec["warm"][0]["warnings"]
    cold, warm = rec["cold"][0], rec["warm"][0]
    assert cold["cache_recorded"] == 2 and cold["cache_hits"] == 0, cold  # two Linears measured, written
    assert warm["cache_hits"] == 2 and warm["cache_recorded"] == 0, warm  # both taken, none timed again
    assert rec["corrupt"]["cache_hits"] == 0 and rec["corrupt"]["cache_recorded"] == 2, rec["corrupt"]
    assert rec["corrupt"]["warnings"] and rec["corrupt"]["matches_eager"] and rec["corrupt_identical"]
    assert rec["cold_first_s"] > 0 and rec["warm_first_s"] > 0
    assert "| tiny_mlp | 2 |" in (tmp_path / "warm_start.md").read_text()
