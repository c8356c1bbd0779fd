"""Peak memory of one model × configuration, alone in this process (the harness runs it).

    python -m benchmarks.memory '{"model": "mlp", "batch": 32, "dtype": "fp32", "device": "cpu", "config": "fxcpp"}'
Prints {"peak_rss_mb": ..., "cuda_max_alloc_mb": ...} as the last line.
"""
import json
import resource
import sys

import torch

from . import configs, suite
from .harness import DTYPES


def main() -> int:
    a = json.loads(sys.argv[1])
    import fxcpp  # noqa: F401

    spec = next(s for s in (suite.TINY if a.get("tiny") else suite.SUITE) if s.name == a["model"])
    model, inputs = spec.build(a["batch"])
    model, inputs = suite.to_dtype(model, inputs, DTYPES[a["dtype"]], a["device"])
    cfg = configs.CONFIGS[a["config"]]
    fn = cfg.compile(lambda *x: suite.call(spec, model, x))
    with torch.no_grad():
        with cfg.compile_context():
            fn(*inputs)
        for _ in range(5):
            fn(*inputs)
    out = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}  # Linux: KiB
    if a["device"] == "cuda":
        out["cuda_max_alloc_mb"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
