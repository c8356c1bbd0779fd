"""Random torch programs for the fuzzer, from a small grammar of what fxcpp lowers or fuses:
convolutions (+ BatchNorm, pooling), linears and matmuls, their post-ops, pointwise chains
with broadcasting, reductions, softmax / layer_norm / RMSNorm, views, slices, cat, in-place
ops on intermediates, several outputs, and outputs that alias an input. Shapes include size-1
and (rarely) empty dims; inputs may be transposed views or channels-last; fp32, bf16, fp16.

Grammar 2 (`generate(seed, grammar=2)`) adds what transformers and modern CNNs write out op
by op: casts to fp32 (`up`, which leaves the fp64 reference fp64) and back (T5's norm),
reductions over other dims and var/std, a squeeze-excite gate, per-channel affine on 4-d
values, rotary embeddings, gated MLPs, masked softmax (whole rows masked included), a matmul
with an untransposed weight, addmm and baddbmm, column broadcasts from a slice, more unary and
binary ops, layer_norm without affine, group_norm, dilated convolutions, avg-pool and nearest
upsampling, and a second input of a lower rank that broadcasts. Grammar 1's seeds make the
programs they always made. Grammar 3 adds reductions and softmax over other dims than the
last; grammar 4 adds scaled_dot_product_attention as transformers call it (heads split from a
3-d value through strided views, or a 4-d value as it is; keys and values the same, derived or
a shorter slice; no mask, an additive or boolean mask, causal; the default or another scale).

A program is data (statements over named values), so the fuzzer can shrink it; `source()`
writes it as a standalone module that a reproducer file holds as it is.
"""
from __future__ import annotations

import dataclasses
import random
import re

DTYPES = {"fp32": "torch.float32", "bf16": "torch.bfloat16", "fp16": "torch.float16"}


@dataclasses.dataclass
class Stmt:
    name: str
    expr: str  # may read earlier values and self.pN parameters
    deps: list[str]
    shape: tuple
    after: str = ""  # an in-place statement on the new value, run right after it


@dataclasses.dataclass
class Program:
    seed: int
    dtype: str
    inputs: list[tuple[str, tuple, str]]  # name, shape, layout: contiguous | transposed | channels_last
    params: dict[str, tuple[tuple, str]]  # name -> (shape, init: randn | positive)
    stmts: list[Stmt]
    outputs: list[str]
    grammar: int = 1

    def describe(self) -> str:
        return f"seed {self.seed}{'' if self.grammar == 1 else f' grammar {self.grammar}'} {self.dtype}: " + "; ".join(f"{s.name} = {s.expr}" for s in self.stmts) + \
            f" -> {', '.join(self.outputs)}"

    def used_params(self) -> list[str]:
        used = set(re.findall(r"self\.(p\d+)\b", " ".join(s.expr for s in self.stmts)))
        return [p for p in self.params if p in used]

    def source(self) -> str:
        lines = ["import torch", "import torch.nn as nn", "import torch.nn.functional as F", "", ""]
        if self.grammar >= 2:  # .float(), except in the fp64 reference, which it would round to fp32
            lines += ["def up(t):", "    return t.to(torch.promote_types(t.dtype, torch.float32))", "", ""]
        lines += ["class Program(nn.Module):", "    def __init__(self):", "        super().__init__()",
                 f"        g = torch.Generator().manual_seed({self.seed})"]
        for p in self.used_params():
            shape, init = self.params[p]
            t = f"torch.randn({shape}, generator=g)"
            if init == "positive":
                t = f"(torch.rand({shape}, generator=g) + 0.5)"
            lines.append(f"        self.{p} = nn.Parameter({t} * 0.5)")
        args = ", ".join(n for n, _, _ in self.inputs)
        lines += ["", f"    def forward(self, {args}):"]
        for s in self.stmts:
            lines.append(f"        {s.name} = {s.expr}")
            if s.after:
                lines.append(f"        {s.after}")
        lines.append(f"        return ({', '.join(self.outputs)},)")
        lines += ["", "", "def make_inputs(dtype):", f"    g = torch.Generator().manual_seed({self.seed + 1})", "    xs = []"]
        for _, shape, layout in self.inputs:
            if layout == "transposed":  # a strided view: the last two dims swapped back
                sw = shape[:-2] + (shape[-1], shape[-2])
                lines.append(f"    xs.append(torch.randn({sw}, generator=g).to(dtype).transpose(-1, -2))")
            elif layout == "channels_last":
                lines.append(f"    xs.append(torch.randn({shape}, generator=g).to(dtype).to(memory_format=torch.channels_last))")
            else:
                lines.append(f"    xs.append(torch.randn({shape}, generator=g).to(dtype))")
        lines += ["    return xs", ""]
        return "\n".join(lines)


