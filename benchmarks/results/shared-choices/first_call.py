"""Time to first result of one suite model compiled with fxcpp in a fresh process, with the choice
cache off (FXCPP_CACHE=0: every first-call choice measured in this process), for ab.sh.
Usage: python first_call.py MODEL BATCH DTYPE   (DTYPE: float32, bfloat16)
Prints one line: model, batch, dtype, the first compiled call (s: Dynamo, aot_autograd, fxcpp's
compile, weight packing, first-call choices and the call itself), the second call (s), how many
oneDNN/attention nodes measured and how many took a sibling's choice, and which fxcpp ran."""
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
os.environ["FXCPP_CACHE"] = "0"
import torch  # noqa: E402

import fxcpp  # noqa: E402
from fxcpp.explain import Report, recording  # noqa: E402
from benchmarks import suite  # noqa: E402


def main():
    name, batch, dt = sys.argv[1], int(sys.argv[2]), getattr(torch, sys.argv[3])
    torch.manual_seed(0)
    torch.set_num_threads(2)
    ((spec, _),) = suite.find([name], quick=False)[:1]
    model, inputs = suite.to_dtype(*spec.build(batch), dt, "cpu")
    with torch.no_grad():
        ref = suite.call(spec, model, inputs)
        c = torch.compile(model, backend="fxcpp")
        graphs = []
        with recording(graphs):
            t = time.perf_counter()
            out = suite.call(spec, c, inputs)
            first = time.perf_counter() - t
        t = time.perf_counter()
        suite.call(spec, c, inputs)
        second = time.perf_counter() - t
    impls = [r.impl for r in Report(graphs).rows if r.kernel == "onednn" and r.impl]
    measured = sum(bool(re.search(r"measured \d+ us vs ", i)) for i in impls)
    shared = sum("measured (" in i and "the same" in i for i in impls)
    a, b = (ref[0] if isinstance(ref, (tuple, list)) else ref), (out[0] if isinstance(out, (tuple, list)) else out)
    a = getattr(a, "logits", getattr(a, "last_hidden_state", a))
    b = getattr(b, "logits", getattr(b, "last_hidden_state", b))
    diff = (a.double() - b.double()).abs().max().item()
    print(f"{name} {batch} {sys.argv[3]} first {first:.3f} second {second:.3f} measured {measured} shared {shared} "
          f"maxdiff {diff:.3g} fxcpp {os.path.dirname(fxcpp.__file__)}", flush=True)


if __name__ == "__main__":
    main()
