"""Lowering: an ATen-level FX GraphModule → an `fxcpp._C.Graph`.

Every FX argument crosses into C++ through one table, `_CONSTANT_TYPES`, plus
three shapes: a Node becomes ("v", value id), a list/tuple becomes ("l", [...]),
any other supported Python value becomes ("c", value). The C++ side normalizes
ATen arguments against the op's schema (positional order, defaults).
"""
from __future__ import annotations

import functools
import math
import operator

import torch
import torch.fx as fx

from . import _C

# Python values that travel as constants. Anything else (a Generator, a complex,
# an arbitrary object) makes the node unsupported: it runs in the Interpreter.
_CONSTANT_TYPES = (
    type(None), bool, int, float, str,
    torch.dtype, torch.device, torch.layout, torch.memory_format,
    torch.Tensor,
)

# Python-level callables of ATen graphs that the core runs as prims (symbolic-size arithmetic).
_PRIMS = {
    operator.getitem: "prim::getitem",
    operator.add: "prim::add",
    operator.sub: "prim::sub",
    operator.mul: "prim::mul",
    operator.floordiv: "prim::floordiv",
    operator.mod: "prim::mod",
    operator.truediv: "prim::truediv",
    operator.neg: "prim::neg",
    operator.eq: "prim::eq",
    operator.ne: "prim::ne",
    operator.lt: "prim::lt",
    operator.le: "prim::le",
    operator.gt: "prim::gt",
    operator.ge: "prim::ge",
    torch.sym_max: "prim::sym_max",
    torch.sym_min: "prim::sym_min",
    torch.sym_not: "prim::sym_not",
    torch.sym_float: "prim::sym_float",
    torch.sym_int: "prim::sym_int",
    math.ceil: "prim::ceil",
    math.floor: "prim::floor",
    math.trunc: "prim::trunc",
    round: "prim::round",
    operator.pow: "prim::pow",
    operator.abs: "prim::abs",
    operator.pos: "prim::pos",
    operator.and_: "prim::and",
    operator.or_: "prim::or",
    operator.xor: "prim::xor",
    operator.lshift: "prim::lshift",
    operator.rshift: "prim::rshift",
    torch.sym_ite: "prim::sym_ite",
    torch.sym_sum: "prim::sym_sum",
}


class LoweringError(Exception):
    """A node the C++ core cannot take; the message names the node (and node_name holds it)."""

    def __init__(self, msg: str, node_name: str | None = None):
        super().__init__(msg)
        self.node_name = node_name


def op_target(op: torch._ops.OpOverload) -> str:
    """The dispatcher name of an OpOverload: "aten::add.Tensor", "aten::relu"."""
    s = op._schema
    return f"{s.name}.{s.overload_name}" if s.overload_name else s.name


def _arg_supported(a) -> bool:
    if isinstance(a, fx.Node):
        return True
    if isinstance(a, (list, tuple)):
        return all(_arg_supported(x) for x in a)
    return isinstance(a, _CONSTANT_TYPES)


def lower_arg(a, env: dict) -> tuple:
    if isinstance(a, fx.Node):
        vid = env[a]
        if isinstance(vid, list):  # a tuple-returning node used whole: pass its outputs as a list
            return ("l", [("v", v) for v in vid])
        return ("v", vid)
    if isinstance(a, (list, tuple)):
        return ("l", [lower_arg(x, env) for x in a])
    if isinstance(a, _CONSTANT_TYPES):
        return ("c", a)
    raise LoweringError(f"argument of type {type(a).__name__} cannot cross into C++")


def _is_multi_output(node: fx.Node) -> bool:
    return isinstance(node.target, torch._ops.OpOverload) and len(node.target._schema.returns) > 1


# Each prim's argument count, from the core's own table: a call with another count (round(x, 2),
# a float result) is not that prim, and runs in the Interpreter.
_PRIM_ARITY = _C.prim_arities()


def _prim_args(node: fx.Node) -> tuple:
    """A prim's args as the core takes them: round(x, None) is round(x)."""
    if node.target is round and len(node.args) == 2 and node.args[1] is None:
        return node.args[:1]
    return node.args


def is_supported(node: fx.Node) -> bool:
    """Can the C++ core run this node? (The partitioner's capability test.)"""
    if node.op != "call_function":
        return node.op in ("placeholder", "get_attr", "output")
    t = node.target
    if t is operator.getitem:
        src = node.args[0]
        return isinstance(src, fx.Node) and (src.op == "placeholder" or is_supported(src))
    if t in _PRIMS:
        args = _prim_args(node)
        return _arg_supported(args) and not node.kwargs and len(args) == _PRIM_ARITY[_PRIMS[t]]
    if isinstance(t, torch._ops.OpOverload):
        return _arg_supported(node.args) and _arg_supported(tuple(node.kwargs.values()))
    return False