class _Gen:
    def __init__(self, seed: int, grammar: int = 1):
        self.r = random.Random(seed)
        self.seed = seed
        self.grammar = grammar
        self.upcast: set[str] = set()  # grammar 2: values cast to fp32 in a low-precision program
        self.params: dict[str, tuple[tuple, str]] = {}
        self.stmts: list[Stmt] = []
        self.vals: dict[str, tuple] = {}  # value -> shape

    def param(self, shape, init="randn") -> str:
        name = f"p{len(self.params)}"
        self.params[name] = (tuple(shape), init)
        return f"self.{name}"

    def dim(self) -> int:
        return self.r.choice([1, 2, 3, 5, 8, 16, 17, 32])

    def add(self, expr, deps, shape, after=""):
        name = f"v{len(self.stmts)}"
        if after:
            after = after.replace("{v}", name)
        self.stmts.append(Stmt(name, expr, list(deps), tuple(shape), after))
        self.vals[name] = tuple(shape)
        if any(d in self.upcast for d in deps) and not expr.endswith(".to(x0.dtype)"):
            self.upcast.add(name)  # fp32 in, fp32 out (or the same dtype again: a no-op cast later)
        return name

    def same_shaped(self, v: str) -> list[str]:
        """The other values of v's shape (a binary op's second operand)."""
        return [u for u, us in self.vals.items() if us == self.vals[v] and u != v]

    # One op on value v (shape s), chosen among those its shape allows.
    def step(self, v: str) -> None:
        s, r = self.vals[v], self.r
        nd = len(s)
        choices = ["unary", "unary", "binary", "binary", "scalar"]
        if nd >= 1:  # an empty last dim too: a reduction over a zero-length row (sum 0, mean NaN)
            choices += ["reduce", "softmax", "norm", "bcast_param"]
        if nd >= 1:
            choices += ["linear", "linear"]
        if nd >= 2:
            choices += ["view"]
        if nd == 3:
            choices += ["bmm"]
        if nd == 4:
            choices += ["conv", "conv", "bn", "pool"]
        choices += ["inplace"]
        if self.grammar >= 2:
            choices += self.choices_2(s)
        kind = r.choice(choices)
        if kind in self.KINDS_2:
            return self.step_2(kind, v)
        if kind in ("linear", "bmm", "conv", "bn", "norm", "bcast_param"):
            v = self.low(v, s)  # back to the program's dtype before a weight
        if kind == "unary":
            f = r.choice(["torch.relu({})", "F.gelu({})", "F.gelu({}, approximate='tanh')", "F.silu({})",
                          "torch.sigmoid({})", "torch.tanh({})", "F.hardswish({})", "F.leaky_relu({}, 0.1)",
                          "torch.exp({}.clamp(max=8.0))", "torch.log({}.abs() + 1.0)", "torch.sqrt({}.abs())",
                          "(-{})", "{}.abs()", "{}.clamp(-1.0, 2.0)", "F.relu6({})", "F.elu({})"])
            self.add(f.format(v), [v], s)
        elif kind == "scalar":
            c = r.choice([0.5, 2.0, -1.5, 3.0])
            f = r.choice(["({} * {})", "({} + {})", "({} - {})", "({} / {})"])
            self.add(f.format(v, c), [v], s)
        elif kind == "binary":
            same = self.same_shaped(v)
            u = r.choice(same) if same else v
            f = r.choice(["({} + {})", "({} * {})", "({} - {})", "torch.maximum({}, {})", "torch.minimum({}, {})",
                          "torch.where({0} > 0, {0}, {1})"])
            self.add(f.format(v, u), [v, u], s)
        elif kind == "bcast_param":
            p = self.param((s[-1],))
            f = r.choice(["({} + {})", "({} * {})"])
            self.add(f.format(v, p), [v], s)
        elif kind == "reduce":
            op = r.choice(["sum", "mean", "amax", "amin"] if s[-1] > 0 else ["sum", "mean"])  # eager's amax raises
            if r.random() < 0.6:  # used against the value itself: x - reduce(x)
                self.add(f"({v} - {v}.{op}(-1, keepdim=True))", [v], s)
            else:
                self.add(f"{v}.{op}(-1)", [v], s[:-1])
        elif kind == "softmax":
            f = r.choice(["torch.softmax({} * 0.5, -1)", "F.log_softmax({}, -1)", "torch.softmax({}, -1)"])
            self.add(f.format(v), [v], s)
        elif kind == "norm":
            if r.random() < 0.5:
                w, b = self.param((s[-1],)), self.param((s[-1],))
                self.add(f"F.layer_norm({v}, ({s[-1]},), {w}, {b})", [v], s)
            else:
                w = self.param((s[-1],))
                self.add(f"({v} * torch.rsqrt({v}.pow(2).mean(-1, keepdim=True) + 1e-6) * {w})", [v], s)
        elif kind == "linear":
            n = self.dim()
            w = self.param((n, s[-1]))
            b = self.param((n,)) if r.random() < 0.7 else "None"
            self.add(f"F.linear({v}, {w}, {b})", [v], s[:-1] + (n,))
        elif kind == "bmm":
            self.add(f"torch.matmul({v}, {v}.transpose(-1, -2))", [v], s[:-1] + (s[-2],))
        elif kind == "view":
            op = r.choice(["transpose", "merge", "slice", "cat"] + (["permute"] if nd == 4 else []))
            if op == "transpose":
                self.add(f"{v}.transpose(-1, -2)", [v], s[:-2] + (s[-1], s[-2]))
            elif op == "merge":
                self.add(f"{v}.reshape({s[:-2] + (s[-2] * s[-1],)})", [v], s[:-2] + (s[-2] * s[-1],))
            elif op == "slice":
                k = max(1, s[-1] // 2)
                self.add(f"{v}[..., :{k}]", [v], s[:-1] + (min(k, s[-1]),))
            elif op == "cat":
                self.add(f"torch.cat([{v}, {v} * 2.0], -1)", [v], s[:-1] + (2 * s[-1],))
            else:
                self.add(f"{v}.permute(0, 2, 3, 1)", [v], (s[0], s[2], s[3], s[1]))
        elif kind == "conv":
            c = s[1]
            k = r.choice([1, 3])
            stride = 2 if r.random() < 0.25 else 1
            depthwise = r.random() < 0.3 and c > 1
            oc = c if depthwise else self.dim()
            w = self.param((oc, 1 if depthwise else c, k, k))
            b = self.param((oc,)) if r.random() < 0.6 else "None"
            groups = c if depthwise else 1
            h = (s[2] + 2 * (k // 2) - k) // stride + 1
            wd = (s[3] + 2 * (k // 2) - k) // stride + 1
            self.add(f"F.conv2d({v}, {w}, {b}, {stride}, {k // 2}, 1, {groups})", [v], (s[0], oc, h, wd))
        elif kind == "bn":
            c = s[1]
            rm, rv = self.param((c,)), self.param((c,), "positive")
            w, b = self.param((c,)), self.param((c,))
            self.add(f"F.batch_norm({v}, {rm}, {rv}, {w}, {b}, False)", [v], s)
        elif kind == "pool":
            if s[2] >= 2 and s[3] >= 2 and r.random() < 0.5:
                self.add(f"F.max_pool2d({v}, 2)", [v], (s[0], s[1], s[2] // 2, s[3] // 2))
            else:
                self.add(f"F.adaptive_avg_pool2d({v}, 1)", [v], (s[0], s[1], 1, 1))
        else:  # in place on an intermediate the program owns
            f = r.choice(["{v}.mul_(0.5)", "{v}.add_(1.0)", "{v}.clamp_(min=-1.0)", "{v}.relu_()"])
            self.add(f"({v} * 1.5)", [v], s, after=f)


    # Grammar 2.
    KINDS_2 = ("unary_2", "binary_2", "upcast", "downcast", "t5_norm", "reduce_dim", "var", "se_gate",
               "per_channel", "rotary", "gated", "masked_softmax", "matmul_param", "addmm", "baddbmm",
               "col_bcast", "ln_plain", "group_norm", "conv_dilated", "avg_pool", "upsample", "bcast_input",
               "var_dim", "softmax_dim", "bn_stats",  # grammar 3
               "attention")  # grammar 4

    def choices_2(self, s) -> list[str]:
        nd = len(s)
        c = ["unary_2", "unary_2", "binary_2", "binary_2", "upcast", "downcast"]
        if nd >= 1:
            c += ["gated", "col_bcast", "t5_norm", "var", "masked_softmax", "matmul_param", "ln_plain"]
            if s[-1] >= 2 and s[-1] % 2 == 0:
                c += ["rotary"]
        if nd >= 2:
            c += ["reduce_dim"]
        if nd == 2:
            c += ["addmm"]
        if nd == 3:
            c += ["baddbmm"]
        if nd == 4:
            c += ["se_gate", "per_channel", "per_channel", "conv_dilated", "avg_pool", "upsample"]
            if s[1] % 2 == 0 and s[1] > 0:
                c += ["group_norm"]
        if self.grammar >= 3 and nd >= 2:  # reductions and softmax over other dims than the last
            c += ["var_dim", "softmax_dim"]
            if nd == 4:
                c += ["bn_stats"]
        if self.grammar >= 4 and nd in (3, 4):
            c += ["attention"] * 4
        b = self.vals.get("x1", ())
        if 0 < len(b) < nd and all(a in (1, d) for a, d in zip(b[::-1], s[::-1])):  # x1 broadcasts to s
            c += ["bcast_input", "bcast_input"]
        return c

    def low(self, v: str, s) -> str:
        """v in the program's dtype (a weight's): cast back where grammar 2 cast it up."""
        return self.add(f"{v}.to(x0.dtype)", [v], s) if v in self.upcast else v

    def step_2(self, kind: str, v: str) -> None:
        s, r = self.vals[v], self.r
        nd = len(s)
        if kind == "unary_2":
            f = r.choice(["torch.erf({})", "F.softplus({})", "F.mish({})", "F.hardsigmoid({})", "F.logsigmoid({})",
                          "torch.sin({})", "torch.reciprocal({}.abs() + 1.0)", "torch.rsqrt({}.abs() + 1.0)",
                          "{}.pow(2)", "{}.abs().pow(1.5)", "torch.square({})", "F.hardtanh({})", "torch.sign({})",
                          "torch.floor({})", "{}.clamp(min=0.0)", "torch.expm1({}.clamp(max=4.0))",
                          "F.dropout({}, 0.1, False)", "torch.log1p({}.abs())", "F.silu({}) * 1.0"])
            self.add(f.format(v), [v], s)
        elif kind == "binary_2":
            same = self.same_shaped(v)
            u = r.choice(same) if same else v
            f = r.choice(["({0} / ({1}.abs() + 1.0))", "torch.lerp({0}, {1}, 0.3)",
                          "torch.addcmul({0}, {0}, {1}, value=0.5)", "torch.clamp({0}, min={1})",
                          "(({0} > {1}).to({0}.dtype) * {1})", "torch.where({0} < {1}, {1}, 0.0)",
                          "({0} * {1}.sigmoid())"])
            self.add(f.format(v, u), [v, u], s)
        elif kind == "upcast":
            self.add(f"up({v})", [v], s)
            self.upcast.add(self.stmts[-1].name)
        elif kind == "downcast":
            self.add(f"{v}.to(x0.dtype)", [v], s)
        elif kind == "t5_norm":  # T5's / LLaMA's RMSNorm: statistics in fp32, scaled in the weight's dtype
            w = self.param((s[-1],))
            self.add(f"({w} * (up({v}) * torch.rsqrt(up({v}).pow(2).mean(-1, keepdim=True) + 1e-6))"
                     f".to({w}.dtype))", [v], s)
        elif kind == "reduce_dim":
            d = r.randrange(nd)
            op = r.choice(["sum", "mean", "amax", "amin"] if s[d] > 0 else ["sum", "mean"])
            if r.random() < 0.6:
                self.add(f"({v} - {v}.{op}({d}, keepdim=True))", [v], s)
            else:
                self.add(f"{v}.{op}({d})", [v], s[:d] + s[d + 1:])
        elif kind == "var_dim":  # var / std / var_mean over a leading or middle dim, alone or standardizing
            d = r.randrange(nd - 1)
            op = r.choice(["var", "std", "var_mean"])
            u = r.random()
            if op == "var_mean":
                self.add(f"(lambda vm: ({v} - vm[1]) * torch.rsqrt(vm[0] + 1e-5))(torch.var_mean({v}, {d}, keepdim=True))",
                         [v], s)
            elif u < 0.4:
                self.add(f"(({v} - {v}.mean({d}, keepdim=True)) / ({v}.{op}({d}, keepdim=True) + 1e-5))", [v], s)
            elif u < 0.6 and d == 0:  # no keepdim: [C] broadcasts as [1, C], the kept dims
                self.add(f"(({v} - {v}.mean(0)) / ({v}.{op}(0) + 1e-5))", [v], s)
            else:
                self.add(f"{v}.{op}({d}, unbiased={r.random() < 0.5})", [v], s[:d] + s[d + 1:])
        elif kind == "softmax_dim":
            d = r.randrange(nd - 1)
            f = r.choice(["torch.softmax({} * 0.5, {})", "F.log_softmax({}, {})", "(torch.softmax({}, {}) * 2.0)"])
            self.add(f.format(v, d), [v], s)
        elif kind == "attention":
            self.attention(v, s)
        elif kind == "bn_stats":  # training BatchNorm's statistics written out, over N, H, W
            self.add(f"(({v} - {v}.mean((0, 2, 3), keepdim=True)) * "
                     f"torch.rsqrt({v}.var((0, 2, 3), keepdim=True, unbiased=False) + 1e-5))", [v], s)
        elif kind == "var":
            op = r.choice(["var", "std"])
            standardize = r.random() < 0.6
            if standardize and op == "var":  # the same values through torch.var_mean (no extra draw)
                self.add(f"(lambda vm: ({v} - vm[1]) / (vm[0] + 1e-5))(torch.var_mean({v}, -1, keepdim=True))", [v], s)
            elif standardize:
                self.add(f"(({v} - {v}.mean(-1, keepdim=True)) / ({v}.{op}(-1, keepdim=True) + 1e-5))", [v], s)
            else:
                self.add(f"{v}.{op}(-1, unbiased={r.choice([True, False])})", [v], s[:-1])
        elif kind == "se_gate":
            self.add(f"({v} * torch.sigmoid({v}.mean((2, 3), keepdim=True)))", [v], s)
        elif kind == "per_channel":  # a folded BatchNorm's scale and shift, or a channel gate
            c = s[1]
            w, b = self.param((c,)), self.param((c,))
            self.add(f"({v} * {w}.view(1, {c}, 1, 1) + {b}.view(1, {c}, 1, 1))", [v], s)
        elif kind == "rotary":
            k = s[-1] // 2
            cos, sin = self.param((s[-1],)), self.param((s[-1],))
            self.add(f"({v} * {cos} + torch.cat([-{v}[..., {k}:], {v}[..., :{k}]], -1) * {sin})", [v], s)
        elif kind == "gated":  # SwiGLU / GeGLU: act(a) * b
            same = self.same_shaped(v)
            if same and r.random() < 0.5:
                u = r.choice(same)
                act = r.choice(["F.silu", "F.gelu"])
                self.add(f"({act}({v}) * {u})", [v, u], s)
            else:
                v = self.low(v, s)
                n = self.dim()
                w1, w2 = self.param((n, s[-1])), self.param((n, s[-1]))
                self.add(f"(F.silu(F.linear({v}, {w1})) * F.linear({v}, {w2}))", [v], s[:-1] + (n,))
        elif kind == "masked_softmax":
            same = self.same_shaped(v)
            u = r.choice(same) if same else v
            t = r.choice([1.0, -3.0])  # -3: few elements masked; 1.0: whole rows can be masked (NaN rows)
            self.add(f"torch.softmax({v}.masked_fill({u} > {t}, float('-inf')), -1)", [v, u], s)
        elif kind == "matmul_param":  # a weight stored [in, out]: no transpose in the graph
            v = self.low(v, s)
            n = self.dim()
            w = self.param((s[-1], n))
            self.add(f"({v} @ {w})", [v], s[:-1] + (n,))
        elif kind == "addmm":
            v = self.low(v, s)
            n = self.dim()
            w, b = self.param((s[-1], n)), self.param((n,))
            self.add(f"torch.addmm({b}, {v}, {w}, beta={r.choice([1.0, 0.5])}, alpha={r.choice([1.0, 2.0])})",
                     [v], (s[0], n))
        elif kind == "baddbmm":
            v = self.low(v, s)
            self.add(f"torch.baddbmm({v}[..., :1], {v}, {v}.transpose(-1, -2), alpha=0.5)", [v], s[:-1] + (s[-2],))
        elif kind == "col_bcast":  # a strided [.., 1] column broadcast over each row
            f = r.choice(["({0} * {0}[..., :1])", "({0} + {0}[..., -1:])", "({0} - {0}[..., :1] * 0.5)"])
            self.add(f.format(v), [v], s)
        elif kind == "ln_plain":
            v = self.low(v, s)
            if r.random() < 0.5:
                self.add(f"F.layer_norm({v}, ({s[-1]},))", [v], s)
            else:
                self.add(f"F.normalize({v}, dim=-1)", [v], s)
        elif kind == "group_norm":
            v = self.low(v, s)
            c = s[1]
            w, b = self.param((c,)), self.param((c,))
            self.add(f"F.group_norm({v}, 2, {w}, {b})", [v], s)
        elif kind == "conv_dilated":
            v = self.low(v, s)
            c, oc = s[1], self.dim()
            w = self.param((oc, c, 3, 3))
            b = self.param((oc,)) if r.random() < 0.5 else "None"
            self.add(f"F.conv2d({v}, {w}, {b}, 1, 2, 2)", [v], (s[0], oc, s[2], s[3]))
        elif kind == "avg_pool":
            self.add(f"F.avg_pool2d({v}, 3, 1, 1)", [v], s)
        elif kind == "upsample":
            self.add(f"F.interpolate({v}, scale_factor=2.0, mode='nearest')", [v], (s[0], s[1], 2 * s[2], 2 * s[3]))
        else:  # bcast_input: the lower-rank second input broadcast against v
            f = r.choice(["({} + x1)", "({} * x1)", "torch.maximum({}, x1)", "torch.where(x1 > 0, {}, x1)"])
            self.add(f.format(v), [v, "x1"], s)

    def attention(self, v: str, s) -> None:
        """Grammar 4: F.scaled_dot_product_attention on v. A 3-d v [B, L, D] is split into h heads
        ([B, h, L, D / h], a strided view, as BERT's projections give) and merged back after; a
        4-d v is [B, H, L, E] as it is."""
        r = self.r
        v = self.low(v, s)
        if len(s) == 3:
            d = s[2]
            h = r.choice([k for k in (1, 2, 4) if d % k == 0] if d > 0 else [1])
            q, L, e = f"{v}.unflatten(-1, ({h}, {d // h})).transpose(1, 2)", s[1], d // h
        else:
            q, L, e = v, s[2], s[3]
        kv = r.choice(["same", "derived", "slice", "param"])
        if kv == "same":
            k, val, S = q, q, L
        elif kv == "derived":
            k, val, S = f"({q} * 0.5)", f"torch.tanh({q})", L
        elif kv == "slice":  # fewer keys than queries
            S = max(1, L // 2) if L > 0 else 0
            k, val = f"{q}[..., :{S}, :]", f"({q}[..., :{S}, :] + 1.0)"
        else:  # a key bias of the head dim (a parameter read at every call)
            k, val, S = f"({q} + {self.param((e,))})", q, L
        args = [q, k, val]
        u = r.random()
        if u < 0.25:
            args.append(f"attn_mask={self.param((L, S))}")  # additive, broadcast over batch and heads
        elif u < 0.4:
            args.append(f"attn_mask={self.param((1, S))} > -1.0")  # boolean, True takes part: a padding mask
        elif u < 0.6:
            args.append("is_causal=True")
        if r.random() < 0.3:
            args.append("scale=0.3")
        out = f"F.scaled_dot_product_attention({', '.join(args)})"
        self.add(f"{out}.transpose(1, 2).flatten(-2)" if len(s) == 3 else out, [v], s)


def _bcast_shape(r: random.Random, shape: tuple) -> tuple:
    """A lower-rank shape that broadcasts against `shape` (its first dim dropped, which a new
    batch size changes; some of the rest set to 1)."""
    tail = shape[1:]
    return tuple(1 if d > 1 and r.random() < 0.4 else d for d in tail)


# Large programs (generate(..., large=True)): the input's elements, at least the count from which
# cpu_fused runs cheap pointwise groups as a plan (interp_plan.h: 16 blocks of 1024) and at most
# 2^21 (8 MiB in fp32), so that a program still runs in about a second.
LARGE_MIN, LARGE_MAX = 16 * 1024, 1 << 21


def _large_shape(r: random.Random, shape: tuple) -> tuple:
    """shape with its last dim widened (rows of 384 and more take the plan) and its first dim
    grown until it holds LARGE_MIN elements or more, LARGE_MAX at most, except where the dims
    after the first already hold more than LARGE_MAX (up to 32 x 32 x 4097): the first dim is then
    1 and the shape stays above LARGE_MAX."""
    if len(shape) == 1:
        return (r.choice([LARGE_MIN, LARGE_MIN + 1, 65537, 262144]),)
    shape = shape[:-1] + (r.choice([384, 512, 1000, 2048, 4097]),)
    rest = 1
    for d in shape[1:]:
        rest *= d
    first = max(shape[0], -(-LARGE_MIN // rest) * r.choice([1, 2]))
    first = max(1, min(first, LARGE_MAX // rest))
    return (first,) + shape[1:]


def generate(seed: int, grammar: int = 1, large: bool = False) -> Program:
    """large: the input of a pointwise or dense program widened to LARGE_MIN..LARGE_MAX elements
    (convolutions keep their sizes), its sizes drawn from a generator of their own, so that the
    seed's other choices are the small program's."""
    g = _Gen(seed, grammar)
    r = g.r
    dtype = r.choices(list(DTYPES), weights=[6, 3, 2])[0]
    kind = r.choice(["dense", "dense", "conv", "pointwise"])
    if kind == "conv":
        shape = (r.choice([1, 2]), g.dim(), r.choice([4, 5, 8]), r.choice([4, 7, 8]))
        layout = "channels_last" if r.random() < 0.3 else "contiguous"
    elif kind == "dense":
        shape = (r.choice([1, 2, 3]), g.dim(), g.dim()) if r.random() < 0.6 else (g.dim(), g.dim())
        layout = "transposed" if r.random() < 0.2 else "contiguous"
    else:
        shape = tuple(g.dim() for _ in range(r.choice([1, 2, 3, 4])))
        layout = "transposed" if len(shape) >= 2 and r.random() < 0.2 else "contiguous"
    if large and kind != "conv":
        shape = _large_shape(random.Random(f"large {seed}"), shape)
    if r.random() < 0.05:  # an empty dim
        i = r.randrange(len(shape))
        shape = shape[:i] + (0,) + shape[i + 1:]
    inputs = [("x0", shape, layout)]
    g.vals["x0"] = shape
    if r.random() < 0.4:  # a second input of the same shape
        x1 = shape
        if grammar >= 2 and len(shape) >= 2 and r.random() < 0.5:
            x1 = _bcast_shape(r, shape)
        inputs.append(("x1", x1, "contiguous"))
        g.vals["x1"] = x1
    for _ in range(r.randint(2, 9)):
        recent = list(g.vals)[-3:]
        g.step(r.choice(recent))
    outs = [g.stmts[-1].name]
    if r.random() < 0.3 and len(g.stmts) > 1:
        outs.append(r.choice(g.stmts[:-1]).name)
    if r.random() < 0.1:
        outs.append("x0")  # an output that is an input
    return Program(seed, dtype, inputs, g.params, g.stmts, outs, grammar)
