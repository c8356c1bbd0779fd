"""Every interpreter build (AVX-512, AVX2, the portable one) runs on this host: torch's own
ATEN_CPU_CAPABILITY picks a lower one, and the fused-kernel tests pass under each."""
import os
import subprocess
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def _capabilities():
    """The builds below the best this host runs: the rest of the suite runs the best one."""
    have = torch.backends.cpu.get_cpu_capability()
    caps = ["default"]
    if have == "AVX512":
        caps.append("avx2")
    return caps if have in ("AVX2", "AVX512") else []


@pytest.mark.parametrize("cap", _capabilities())
def test_fused_kernels_under_each_instruction_set(cap):
    env = dict(os.environ, ATEN_CPU_CAPABILITY=cap, FXCPP_RANDOM_GRAPHS="80")
    code = ("import torch, fxcpp\n"
            "with torch.no_grad():\n"
            "    r = fxcpp.explain(lambda x: torch.sigmoid(x * 2.0) + x, torch.randn(64, 64))\n"
            "print([row.impl for row in r.rows if row.impl][0])\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert f"cpu_fused {cap}" in out, out
    tests = [os.path.join(HERE, "test_cpu_fused.py"), os.path.join(HERE, "test_cpu_fused_random.py")]
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "fp32 or random or strided "
                        "or channels or empty or non_finite", *tests], env=env, capture_output=True, text=True,
                       cwd=os.path.dirname(HERE))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]


def test_the_best_build_is_the_one_this_process_runs():
    """The rest of the suite runs the build of the best instruction set torch dispatches to here."""
    import fxcpp

    have = torch.backends.cpu.get_cpu_capability().lower()  # "avx512", "avx2" or "default"
    with torch.no_grad():
        r = fxcpp.explain(lambda x: torch.sigmoid(x * 2.0) + x, torch.randn(64, 64))
    impl = [row.impl for row in r.rows if row.impl][0]
    assert f"cpu_fused {have}" in impl, impl
