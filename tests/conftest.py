import os
import sys

import pytest
import torch

# Tests import the installed package `fxcpp`, never the source folder.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Each test starts with empty Dynamo caches, so recompile limits never leak between tests."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
