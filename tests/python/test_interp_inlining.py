"""The cpu_fused interpreter's vector loops keep their per-vector calls inline (runtime/cpu/interp.h).

A transcendental that GCC leaves out of line costs one call per pair of vectors, with the pair
passed and returned through the stack: the fused tanh took 1.9x its inlined time that way on an
AVX2 host (benchmarks/results/inline-pair-lambdas/). Speed is for benchmarks, but this is a
structural fact of the built library: no function of the AVX2 or AVX-512 interpreter takes a
VecPair, read from its symbol table (`nm -C`, which GCC's binutils install).
"""
import os
import re
import shutil
import subprocess

import pytest

import fxcpp

# A demangled function whose own parameter list names a VecPair: `...(fxcpp::cpu::AVX2::VecPair const&) const`.
_TAKES_PAIR = re.compile(r"\([^()]*fxcpp::cpu::(AVX2|AVX512)::VecPair[^()]*\)( const)?( \[clone [^]]*\])*$")


def _library() -> str:
    return fxcpp._C.__file__


def _compiler() -> str:
    """The compilers that built the library, from its .comment section (the check is tuned on GCC 12,
    and the H200 machine's build failed it on 2026-11-30 with a compiler not yet named there)."""
    if shutil.which("readelf") is None:
        return "unknown (no readelf)"
    out = subprocess.run(["readelf", "-p", ".comment", _library()], capture_output=True, text=True).stdout
    return "; ".join(sorted({m.strip() for m in re.findall(r"\]\s+(.*)", out)})) or "unknown"


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm to read the symbol table")
def test_no_vector_pair_call_out_of_line():
    out = subprocess.run(["nm", "-C", _library()], capture_output=True, text=True, check=True).stdout
    code = [line for line in out.splitlines() if re.match(r"^[0-9a-f]+ [tTwW] ", line)]
    assert len(code) > 1000, "the symbol table looks empty: the check would pass vacuously"
    isa_code = [line for line in code if "fxcpp::cpu::AVX2::" in line or "fxcpp::cpu::AVX512::" in line]
    assert isa_code, "no AVX2 or AVX-512 interpreter symbols found"
    out_of_line = [line for line in isa_code if _TAKES_PAIR.search(line)]
    assert not out_of_line, f"built by {_compiler()}:\n" + "\n".join(line[:400] for line in out_of_line[:5])


def test_pattern_finds_a_pair_call():
    # The pattern itself, on the symbol the AVX2 build had before the fix (abridged).
    before = ("00000000001fc430 t auto fxcpp::cpu::AVX2::eval_op<...>(...)::{lambda(auto:1)#12}::"
              "operator()<fxcpp::cpu::AVX2::VecPair>(fxcpp::cpu::AVX2::VecPair) const [clone .isra.0]")
    assert _TAKES_PAIR.search(before)
    one_vector = ("00000000001fc330 t auto fxcpp::cpu::AVX2::eval_op<...>(...)::{lambda(auto:1)#3}::"
                  "operator()<at::vec::AVX2::Vectorized<float> >(at::vec::AVX2::Vectorized<float>) const [clone .isra.0]")
    assert not _TAKES_PAIR.search(one_vector)
    assert os.path.exists(_library())
