"""Thin setup: CMake builds fxcpp._C; backend/ installs as the package `fxcpp`.

Build with `pip install --no-build-isolation .` so the installed torch is used
(an isolated build environment would pull another torch).
"""
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _dnnl_cmake_dir() -> str:
    """Where the onednn-devel wheel put dnnl-config.cmake (<prefix>/lib/cmake/dnnl; the prefix
    is the base Python's when a venv sees system packages)."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        dist = distribution("onednn-devel-cpu-gomp")
        for f in dist.files or []:
            if f.name == "dnnl-config.cmake":
                return os.path.dirname(os.path.abspath(dist.locate_file(f)))
    except PackageNotFoundError:
        pass
    return os.path.join(sys.prefix, "lib", "cmake", "dnnl")


def _loaded_library(name: str) -> str:
    """The path of a shared library this process has mapped ("" if none)."""
    try:
        with open("/proc/self/maps") as f:
            return next((line.split()[-1] for line in f if name in line and "/" in line), "")
    except OSError:
        return ""


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        import torch

        out_dir = os.path.abspath(os.path.dirname(self.get_ext_fullpath(ext.name)))
        build_dir = os.path.abspath(os.environ.get("FXCPP_BUILD_DIR", "build"))
        os.makedirs(build_dir, exist_ok=True)
        cfg = os.environ.get("FXCPP_BUILD_TYPE", "Release")
        torch_dir = os.path.dirname(torch.__file__)
        libstdcxx = _loaded_library("libstdc++.so")  # the one torch runs on (CMakeLists.txt says why)
        subprocess.check_call(
            [
                "cmake",
                os.path.abspath(os.path.dirname(__file__)),
                f"-DCMAKE_BUILD_TYPE={cfg}",
                f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out_dir}",
                f"-DTORCH_DIR={torch_dir}",
                f"-DTORCH_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
                f"-DPython_EXECUTABLE={sys.executable}",
                f"-Ddnnl_DIR={_dnnl_cmake_dir()}",
                f"-DFXCPP_WITH_ONEDNN={'OFF' if os.environ.get('FXCPP_ONEDNN') == '0' else 'ON'}",
                f"-DFXCPP_TORCH_LIBSTDCXX={libstdcxx}",
                f"-DFXCPP_SANITIZE={'ON' if os.environ.get('FXCPP_SANITIZE') == '1' else 'OFF'}",
            ],
            cwd=build_dir,
        )
        jobs = os.environ.get("FXCPP_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", ".", "--target", "_C", "-j", jobs], cwd=build_dir)


setup(
    name="fxcpp",
    version="0.1.0",
    description="A torch.compile backend with a C++ core",
    packages=["fxcpp"],
    package_dir={"fxcpp": "backend"},
    ext_modules=[CMakeExtension("fxcpp._C")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.10",
    # No install_requires on torch: pip would resolve a CUDA build. The Makefile pins torch.
    entry_points={"torch_dynamo_backends": ["fxcpp = fxcpp:backend"]},
)
