"""Symbolic-size arithmetic in ATen graphs (the Python-level nodes Dynamo and aot_autograd leave
for SymInt/SymFloat/SymBool math: operator.*, math.*, round, torch.sym_*): the core runs each as a
prim with Python's semantics, so a dynamic graph computing sizes stays whole in C++."""
import itertools
import math
import operator

import pytest
import torch
import torch.fx as fx
from fxcpp.explain import Report, recording
from fxcpp.lowering import _PRIMS, is_supported, lower_graph

from fxcpp import _C

UNARY = [operator.neg, operator.abs, operator.pos, math.ceil, math.floor, math.trunc, round,
         torch.sym_float, torch.sym_int, torch.sym_not]
BINARY = [operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.truediv,
          operator.pow, operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
          operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift,
          torch.sym_max, torch.sym_min]
INTS = [-7, -2, -1, 0, 1, 3, 8]
FLOATS = [-2.5, -0.5, 0.5, 1.5, 2.5, 3.0, float("inf"), float("-inf"), float("nan")]
BOOLS = [False, True]


def _run_prim(fn, *values):
    """fn(*values) as one prim node of a lowered graph, run by the C++ executor."""
    graph = fx.Graph()
    args = []
    for i, v in enumerate(values):
        p = graph.placeholder(f"a{i}")
        p.meta["val"] = v
        args.append(p)
    out = graph.call_function(fn, tuple(args) if fn is not torch.sym_sum else (args,))
    graph.output((out,))
    g, _ = lower_graph(fx.GraphModule(torch.nn.Module(), graph))
    return _C.Executable(g).run(list(values))[0]


def _python(fn, *values):
    try:
        return fn(*values)
    except (ArithmeticError, ValueError, TypeError) as e:
        return e


def _cases(fn, arity):
    if fn in (torch.sym_not,):
        return [(b,) for b in BOOLS]
    if fn in (operator.and_, operator.or_, operator.xor):
        return list(itertools.product(INTS, repeat=2)) + list(itertools.product(BOOLS, repeat=2))
    if fn in (operator.lshift, operator.rshift):
        return list(itertools.product(INTS, repeat=2))
    pool = INTS + FLOATS + ([True] if arity == 1 else [])
    return [(v,) for v in pool] if arity == 1 else list(itertools.product(pool, repeat=2))


def test_every_python_callable_of_the_lowering_is_tested_here():
    tested = set(UNARY) | set(BINARY) | {torch.sym_ite, torch.sym_sum, operator.getitem}
    assert set(_PRIMS) == tested, set(_PRIMS) ^ tested
    assert set(_PRIMS.values()) <= set(_C.prim_arities()), set(_PRIMS.values()) - set(_C.prim_arities())


@pytest.mark.parametrize("fn", UNARY + BINARY, ids=lambda f: getattr(f, "__name__", str(f)))
def test_prim_matches_python(fn):
    arity = 1 if fn in UNARY else 2
    checked = 0
    for values in _cases(fn, arity):
        expected = _python(fn, *values)
        if isinstance(expected, Exception) or isinstance(expected, complex):
            # Python raises (division by zero, a negative shift) or gives a complex: the core raises too.
            with pytest.raises(Exception):
                _run_prim(fn, *values)
            continue
        got = _run_prim(fn, *values)
        assert type(got) is type(expected), (fn, values, got, expected)
        if isinstance(expected, float) and math.isnan(expected):
            assert math.isnan(got), (fn, values, got)
        else:
            assert got == expected, (fn, values, got, expected)
        checked += 1
    assert checked > 0


def test_round_is_half_to_even_and_ite_sum_take_their_arity():
    assert [_run_prim(round, v) for v in (0.5, 1.5, 2.5, -0.5, -1.5)] == [0, 2, 2, 0, -2]
    assert _run_prim(torch.sym_ite, True, 3, 4) == 3 and _run_prim(torch.sym_ite, False, 3, 4) == 4
    assert _run_prim(torch.sym_sum, 1, 2, 3) == 6 and type(_run_prim(torch.sym_sum, 1, 2, 3)) is int
    assert _run_prim(torch.sym_sum, 1, 2.5) == 3.5
    with pytest.raises(Exception, match="overflow"):
        _run_prim(operator.pow, 3, 60)  # exact in Python (a big int), beyond any size
    with pytest.raises(Exception, match="overflow"):
        _run_prim(operator.lshift, 1, 63)


def test_a_prim_called_with_another_arg_count_is_left_to_the_interpreter():
    # round(x, 2) is a float, not the core's one-argument round; the arity comes from the core.
    graph = fx.Graph()
    a = graph.placeholder("a")
    r1, r2 = graph.call_function(round, (a, None)), graph.call_function(round, (a, 2))
    s1, s2 = graph.call_function(operator.add, (a, 1)), graph.call_function(operator.add, (a, 1, 2))
    graph.output((r1, r2, s1, s2))
    assert is_supported(r1) and not is_supported(r2)
    assert is_supported(s1) and not is_supported(s2)


def _sizes(x, y):
    n, m = x.shape[0], y.shape[0]
    ones = x.new_ones(n ** 2 + (n >> 1) + (m << 2) + (n ^ m) + (n & m) + (n | 1))
    cat = torch.cat([x, y, x, y])  # n + m + n + m: torch.sym_sum
    scale = ones.sum() * cat.shape[0] + round(n / 3) + math.trunc(m / 2) + abs(n - 2 * m)
    return cat * scale, torch.full((n ** 3,), 1.0) * (n % m)


def test_a_dynamic_graph_computing_sizes_runs_whole_in_the_core():
    compiled = torch.compile(_sizes, backend="fxcpp", dynamic=True)
    graphs = []
    for n, m in [(5, 3), (7, 4), (9, 2), (6, 11)]:
        x, y = torch.randn(n), torch.randn(m)
        with recording(graphs):
            got = compiled(x, y)
        for g, r in zip(got, _sizes(x, y), strict=True):
            assert g.shape == r.shape and torch.equal(g, r), (n, m)
    assert len(graphs) == 1  # one symbolic graph for every size
    report = Report(graphs)
    assert report.fallbacks == [] and report.kernel_counts["interpreter"] == 0, report.kernel_counts
