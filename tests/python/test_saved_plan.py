"""fxcpp.save and the C++ runner (backend/saved_plan.py, csrc/tools/fxcpp_run.cpp): the test
builds fxcpp_run (LibTorch and fxcpp_core only), runs a saved CNN and a saved transformer
block without Python, and compares with Python's compiled call and eager; what the runner
cannot run is refused at save time with a clear error."""
import fcntl
import math
import os
import subprocess

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from fxcpp import _C
from helpers import assert_same

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("FXCPP_BUILD_DIR", os.path.join(REPO, "build")))


@pytest.fixture(scope="module")
def runner():
    if not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")):
        pytest.skip(f"fxcpp was not built from this checkout ({BUILD} has no CMake build)")
    # Under a lock: pytest-xdist workers each run this fixture, and one linking the binary while
    # another executes it fails with "Permission denied" (seen with -n 14 on the GPU machine).
    with open(os.path.join(BUILD, ".fxcpp_run.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["cmake", "--build", BUILD, "--target", "fxcpp_run", "-j", str(os.cpu_count() or 2)],
                       check=True, capture_output=True, timeout=1200)
    return os.path.join(BUILD, "fxcpp_run")


def _run(runner, plan, inputs, tmp_path):
    torch.save(list(inputs), tmp_path / "inputs.pt")
    p = subprocess.run([runner, str(plan), str(tmp_path / "inputs.pt"), str(tmp_path / "outputs.pt")],
                       capture_output=True, text=True, timeout=300, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    return p, (torch.load(tmp_path / "outputs.pt") if p.returncode == 0 else None)


def cnn():
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 16, 3, padding=1), nn.ReLU6(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


class Block(nn.Module):  # a pre-norm transformer block: attention written out, GELU MLP
    def __init__(self, d=64, heads=4):
        super().__init__()
        self.ln1, self.ln2, self.qkv, self.proj = nn.LayerNorm(d), nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2, self.heads = nn.Linear(d, 4 * d), nn.Linear(4 * d, d), heads

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


MODELS = {"cnn": (cnn, (2, 3, 16, 16)), "transformer_block": (Block, (2, 10, 64))}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_saved_plan_runs_in_cpp_as_in_python(name, runner, tmp_path):
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(shape)
    plan = tmp_path / f"{name}.fxcpp"
    torch._dynamo.reset()
    fxcpp.save(model, plan, x)
    x2 = torch.randn(shape)  # another input than the one it was saved with
    with torch.no_grad():
        torch._dynamo.reset()
        python_out = torch.compile(model, backend="fxcpp")(x2)
        eager = model(x2)
    p, outs = _run(runner, plan, [x2], tmp_path)
    assert p.returncode == 0, p.stderr
    assert isinstance(outs, tuple) and len(outs) == 1
    assert_same(eager, outs[0])
    assert_same(python_out, outs[0])
    assert_same(outs[0], _C.run_saved_plan(str(plan), [x2])[0])  # the same loader, from Python


def test_the_runner_says_what_is_wrong(runner, tmp_path):
    torch.manual_seed(0)
    model, x = cnn().eval(), torch.randn(2, 3, 16, 16)
    plan = tmp_path / "cnn.fxcpp"
    torch._dynamo.reset()
    fxcpp.save(model, plan, x)
    p, _ = _run(runner, plan, [x, x], tmp_path)
    assert p.returncode == 1 and "takes 1 inputs, got 2" in p.stderr, p.stderr
    bad = tmp_path / "bad.fxcpp"
    bad.write_bytes(plan.read_bytes()[:100])
    p, _ = _run(runner, bad, [x], tmp_path)
    assert p.returncode == 1 and "is not a file fxcpp.save wrote" in p.stderr, p.stderr
    torch.save({"format": "something else"}, tmp_path / "other.fxcpp")
    p, _ = _run(runner, tmp_path / "other.fxcpp", [x], tmp_path)
    assert p.returncode == 1 and "is not an fxcpp plan" in p.stderr, p.stderr
    p = subprocess.run([runner], capture_output=True, text=True)
    assert p.returncode == 2 and "usage" in p.stderr


@torch.library.custom_op("fxcpp_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x):
    return torch.empty_like(x)


def test_what_the_runner_cannot_run_is_refused_at_save(tmp_path):
    def breaks(x):
        y = x.relu()
        torch._dynamo.graph_break()
        return y + 1

    def python_op(x):
        return twice(x) + 1

    x = torch.randn(4, 4)
    for fn, message in [(breaks, "a graph break"), (python_op, "fxcpp_test::twice")]:
        torch._dynamo.reset()
        with pytest.raises(fxcpp.FxcppSaveError, match=message):
            fxcpp.save(fn, tmp_path / "f.fxcpp", x)
    if torch.cuda.is_available():
        with pytest.raises(fxcpp.FxcppSaveError, match="CPU plans"):
            fxcpp.save(lambda t: t + 1, tmp_path / "f.fxcpp", x.cuda())


def two_inputs(a, b):  # Dynamo orders its inputs by first use: b before a
    return b * 2.0 + a.relu()


def test_inputs_are_the_callers_arguments_in_order(runner, tmp_path):
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    plan = tmp_path / "two.fxcpp"
    torch._dynamo.reset()
    fxcpp.save(two_inputs, plan, a, b)
    a2, b2 = torch.randn(3, 4), torch.randn(3, 4)
    p, outs = _run(runner, plan, [a2, b2], tmp_path)
    assert p.returncode == 0, p.stderr
    assert_same(two_inputs(a2, b2), outs[0])


def test_a_model_that_writes_its_buffers_is_refused(tmp_path):
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()  # running stats written each call
    torch._dynamo.reset()
    with pytest.raises(fxcpp.FxcppSaveError, match="writes to an input or a buffer"):
        fxcpp.save(model, tmp_path / "bn.fxcpp", torch.randn(2, 3, 8, 8))
