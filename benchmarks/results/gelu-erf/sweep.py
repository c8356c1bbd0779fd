"""Every float in [-10, 10] (2.2e9 values) through cpu_fused's GELU, per build, and through eager's
F.gelu, against an fp64 GELU: the largest absolute and relative error in each band of x. Each
build in its own process (installed copies of the package, as ab.py takes them):

    python benchmarks/results/gelu-erf/sweep.py /tmp/ab/old /tmp/ab/new > benchmarks/results/gelu-erf/sweep.txt
"""
import json
import os
import sys

BANDS = [-10, -5, -3, -2, -1, 0, 1, 2, 3, 5, 10]
CHUNK = 1 << 24


def child(with_eager: bool):
    import torch
    import torch.nn.functional as F

    import fxcpp

    torch.set_num_threads(2)
    fn = torch.compile(lambda x: F.gelu(x.neg()), backend="fxcpp", dynamic=False)
    edges = torch.tensor(BANDS, dtype=torch.float64)
    worst = {k: torch.zeros(len(BANDS) - 1, dtype=torch.float64) for k in ("fxcpp_abs", "fxcpp_rel", "eager_abs", "eager_rel")}
    with torch.no_grad():
        for sign in (1, -1):
            for start in range(0, 0x41200000 + 1, CHUNK):  # bit patterns of [0, 10]
                bits = torch.arange(start, start + CHUNK, dtype=torch.int64).clamp_(max=0x41200000).to(torch.int32)
                y = bits.view(torch.float32) * sign
                outs = {"fxcpp": fn(y.neg())}
                if with_eager:
                    outs["eager"] = F.gelu(y)
                yd = y.double()
                ref = 0.5 * yd * (1 + torch.erf(yd / 2**0.5))
                band = (torch.bucketize(yd, edges, right=True) - 1).clamp_(0, len(BANDS) - 2)
                for name, got in outs.items():
                    err = (got.double() - ref).abs()
                    rel = torch.where(ref.abs() > 1e-37, err / ref.abs(), torch.zeros_like(err))
                    for key, e in ((f"{name}_abs", err), (f"{name}_rel", rel)):
                        m = torch.zeros(len(BANDS) - 1, dtype=torch.float64).scatter_reduce_(0, band, e, "amax")
                        worst[key] = torch.maximum(worst[key], m)
    print(json.dumps({"fxcpp_from": os.path.dirname(fxcpp.__file__), **{k: v.tolist() for k, v in worst.items()}}))


def main():
    builds = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    from benchmarks.ab_installs import outputs_per_install

    res = outputs_per_install(__file__, builds, "benchmarks/results/gelu-erf/sweep.py " + " ".join(builds))
    first = res[os.path.basename(builds[0])]
    cols = [("eager", first["eager_abs"], first["eager_rel"])] + [(n, r["fxcpp_abs"], r["fxcpp_rel"]) for n, r in res.items()]
    print("largest absolute error | largest relative error, per band of x (every float in it)")
    print(f"{'band':<10}" + "".join(f"{n + ' abs':>13}" for n, _, _ in cols) + "".join(f"{n + ' rel':>13}" for n, _, _ in cols))
    for k in range(len(BANDS) - 1):
        print(f"{f'[{BANDS[k]},{BANDS[k + 1]})':<10}" + "".join(f"{a[k]:13.3g}" for _, a, _ in cols)
              + "".join(f"{r[k]:13.3g}" for _, _, r in cols))


if __name__ == "__main__":
    child(sys.argv[2:] == ["eager"]) if sys.argv[1:2] == ["--child"] else main()
