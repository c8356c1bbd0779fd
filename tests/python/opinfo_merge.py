"""Adds up the per-op JSON of several OpInfo sweep shards (FXCPP_OPINFO_SHARD=i/n, each with its
own FXCPP_OPINFO_JSON) and prints the sweep's report and every failing op.

    python tests/python/opinfo_merge.py --full merged.json shard0.json shard1.json ...
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--full", action="store_true", help="the shards ran with FXCPP_OPINFO_FULL=1")
    p.add_argument("out")
    p.add_argument("shards", nargs="+")
    args = p.parse_args()
    merged: dict = {}
    for path in args.shards:
        with open(path) as f:
            part = json.load(f)
        overlap = merged.keys() & part.keys()
        assert not overlap, f"{path} repeats ops of an earlier shard: {sorted(overlap)[:5]}"
        merged.update(part)
    from test_opinfo_sweep import summary  # imports torch's op_db: after the arguments are checked
    lines, _, _ = summary(merged, full=args.full)
    failing = sorted(k for k, r in merged.items() if r["status"] == "failed")
    lines += [f"  failing ops ({len(failing)}):"] + [
        f"    {k}{' (known)' if merged[k]['xfail'] else ''}: {merged[k]['error']}" for k in failing]
    print("\n".join(lines))
    with open(args.out, "w") as f:
        json.dump(merged, f, indent=1, sort_keys=True)
    return 1 if any(not merged[k]["xfail"] for k in failing) else 0


if __name__ == "__main__":
    sys.exit(main())
