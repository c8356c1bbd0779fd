"""Phase 2 of run_suite_resumable.sh: run, in tests/, every collected test that $DONE_LOG does not
list (the ones phase 1's time limit cut off), with the same options as phase 1."""
import os
import subprocess
import sys

import pytest

opts = sys.argv[1:]
done = set()
with open(os.environ["DONE_LOG"]) as f:
    for line in f:
        done.add(line.rstrip("\n").split(" ", 1)[1])
collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
                           + [o for o in opts if o.startswith("--ignore") or o.startswith("--deselect")],
                           capture_output=True, text=True).stdout.splitlines()
ids = [c for c in collected if "::" in c and c not in done]
print(f"{len(done)} done in phase 1, {len(ids)} left of {sum('::' in c for c in collected)} collected", flush=True)
sys.exit(pytest.main(ids + opts) if ids else 0)
