"""Every positive float32 (2.1e9 values; tanh_exp.h puts the sign back last, so the negative ones
mirror them) through cpu_fused's tanh, per build, and through eager's torch.tanh (MKL's VML in
this torch), against tanh in fp64: the largest and the mean error in ulps in each band of x.
Each build in its own process (installed copies of the package, as ab.py takes them):

    python benchmarks/results/tanh-exp/sweep.py /tmp/ab/before /tmp/ab/after > benchmarks/results/tanh-exp/sweep.txt
"""
import json
import os
import sys

BANDS = [0, 1e-3, 0.25, 0.5, 0.75, 1, 1.5, 3, 6, 9.1, float("inf")]
CHUNK = 1 << 24


def child(with_eager: bool):
    import torch

    import fxcpp

    torch.set_num_threads(2)
    fn = torch.compile(lambda x: torch.tanh(x.neg()), backend="fxcpp", dynamic=False)
    edges = torch.tensor(BANDS, dtype=torch.float64)
    nb = len(BANDS) - 1
    acc = {f"{n}_{k}": torch.zeros(nb, dtype=torch.float64) for n in ("fxcpp", "eager") for k in ("max", "sum")}
    count = torch.zeros(nb, dtype=torch.float64)
    with torch.no_grad():
        for start in range(0, 0x7F800000, CHUNK):
            bits = torch.arange(start, start + CHUNK, dtype=torch.int64).clamp_(max=0x7F7FFFFF).to(torch.int32)
            y = bits.view(torch.float32)
            outs = {"fxcpp": fn(y.neg())}
            if with_eager:
                outs["eager"] = torch.tanh(y)
            exact = torch.tanh(y.double())
            ref = exact.float()
            ulp = (torch.nextafter(ref, torch.tensor(float("inf"))) - ref).double()
            ulp = torch.where(ref == 0, torch.full_like(ulp, 2.0**-149), ulp)
            band = (torch.bucketize(y.double(), edges, right=True) - 1).clamp_(0, nb - 1)
            count += torch.bincount(band, minlength=nb).double()
            for name, got in outs.items():
                u = (got.double() - exact).abs() / ulp
                acc[f"{name}_max"] = torch.maximum(acc[f"{name}_max"], torch.zeros(nb, dtype=torch.float64).scatter_reduce_(0, band, u, "amax"))
                acc[f"{name}_sum"] += torch.zeros(nb, dtype=torch.float64).scatter_add_(0, band, u)
    print(json.dumps({"fxcpp_from": os.path.dirname(fxcpp.__file__), "count": count.tolist(), **{k: v.tolist() for k, v in acc.items()}}))


def main():
    builds = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    from benchmarks.ab_installs import outputs_per_install

    res = outputs_per_install(__file__, builds, "benchmarks/results/tanh-exp/sweep.py " + " ".join(builds))
    first = res[os.path.basename(builds[0])]
    n = first["count"]
    cols = [("eager", first["eager_max"], first["eager_sum"])] + [(k, r["fxcpp_max"], r["fxcpp_sum"]) for k, r in res.items()]
    print("error in ulps of tanh(x), per band of x (every positive float in it): largest | mean")
    print(f"{'band':<13}" + "".join(f"{c + ' max':>13}" for c, _, _ in cols) + "".join(f"{c + ' mean':>13}" for c, _, _ in cols))
    for k in range(len(BANDS) - 1):
        print(f"{f'[{BANDS[k]:g},{BANDS[k + 1]:g})':<13}" + "".join(f"{m[k]:13.3f}" for _, m, _ in cols)
              + "".join(f"{s[k] / n[k]:13.4f}" for _, _, s in cols))


if __name__ == "__main__":
    child(sys.argv[2:] == ["eager"]) if sys.argv[1:2] == ["--child"] else main()
