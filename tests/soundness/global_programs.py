"""Small random GLOBAL SPMD programs on a dp x tp (2 x 2) mesh.

A program is a function decorated `@spmd.global_spmd`: inputs annotated in
spec form (`Annotated[Tensor, Spmd(spec=PartitionSpec(...), tp=P)]`; with
per_axis=True often in per-axis form `Spmd(dp=S(0), tp=R)`, sometimes with a
bare V, which the checker must type by its S(i) dims or reject), 1-4
straight-line statements (pointwise ops, matmul, sums, softmax, transposes,
the typed per-axis collectives, the spec-level redistribute, right or wrong)
and a spec-form return annotation.  `global_programs()` is the hypothesis
strategy; `GProgram.source()` renders the module that mypy checks and that
the ranks and the single-device reference both execute.

The generator keeps, for every value, its local (per-rank) shape, which is
what the runtime computes, so that programs run, and its global type (a
partition spec plus the axes it is Partial on) from the design's rules
written here independently of spmd_mypy (None once its rules find an error
upstream).  It mostly picks statements its rules accept, sometimes ones they
reject; `expect_ok` records its verdict for information only.

A global type `GType(spec, partial)`: spec[d] is the tuple of mesh axes
sharding dim d, major to minor; an axis named nowhere and not Partial is
Replicate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import FrozenSet, List, Optional, Sequence, Tuple

from hypothesis import strategies as st

AXES = ("dp", "tp")
SIZE = 2
Shape = Tuple[int, ...]
Spec = Tuple[Tuple[str, ...], ...]

HEADER = '''\
from typing import Annotated

import torch
import torch.nn.functional as F
from torch import Tensor

import spmd_mypy as spmd
from spmd_mypy import P, PartitionSpec, R, S, Spmd, V
'''


@dataclass(frozen=True)
class GType:
    spec: Spec
    partial: FrozenSet[str] = frozenset()

    def kind(self, axis: str) -> str:
        if axis in self.partial:
            return "P"
        for d, axes in enumerate(self.spec):
            if axis in axes:
                return f"S({d})"
        return "R"

    def replicated(self) -> FrozenSet[str]:
        return frozenset(a for a in AXES if self.kind(a) == "R")

    def grad(self) -> "GType":
        """The gradient's type: R -> P, P -> R, S(i) -> S(i)."""
        return GType(self.spec, self.replicated())

    def factors(self) -> Tuple[int, ...]:
        return tuple(SIZE ** len(axes) for axes in self.spec)

    def global_shape(self, local: Shape) -> Shape:
        return tuple(n * f for n, f in zip(local, self.factors()))

    def local_shape(self, full: Shape) -> Optional[Shape]:
        out = []
        for n, f in zip(full, self.factors()):
            if n % f:
                return None
            out.append(n // f)
        return tuple(out)

    def valid(self) -> bool:
        named = [a for axes in self.spec for a in axes]
        return len(set(named)) == len(named) and not (set(named) & self.partial)

    def render(self) -> str:
        entries = []
        for axes in self.spec:
            if not axes:
                entries.append("None")
            elif len(axes) == 1:
                entries.append(f'"{axes[0]}"')
            else:
                entries.append("(" + ", ".join(f'"{a}"' for a in axes) + ")")
        parts = [f"spec=PartitionSpec({', '.join(entries)})"]
        parts += [f"{a}=P" for a in AXES if a in self.partial]
        return f"Spmd({', '.join(parts)})"

    def annotation(self) -> str:
        return f"Annotated[Tensor, {self.render()}]"

    def per_axis(self, bare_v: bool = False) -> str:
        """The per-axis form `Spmd(dp=S(0), tp=R)` (one axis per dim at most); bare_v writes V for S(i)."""
        kinds = [self.kind(a) for a in AXES]
        parts = [f"{a}={'V' if bare_v and k.startswith('S(') else k}" for a, k in zip(AXES, kinds)]
        return f"Annotated[Tensor, Spmd({', '.join(parts)})]"


@dataclass(frozen=True)
class GInput:
    name: str
    gtype: GType
    shape: Shape  # global (full) shape
    form: str = "spec"  # how the annotation is written: "spec", "axes" (per-axis form) or "V" (S(i) as bare V)

    def annotation(self) -> str:
        if self.form == "spec":
            return self.gtype.annotation()
        return self.gtype.per_axis(bare_v=self.form == "V")

    @property
    def local(self) -> Shape:
        ls = self.gtype.local_shape(self.shape)
        assert ls is not None
        return ls


@dataclass(frozen=True)
class GProgram:
    inputs: Tuple[GInput, ...]
    lines: Tuple[str, ...]  # "name = expr"
    result: str
    out_type: GType
    expect_ok: bool
    why: Tuple[str, ...] = field(default=())
    out_form: str = "spec"  # the return annotation: "spec" or "axes" (per-axis form)

    def source(self, fn: str = "program") -> str:
        params = "".join(f"    {x.name}: {x.annotation()},\n" for x in self.inputs)
        ret = self.out_type.per_axis() if self.out_form == "axes" else self.out_type.annotation()
        body = "".join(f"    {line}\n" for line in self.lines)
        return (
            f"{HEADER}\n\n@spmd.global_spmd\ndef {fn}(\n{params}) -> {ret}:\n"
            f"{body}    return {self.result}\n"
        )


# -- values and candidate statements --------------------------------------------------------


@dataclass(frozen=True)
class Value:
    name: str
    local: Shape
    gtype: Optional[GType]  # None: the generator's rules found an error upstream
    belief: Optional[GType] = None  # what a careless author takes a rejected value to be


@dataclass(frozen=True)
class Cand:
    expr: str
    local: Shape
    gtype: Optional[GType]
    why: str = ""  # non-empty: the generator's rules reject it
    belief: Optional[GType] = None  # a plain contraction over a sharded dim: the result without its P


def _bad(expr: str, local: Shape, why: str) -> Cand:
    return Cand(expr, local, None, why)


def _axes_lit(axes: Sequence[str]) -> str:
    if len(axes) == 1:
        return f'"{axes[0]}"'
    return "(" + ", ".join(f'"{a}"' for a in axes) + ")" if axes else "()"


def _all_axes(spec: Spec) -> List[str]:
    return [a for axes in spec for a in axes]


# (a fill other than 0 makes masked_fill and where nonlinear: a constant would
# be added once per rank to a pending sum)
NONLINEAR = (
    "torch.relu({0})", "F.gelu({0})", "{0}.masked_fill({0}.detach() > 0, 1.0)", "torch.where({0}.detach() > 0, {0}, 1.0)",
)


def _factories(x: Value) -> List[Cand]:
    """x beside a factory's value: of a rank the call does not write (the
    local shape, which runs: a careless author takes the sum for x's type),
    and of literal sizes broadcast on x's last dim (a replicated [n])."""
    g, out = x.gtype, []
    e = f"{x.name} + torch.zeros(tuple({x.name}.shape))"
    if g is None:
        out.append(_bad(e, x.local, "unknown operand"))
    elif _all_axes(g.spec):
        out.append(Cand(e, x.local, None, "a factory of unknown rank beside a sharded operand", g))
    elif g.partial:
        out.append(_bad(e, x.local, "a Partial operand added to a non-Partial one"))
    else:
        out.append(Cand(e, x.local, g))
    if x.local:
        e = f"{x.name} * torch.ones({x.local[-1]})"
        if g is None:
            out.append(_bad(e, x.local, "unknown operand"))
        elif g.spec[-1]:
            out.append(_bad(e, x.local, "a replicated factory beside a dim sharded in the other operand"))
        else:
            out.append(Cand(e, x.local, g))
    return out


def unary(x: Value) -> List[Cand]:
    out: List[Cand] = []
    g = x.gtype
    for tpl in NONLINEAR:
        e = tpl.format(x.name)
        if g is None:
            out.append(_bad(e, x.local, "unknown operand"))
        elif g.partial:
            out.append(_bad(e, x.local, "a Partial operand in a nonlinear op"))
        else:
            out.append(Cand(e, x.local, g))
    e = f"{x.name} * 2.0"
    out.append(Cand(e, x.local, g) if g is not None else _bad(e, x.local, "unknown operand"))
    nd = len(x.local)
    out += _factories(x)
    for d in range(nd):
        e = f"torch.softmax({x.name}, dim={d})"
        if g is None:
            out.append(_bad(e, x.local, "unknown operand"))
        elif g.partial:
            out.append(_bad(e, x.local, "a Partial operand in a nonlinear op"))
        elif g.spec[d]:
            out.append(_bad(e, x.local, "softmax over a sharded dim"))
        else:
            out.append(Cand(e, x.local, g))
    # transposes
    if nd == 2:
        sw = (x.local[1], x.local[0])
        for e in (f"{x.name}.T", f"{x.name}.transpose(0, 1)"):
            out.append(
                Cand(e, sw, GType((g.spec[1], g.spec[0]), g.partial)) if g else _bad(e, sw, "unknown operand")
            )
    if nd == 3:
        for i, j in ((0, 1), (1, 2), (0, 2)):
            e = f"{x.name}.transpose({i}, {j})"
            ls = list(x.local)
            ls[i], ls[j] = ls[j], ls[i]
            if g is None:
                out.append(_bad(e, tuple(ls), "unknown operand"))
            else:
                sp = list(g.spec)
                sp[i], sp[j] = sp[j], sp[i]
                out.append(Cand(e, tuple(ls), GType(tuple(sp), g.partial)))
    # sums over one dim, and over everything
    for d in range(nd):
        ls = x.local[:d] + x.local[d + 1 :]
        e = f"torch.sum({x.name}, dim={d})"
        if g is None:
            out.append(_bad(e, ls, "unknown operand"))
            continue
        sp = g.spec[:d] + g.spec[d + 1 :]
        if g.spec[d]:
            out.append(_bad(e, ls, "a sum over a sharded dim without out_partial_axes"))
        else:
            out.append(Cand(e, ls, GType(sp, g.partial)))
        right = g.spec[d]
        choices = {right, ("tp",), ("dp",), ()}
        for axes in sorted(choices):
            e = f"spmd.sum({x.name}, dim={d}, out_partial_axes={_axes_lit(axes)})"
            if set(axes) != set(right):
                out.append(_bad(e, ls, "out_partial_axes differs from the summed dim's axes"))
            else:
                out.append(Cand(e, ls, GType(sp, g.partial | frozenset(axes))))
        # mean: a sharded dim is an error without out_partial_axes (spmd.mean divides by the axes' sizes)
        e = f"{x.name}.mean(dim={d})"
        out.append(_bad(e, ls, "a mean over a sharded dim") if g.spec[d] else Cand(e, ls, GType(sp, g.partial)))
        e = f"spmd.mean({x.name}, dim={d}, out_partial_axes={_axes_lit(right)})"
        out.append(Cand(e, ls, GType(sp, g.partial | frozenset(right))))
    if nd:
        e_axes = _all_axes(g.spec) if g else []
        e = f"spmd.sum({x.name}, out_partial_axes={_axes_lit(e_axes)})"
        out.append(Cand(e, (), GType((), g.partial | frozenset(e_axes))) if g else _bad(e, (), "unknown operand"))
    return out


def binary(x: Value, y: Value) -> List[Cand]:
    out: List[Cand] = []
    gx, gy = x.gtype, y.gtype
    if x.local == y.local:
        for op in ("+", "*"):
            e = f"{x.name} {op} {y.name}"
            if gx is None or gy is None:
                out.append(_bad(e, x.local, "unknown operand"))
            elif gx.spec != gy.spec:
                out.append(_bad(e, x.local, "pointwise operands sharded differently"))
            elif op == "+" and gx.partial != gy.partial:
                out.append(_bad(e, x.local, "a Partial operand added to a non-Partial one"))
            elif op == "*" and gx.partial & gy.partial:
                out.append(_bad(e, x.local, "two Partial operands multiplied"))
            else:
                out.append(Cand(e, x.local, GType(gx.spec, gx.partial | gy.partial)))
    if len(x.local) in (2, 3) and len(y.local) == 2 and x.local[-1] == y.local[0]:
        ls = x.local[:-1] + (y.local[1],)
        forms = [f"{x.name} @ {y.name}", f"torch.matmul({x.name}, {y.name})"]
        contracted: Tuple[str, ...] = gx.spec[-1] if gx else ()
        opa = sorted({contracted, ("tp",), ("dp",), ("dp", "tp")})
        forms_p = [(f"spmd.matmul({x.name}, {y.name}, out_partial_axes={_axes_lit(a)})", a) for a in opa]
        for e, axes in [(f, ()) for f in forms] + forms_p:
            if gx is None or gy is None:
                out.append(_bad(e, ls, "unknown operand"))
                continue
            why = _matmul_why(gx, gy, axes)
            spec = gx.spec[:-1] + (gy.spec[1],)
            if why:
                naive = GType(spec, gx.partial | gy.partial) if not axes and gx.spec[-1] else None
                out.append(Cand(e, ls, None, why, naive))
                continue
            out.append(Cand(e, ls, GType(spec, gx.partial | gy.partial | frozenset(axes))))
    if len(x.local) in (2, 3) and len(y.local) == 2 and x.local[-1] == y.local[1]:
        # F.linear(x, y) contracts x's last dim with y's dim 1
        ls = x.local[:-1] + (y.local[0],)
        contracted = gx.spec[-1] if gx else ()
        forms = [(f"F.linear({x.name}, {y.name})", ())] + [
            (f"spmd.linear({x.name}, {y.name}, out_partial_axes={_axes_lit(a)})", a)
            for a in sorted({contracted, ("tp",), ("dp", "tp")})
        ]
        out += _contractions(forms, ls, gx, None if gy is None else GType((gy.spec[1], gy.spec[0]), gy.partial))
    if len(x.local) == 2 and len(y.local) == 2 and x.local[1] == y.local[0]:
        ls = (x.local[0], y.local[1])
        contracted = gx.spec[-1] if gx else ()
        eq = '"ij,jk->ik"'
        forms = [(f"torch.einsum({eq}, {x.name}, {y.name})", ())] + [
            (f"spmd.einsum({eq}, {x.name}, {y.name}, out_partial_axes={_axes_lit(a)})", a)
            for a in sorted({contracted, ("dp",)})
        ]
        out += _contractions(forms, ls, gx, gy)
    return out


def _contractions(
    forms: Sequence[Tuple[str, Tuple[str, ...]]], ls: Shape, gx: Optional[GType], gy: Optional[GType]
) -> List[Cand]:
    """x (.., k) times y (k, n) written in several forms; gy is y's type as a (k, n) operand."""
    out = []
    for e, axes in forms:
        if gx is None or gy is None:
            out.append(_bad(e, ls, "unknown operand"))
            continue
        why = _matmul_why(gx, gy, axes)
        if why:
            out.append(_bad(e, ls, why))
            continue
        spec = gx.spec[:-1] + (gy.spec[1],)
        out.append(Cand(e, ls, GType(spec, gx.partial | gy.partial | frozenset(axes))))
    return out


def _matmul_why(gx: GType, gy: GType, axes: Tuple[str, ...]) -> str:
    if gx.spec[-1] != gy.spec[0]:
        return "the contracted dims are sharded differently"
    if set(axes) != set(gx.spec[-1]):
        return "out_partial_axes differs from the contracted dim's axes"
    spec = gx.spec[:-1] + (gy.spec[1],)
    named = _all_axes(spec)
    if len(set(named)) != len(named):
        return "an axis twice in the result"
    for a in AXES:
        kx, ky = gx.kind(a), gy.kind(a)
        if kx == "P" and ky != "R" or ky == "P" and kx != "R":
            return f"a Partial operand multiplied by a non-Replicate one on {a}"
    return ""


def collectives(x: Value) -> List[Cand]:
    out: List[Cand] = []
    g = x.gtype
    nd = len(x.local)
    for ax in AXES:
        # all_reduce P -> R
        e = f'spmd.all_reduce({x.name}, "{ax}", src=P, dst=R)'
        if g is None:
            out.append(_bad(e, x.local, "unknown operand"))
        elif ax not in g.partial:
            out.append(_bad(e, x.local, "src=P but the value is not Partial"))
        else:
            out.append(Cand(e, x.local, GType(g.spec, g.partial - {ax})))
        for i in range(nd):
            # all_gather S(i) -> R
            ls = list(x.local)
            ls[i] *= SIZE
            e = f'spmd.all_gather({x.name}, "{ax}", src=S({i}), dst=R)'
            out.append(_gather(e, tuple(ls), g, ax, i))
            # reduce_scatter P -> S(i)
            if x.local[i] % SIZE == 0:
                ls = list(x.local)
                ls[i] //= SIZE
                e = f'spmd.reduce_scatter({x.name}, "{ax}", src=P, dst=S({i}))'
                if g is None:
                    out.append(_bad(e, tuple(ls), "unknown operand"))
                elif ax not in g.partial:
                    out.append(_bad(e, tuple(ls), "src=P but the value is not Partial"))
                else:
                    sp = list(g.spec)
                    sp[i] = sp[i] + (ax,)
                    out.append(Cand(e, tuple(ls), GType(tuple(sp), g.partial - {ax})))
            # all_to_all S(i) -> S(j)
            for j in range(nd):
                if j == i or x.local[j] % SIZE:
                    continue
                ls = list(x.local)
                ls[i] *= SIZE
                ls[j] //= SIZE
                e = f'spmd.all_to_all({x.name}, "{ax}", src=S({i}), dst=S({j}))'
                c = _gather(e, tuple(ls), g, ax, i)
                if c.gtype is not None:
                    sp = list(c.gtype.spec)
                    sp[j] = sp[j] + (ax,)
                    c = Cand(e, tuple(ls), GType(tuple(sp), c.gtype.partial))
                out.append(c)
    return out


def _gather(e: str, ls: Shape, g: Optional[GType], ax: str, i: int) -> Cand:
    if g is None:
        return _bad(e, ls, "unknown operand")
    if ax not in g.spec[i]:
        return _bad(e, ls, f"{ax} does not shard dim {i}")
    if g.spec[i][-1] != ax:
        return _bad(e, ls, f"{ax} is not the minor axis of dim {i}")
    sp = list(g.spec)
    sp[i] = tuple(a for a in sp[i] if a != ax)
    return Cand(e, ls, GType(tuple(sp), g.partial))


# per axis: which moves the spec-level redistribute allows (kind of src -> kind of dst)
ALLOWED_MOVES = {("R", "R"), ("R", "S"), ("R", "P"), ("S", "R"), ("S", "S"), ("P", "R"), ("P", "S"), ("P", "P")}


def redistribute_why(src: GType, dst: GType) -> str:
    for a in AXES:
        move = (src.kind(a)[0], dst.kind(a)[0])
        if move not in ALLOWED_MOVES:
            return f"redistribute {move[0]} -> {move[1]} on {a}"
    return ""


def redistribute(x: Value, src: GType, dst: GType) -> Optional[Cand]:
    """The candidate `spmd.redistribute(x, src=..., dst=...)`, None if the runtime could not run it."""
    if len(src.spec) != len(x.local) or len(dst.spec) != len(x.local):
        return None
    full = src.global_shape(x.local)
    ls = dst.local_shape(full)
    if ls is None:
        return None
    e = f"spmd.redistribute({x.name}, src={src.render()}, dst={dst.render()})"
    if x.gtype is None:
        return _bad(e, ls, "unknown operand")
    if src != x.gtype:
        return _bad(e, ls, "src does not match the value")
    why = redistribute_why(src, dst)
    return _bad(e, ls, why) if why else Cand(e, ls, dst)


# -- strategies ----------------------------------------------------------------------------------


@st.composite
def gtypes(draw: st.DrawFn, ndim: int, partial_ok: bool = True) -> GType:
    spec: List[Tuple[str, ...]] = [() for _ in range(ndim)]
    partial = set()
    axes = list(AXES)
    if draw(st.booleans()):
        axes.reverse()  # the order axes join a shared dim: major first
    for a in axes:
        choice = draw(st.integers(0, 9))
        if choice < 5 and ndim:
            d = draw(st.integers(0, ndim - 1))
            spec[d] = spec[d] + (a,)
        elif choice < 7 and partial_ok:
            partial.add(a)
    return GType(tuple(spec), frozenset(partial))


FULL_DIMS = (4, 8)


@st.composite
def global_inputs(draw: st.DrawFn, per_axis: bool = False) -> Tuple[GInput, ...]:
    """per_axis: inputs sharded one axis per dim are often written in per-axis form, sometimes as bare V."""
    k = draw(st.integers(1, 3))
    out: List[GInput] = []
    for n in range(k):
        ndim = 3 if draw(st.integers(0, 4)) == 0 else 2
        shape = tuple(draw(st.sampled_from(FULL_DIMS)) for _ in range(ndim))
        g = draw(gtypes(ndim, partial_ok=draw(st.integers(0, 3)) == 0))
        if out and draw(st.booleans()):
            # a right operand for a matmul with the previous input, often sharded alike
            prev = out[-1]
            ndim = 2
            shape = (prev.shape[-1], draw(st.sampled_from(FULL_DIMS)))
            g = draw(gtypes(2, partial_ok=False))
            if draw(st.integers(0, 3)) > 0:
                first = prev.gtype.spec[-1]
                rest = tuple(a for a in g.spec[1] if a not in first)
                g = GType((first, rest), g.partial - set(first))
        form = "spec"
        if per_axis and all(len(axes) <= 1 for axes in g.spec):
            form = draw(st.sampled_from(["axes", "axes", "V"] if _all_axes(g.spec) else ["axes"]))
        out.append(GInput(f"x{n}", g, shape, form))
    return tuple(out)


@st.composite
def near_miss(draw: st.DrawFn, g: GType) -> GType:
    """g with one axis moved to another kind (R, P, or the minor axis of some dim)."""
    a = draw(st.sampled_from(AXES))
    spec = [tuple(b for b in axes if b != a) for axes in g.spec]
    partial = set(g.partial) - {a}
    choice = draw(st.integers(0, len(spec) + 1))
    if choice == len(spec):
        partial.add(a)
    elif choice < len(spec):
        spec[choice] = spec[choice] + (a,)
    return GType(tuple(spec), frozenset(partial))


def _pick(draw: st.DrawFn, cands: List[Cand], p_bad: int) -> Cand:
    good = [c for c in cands if not c.why]
    pool = cands if (not good or draw(st.integers(0, p_bad - 1)) == 0) else good
    return pool[draw(st.integers(0, len(pool) - 1))]


@st.composite
def global_programs(draw: st.DrawFn, max_statements: int = 4, p_bad: int = 10, per_axis: bool = False) -> GProgram:
    ins = draw(global_inputs(per_axis))
    if per_axis:  # more wrong statements: a plain contraction over a sharded dim is the hole once found
        p_bad = min(p_bad, 3)
    values = [Value(x.name, x.local, x.gtype) for x in ins]
    lines: List[str] = []
    why: List[str] = [f"{x.name}: a bare V on a global axis" for x in ins if x.form == "V"]
    steps = draw(st.integers(1, max_statements))
    for k in range(steps):
        x = values[-1 - draw(st.integers(0, min(2, len(values) - 1)))]
        kind = draw(st.sampled_from(["unary", "binary", "binary", "collective", "collective", "redistribute"]))
        cands: List[Cand] = []
        if kind == "binary":
            for y in values:
                cands += binary(x, y) + binary(y, x)
        elif kind == "collective":
            cands = collectives(x)
        elif kind == "redistribute" and x.local:
            src = x.gtype
            if src is None or draw(st.integers(0, 5)) == 0:
                src = draw(gtypes(len(x.local)))
            dst = draw(gtypes(len(x.local)))
            c = redistribute(x, src, dst)
            cands = [c] if c is not None else []
        if not cands or (all(c.why for c in cands) and draw(st.integers(0, 3)) > 0):
            cands = unary(x)  # mostly a statement the rules accept
        careless = [c for c in cands if c.belief is not None] if per_axis else []
        c = careless[draw(st.integers(0, len(careless) - 1))] if careless and draw(st.booleans()) else None
        c = c or _pick(draw, cands, p_bad)
        name = f"v{k}"
        lines.append(f"{name} = {c.expr}")
        if c.why:
            why.append(f"{name}: {c.why}")
        values.append(Value(name, c.local, c.gtype, c.belief))
        if c.belief is not None:
            break  # returned as the author believes it is
    last = values[-1]
    out = last.gtype
    if out is None and per_axis and last.belief is not None and last.belief.valid():
        out = last.belief  # the author's belief: returned as if the contraction were right
        if draw(st.integers(0, 3)) == 0:
            out = draw(near_miss(out))  # a wrong return: found where the value's layout was lost
    elif out is None:
        out = draw(gtypes(len(last.local)))
    elif draw(st.integers(0, 7)) == 0:
        out = draw(near_miss(out))
        if out != last.gtype:
            why.append("the return annotation differs from the value's type")
    if not out.valid():
        out = GType(out.spec, frozenset())
    out_form = "spec"
    if per_axis and all(len(axes) <= 1 for axes in out.spec) and draw(st.booleans()):
        out_form = "axes"
    return GProgram(ins, tuple(lines), last.name, out, expect_ok=not why, why=tuple(why), out_form=out_form)
