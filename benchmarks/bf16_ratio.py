"""bf16 against fp32 per model from harness runs (issue 10's target): one markdown table.

    python -m benchmarks.bf16_ratio benchmarks/results/dense-native-bf16 benchmarks/results/dense-avx2-emulated
"""
import json
import sys
from pathlib import Path


def ratios(run_dir: Path) -> dict:
    recs = json.loads((run_dir / "results.json").read_text())["records"]
    ms = {(r["model"], r["batch"], r["dtype"], r["config"]): r["latency_ms_median"]
          for r in recs if r["status"] == "ok" and r["accuracy_ok"]}
    out = {}
    for (model, batch, dtype, config), t in ms.items():
        if dtype == "bf16" and (model, batch, "fp32", config) in ms:
            out[(model, batch, config)] = (ms[(model, batch, "fp32", config)], t)
    return out


def main(argv) -> str:
    runs = [Path(a) for a in argv]
    rs = [ratios(r) for r in runs]
    keys = sorted({(m, b) for r in rs for (m, b, _) in r})
    head = "| model | batch | " + " | ".join(
        f"{r.name}: eager fp32 / bf16 ms | {r.name}: fxcpp fp32 / bf16 ms | {r.name}: fxcpp bf16 / fp32"
        for r in runs) + " |"
    lines = [head, "|---|---|" + "---|---|---|" * len(runs)]
    for m, b in keys:
        cells = []
        for r in rs:
            e, f = r.get((m, b, "eager")), r.get((m, b, "fxcpp"))
            cells += [f"{e[0]:.2f} / {e[1]:.2f}" if e else "", f"{f[0]:.2f} / {f[1]:.2f}" if f else "",
                      f"{f[1] / f[0]:.2f}" if f else ""]
        lines.append(f"| {m} | {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(main(sys.argv[1:]), end="")