def _dim(d):
    """A size or stride: an int, or the symbol's expression ("s0", "2*s0")."""
    if isinstance(d, torch.SymInt):
        c = d.node.maybe_as_int()
        return c if c is not None else _expr_str(d.node.expr)
    return int(d)


@functools.lru_cache(maxsize=4096)
def _expr_str(expr) -> str:
    """str(SymInt): sympy's printer, ~1 ms for a windowed model's padding expressions, and a
    graph repeats few expressions over its sizes and strides (Swin, dynamic: 1147 dims, 1.3 s
    of lowering, printed once each instead)."""
    return str(expr)


def _meta_of(val):
    """A FakeTensor (or real tensor) → (dtype, sizes, strides, device) for C++."""
    if not isinstance(val, torch.Tensor):
        return None
    strides = [_dim(s) for s in val.stride()] if val.layout == torch.strided else None
    return (val.dtype, [_dim(s) for s in val.shape], strides, val.device)


def _kind_of(val) -> str:
    if isinstance(val, torch.Tensor):
        return "Tensor"
    if isinstance(val, (bool, torch.SymBool)):
        return "bool"
    if isinstance(val, (int, torch.SymInt)):
        return "int"
    if isinstance(val, (float, torch.SymFloat)):
        return "float"
    if isinstance(val, (list, tuple)) and val and all(isinstance(v, torch.Tensor) for v in val):
        return "Tensor[]"
    return "any"


def _return_kind(ret) -> str:
    t = str(ret.type)
    if t.startswith("Tensor") and not t.startswith("Tensor[]"):
        return "Tensor"
    if t == "Tensor[]":
        return "Tensor[]"
    return {"int": "int", "SymInt": "int", "float": "float", "bool": "bool"}.get(t, "any")


def lower_graph(gm: fx.GraphModule, keep_meta: bool = True, static=frozenset(), graph=None) -> tuple[_C.Graph, dict]:
    """Build the C++ graph of `gm`. Returns (graph, env) where env maps FX nodes to value ids.

    static: the placeholder positions that hold the same tensor at every call (parameters
    and buffers): kernels may keep packed copies of them, and what is computed only from
    them is kept between calls. Unknown means none.
    keep_meta=False drops the traced metas of computed values (inputs keep theirs),
    so tests can check that shape propagation alone recomputes them.
    graph: build into this object instead of a new _C.Graph (fxcpp.save records the calls)."""
    g = _C.Graph() if graph is None else graph
    env: dict = {}
    position = 0
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        try:
            if node.op == "placeholder":
                is_static = isinstance(val, torch.Tensor) and position in static
                env[node] = g.add_input(node.name, _kind_of(val), _meta_of(val), is_static)
                position += 1
            elif node.op == "get_attr":
                env[node] = g.add_constant(node.name, _fetch_attr(gm, node.target))
            elif node.op == "call_function":
                env[node] = _lower_call(g, node, env, keep_meta)
            elif node.op == "output":
                outs = node.args[0]
                outs = outs if isinstance(outs, (list, tuple)) else (outs,)
                g.set_outputs([lower_arg(o, env) for o in outs])
            else:
                raise LoweringError(f"{node.op} nodes run in the Interpreter, not in the C++ core")
        except LoweringError as e:
            raise LoweringError(f"node '{node.name}' ({node.format_node()}): {e}", node.name) from None
        except RuntimeError as e:  # from C++: schema lookup, normalization
            raise LoweringError(f"node '{node.name}' ({node.format_node()}): {e}", node.name) from None
    return g, env


def _lower_call(g, node: fx.Node, env: dict, keep_meta: bool = True):
    t = node.target
    repr_ = node.format_node()
    if t is operator.getitem and isinstance(env.get(node.args[0]), list):
        return env[node.args[0]][node.args[1]]  # a tuple output: no node, just the value
    if t in _PRIMS:
        ids = g.add_node(node.name, _PRIMS[t], [lower_arg(a, env) for a in _prim_args(node)], {}, repr_,
                         [(_kind_of(node.meta.get("val")), _meta_of(node.meta.get("val")))])
        return ids[0]
    if not isinstance(t, torch._ops.OpOverload):
        raise LoweringError(f"target {t} is not a dispatcher op")
    rets = t._schema.returns
    val = node.meta.get("val") if keep_meta else None
    vals = list(val) if len(rets) > 1 and isinstance(val, (list, tuple)) else [val] * len(rets)
    outs = [(_return_kind(r), _meta_of(v) if _return_kind(r) == "Tensor" else None) for r, v in zip(rets, vals)]
    ids = g.add_node(node.name, op_target(t), [lower_arg(a, env) for a in node.args],
                     {k: lower_arg(v, env) for k, v in node.kwargs.items()}, repr_, outs)
    return ids if len(rets) > 1 else (ids[0] if ids else None)


def _fetch_attr(gm: fx.GraphModule, target: str):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, _CONSTANT_TYPES):
        raise LoweringError(f"get_attr {target} is a {type(obj).__name__}, not a tensor")
    return obj
