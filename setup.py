"""Thin setup: CMake builds fxcpp._C; backend/ installs as the package `fxcpp`.

Build with `pip install --no-build-isolation .` so the installed torch is used
(an isolated build environment would pull another torch).
"""
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


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
        subprocess.check_call(
            [
                "cmake",
                os.path.abspath(os.path.dirname(__file__)),
                f"-DCMAKE_BUILD_TYPE={cfg}",
                f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out_dir}",
                f"-DTORCH_DIR={torch_dir}",
                f"-DTORCH_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
                f"-DPython_EXECUTABLE={sys.executable}",
                # The onednn-devel wheel puts its CMake config under <prefix>/lib/cmake/dnnl.
                f"-Ddnnl_DIR={os.path.join(sys.prefix, 'lib', 'cmake', 'dnnl')}",
                f"-DFXCPP_WITH_ONEDNN={'OFF' if os.environ.get('FXCPP_ONEDNN') == '0' else 'ON'}",
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
