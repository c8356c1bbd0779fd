"""After / before of narrow_block_time.py's runs (each shape's default time averaged over the runs
of each build; eager averaged over all four), as in README's N-row-block section.

    python benchmarks/results/narrow-n-gemv/narrow_block_ab.py   # narrow_block_ab_zen5.txt
    python benchmarks/results/narrow-n-gemv/narrow_block_ab.py narrow_tail_time   # narrow_tail_ab_zen5.txt"""
import pathlib
import re
import statistics
import sys

here = pathlib.Path(__file__).parent


def load(name):
    rows = {}
    for line in (here / name).read_text().splitlines():
        m = re.match(r"\s*(\d+)\s+(\d+)\s+(\d+) \|\s+([\d.]+)\s+([\d.]+) us", line)
        if m:
            rows[tuple(map(int, m.groups()[:3]))] = (float(m[4]), float(m[5]))
    return rows


prefix = sys.argv[1] if len(sys.argv) > 1 else "narrow_block_time"
before = [load(f"{prefix}_zen5_before_run{i}.txt") for i in (1, 2)]
after = [load(f"{prefix}_zen5_after_run{i}.txt") for i in (1, 2)]
print(f"{'M':>5} {'K':>5} {'N':>2} | {'before':>8} {'after':>8} {'eager':>8} us | after/before | after/eager")
for key in before[0]:
    b = statistics.mean(r[key][0] for r in before)
    a = statistics.mean(r[key][0] for r in after)
    e = statistics.mean(r[key][1] for r in before + after)
    print(f"{key[0]:>5} {key[1]:>5} {key[2]:>2} | {b:>8.1f} {a:>8.1f} {e:>8.1f} us | {a / b:>12.2f} | {a / e:>11.2f}")
