"""Small random programs over the typed API on a dp x tp (2 x 2) mesh.

A program is straight-line code: annotated tensor inputs, a few statements
(torch ops, or spmd collectives and coercions with some src/dst, right or
wrong), and an annotated return.  `programs()` is the hypothesis strategy;
`Program.source()` renders the module mypy checks and the runtime executes.

The generator keeps its own idea of every value's local shape (so programs
that type-check also run: dims divide, matmuls fit) and of its SPMD type,
from the design's rules written here independently of spmd_mypy.  It mostly
picks statements its rules accept, sometimes ones they reject (a wrong src, a
Partial into a nonlinear op, an Invariant mixed with a Varying, a return
annotation that does not match), so the checker sees both.  Its verdict is
recorded as `expect_ok`, for information only: the test's verdicts come from
mypy and from execution.

Types are strings per axis: "R", "I", "V", "P" or "S(i)".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from hypothesis import strategies as st

AXES = ("dp", "tp")
SIZE = 2  # ranks per mesh axis
Shape = Tuple[int, ...]
Types = Dict[str, Optional[str]]  # None: the generator's rules found an error upstream
Axis = Union[str, Tuple[str, ...]]

MAX_NUMEL = 128
MAX_NDIM = 3

HEADER = '''\
from typing import Annotated

import torch
import torch.nn.functional as F
from torch import Tensor

import spmd_mypy as spmd
from spmd_mypy import I, P, PartitionSpec, R, S, Spmd, V

ACT: spmd.Activation = F.silu
'''


@dataclass(frozen=True)
class Stmt:
    """`name = expr` (a torch line run on each rank) or `name = spmd.op(arg, axis, ...)`."""

    name: str
    expr: str = ""
    op: Optional[str] = None
    arg: str = ""
    axis: Axis = ""
    src: str = ""
    dst: str = ""
    expert: bool = False
    annot: Optional[Tuple[Tuple[str, str], ...]] = None  # an annotated local: (axis, type) pairs
    write: str = ""  # an item write into the new value on the next line: "[0] = v2"

    def render(self) -> str:
        target = self.name
        if self.annot is not None:
            target += ": " + annotation(dict(self.annot), False, 0)
        if self.op is None:
            return f"{target} = {self.expr}" + (f"\n    {self.name}{self.write}" if self.write else "")
        axis = repr(self.axis) if isinstance(self.axis, str) else "(" + ", ".join(map(repr, self.axis)) + ")"
        axis = axis.replace("'", '"')
        extra = ", expert_mode=True" if self.expert else ""
        return f"{target} = spmd.{self.op}({self.arg}, {axis}, src={self.src}, dst={self.dst}{extra})"


@dataclass(frozen=True)
class Input:
    name: str
    types: Dict[str, str]
    shape: Shape  # local (per rank)
    spec_form: bool = False

    def annotation(self) -> str:
        return annotation(self.types, self.spec_form, len(self.shape))


@dataclass(frozen=True)
class Program:
    inputs: Tuple[Input, ...]
    statements: Tuple[Stmt, ...]
    result: str
    out_types: Dict[str, str]
    expect_ok: bool
    why: Tuple[str, ...] = field(default=())  # the generator's reasons to expect a rejection
    prelude: str = ""  # module-level code before the program (helpers its lines call)

    def source(self, fn: str = "program") -> str:
        params = "".join(f"    {x.name}: {x.annotation()},\n" for x in self.inputs)
        body = "".join(f"    {s.render()}\n" for s in self.statements)
        ret = annotation(self.out_types, False, 0)
        pre = f"\n\n{self.prelude.strip()}\n" if self.prelude.strip() else ""
        return f"{HEADER}{pre}\n\ndef {fn}(\n{params}) -> {ret}:\n{body}    return {self.result}\n"

    @property
    def header(self) -> str:
        return HEADER


def annotation(types: Dict[str, str], spec_form: bool, ndim: int) -> str:
    if spec_form:
        dims: List[List[str]] = [[] for _ in range(ndim)]
        rest = []
        for a in AXES:
            t = types[a]
            if t.startswith("S("):
                dims[int(t[2:-1])].append(a)
            elif t != "R":
                rest.append(f"{a}={t}")
        entries = []
        for axes in dims:
            if not axes:
                entries.append("None")
            elif len(axes) == 1:
                entries.append(f'"{axes[0]}"')
            else:
                entries.append("(" + ", ".join(f'"{a}"' for a in axes) + ")")
        spec = f"spec=PartitionSpec({', '.join(entries)})"
        return f"Annotated[Tensor, Spmd({', '.join([spec] + rest)})]"
    inner = ", ".join(f"{a}={types[a]}" for a in AXES)
    return f"Annotated[Tensor, Spmd({inner})]"


# -- the generator's own typing rules (from the design) --------------------------------------


class Bad(Exception):
    """The generator's rules reject this statement."""


def _local(t: str) -> str:
    return "V" if t.startswith("S(") else t


def _riv(kinds: Sequence[str]) -> str:
    s = {_local(t) for t in kinds}
    if s == {"R"}:
        return "R"
    if s == {"I"}:
        return "I"
    if "I" in s:
        raise Bad("an Invariant operand mixed with another type")
    return "V"


LINEAR, AFFINE, MULTI, DIVIDE, NONLINEAR = "linear", "affine", "multilinear", "divide", "nonlinear"


def op_rule(cls: str, operands: Sequence[Optional[str]], nograd: Sequence[bool] = ()) -> Optional[str]:
    """Result type on one axis; None if unknown; Bad if the rules reject it.

    AFFINE is a linear op with a Python number added (x + 1.0, 1.0 - x).
    nograd[k]: operand k carries no gradient (x.detach()); an R or I such
    operand is the same on every rank and owes no gradient sum, so it
    conforms to the others in the R/I/V rule (Partial rules ignore the flag).
    """
    if any(t is None for t in operands):
        return None
    ts = [t for t in operands if t is not None]
    partial = [t for t in ts if t == "P"]
    if not partial:
        flags = list(nograd) + [False] * (len(ts) - len(nograd))
        kept = [t for t, ng in zip(ts, flags) if not (ng and _local(t) in ("R", "I"))]
        return _riv(kept or ts)
    if cls == NONLINEAR:
        raise Bad("a Partial operand in a nonlinear op")
    if cls == AFFINE:
        raise Bad("a number added to a Partial operand")
    if cls == LINEAR:
        if len(partial) != len(ts):
            raise Bad("a Partial operand added to a non-Partial one")
        return "P"
    if len(partial) > 1:
        raise Bad("two Partial operands multiplied")
    if cls == DIVIDE and ts[0] != "P":
        raise Bad("a Partial denominator")
    others = [t for t in ts if t != "P"]
    if others and {_local(t) for t in others} != {"R"}:
        raise Bad("a Partial operand multiplied by a non-Replicate one")
    return "P"


# (src kind, dst kind) pairs each op accepts, from the design's tables; "S"
# stands for S(i).  EXPERT: the coercions that need expert_mode=True.
ACCEPTS: Dict[str, Tuple[Tuple[str, str], ...]] = {
    "all_reduce": (("P", "R"), ("P", "I")),
    "all_gather": (("V", "R"), ("V", "I"), ("S", "R"), ("S", "I")),
    "reduce_scatter": (("P", "V"), ("P", "S")),
    "all_to_all": (("V", "V"), ("S", "S")),
    "reinterpret": (
        ("R", "I"), ("R", "V"), ("R", "P"), ("I", "R"), ("V", "P"), ("I", "V"), ("I", "P"),
    ),
    "convert": (
        ("R", "V"), ("R", "S"), ("I", "V"), ("I", "S"), ("R", "P"), ("I", "P"), ("V", "P"),
        ("S", "P"), ("R", "I"), ("I", "R"),
    ),
    "redistribute": (
        ("S", "R"), ("S", "I"), ("V", "R"), ("V", "I"), ("P", "R"), ("P", "I"), ("P", "S"),
        ("P", "V"), ("S", "S"), ("R", "V"), ("R", "S"), ("I", "V"), ("I", "S"), ("R", "P"),
        ("I", "R"), ("I", "P"), ("V", "P"), ("S", "P"), ("R", "I"),
    ),
}
EXPERT = {
    ("reinterpret", "R", "I"), ("reinterpret", "R", "V"), ("reinterpret", "R", "P"),
    ("reinterpret", "I", "V"), ("reinterpret", "I", "P"),
    ("convert", "I", "P"), ("convert", "V", "P"), ("convert", "S", "P"), ("convert", "R", "I"),
    ("redistribute", "I", "P"), ("redistribute", "V", "P"), ("redistribute", "S", "P"),
    ("redistribute", "R", "I"),
}
# redistribute's primitive for each pair (value preserving); otherwise convert
_ROUTE = {
    ("S", "R"): "all_gather", ("S", "I"): "all_gather", ("V", "R"): "all_gather",
    ("V", "I"): "all_gather", ("P", "R"): "all_reduce", ("P", "I"): "all_reduce",
    ("P", "S"): "reduce_scatter", ("P", "V"): "reduce_scatter", ("S", "S"): "all_to_all",
}


def collective_shape(op: str, src: str, dst: str, shape: Shape, n: int) -> Shape:
    """The local result shape of op(src -> dst) on a group of n, or Bad if the shape does not fit."""
    sk, dk = src[0], dst[0]
    if op in ("reinterpret", "convert", "redistribute") and src == dst:
        return shape
    if op == "redistribute":
        op = _ROUTE.get((sk, dk), "convert")
    s = list(shape)

    def dim(t: str) -> int:
        i = int(t[2:-1])
        if not 0 <= i < len(s):
            raise Bad("shard dim out of range")
        return i

    if op in ("all_reduce", "reinterpret") or (op == "convert" and dk in "RIP" and sk in "RI"):
        return shape
    if op == "all_gather":
        if sk == "V":
            return (n, *shape)
        s[dim(src)] *= n
        return tuple(s)
    if op == "reduce_scatter" or (op == "convert" and sk in "RI"):
        if dk == "V":
            if not s or s[0] != n:
                raise Bad("dim 0 must index the ranks")
            return tuple(s[1:])
        j = dim(dst)
        if s[j] % n:
            raise Bad("dim not divisible")
        s[j] //= n
        return tuple(s)
    if op == "all_to_all":
        if sk == "V":
            if not s or s[0] % n:
                raise Bad("dim 0 not divisible")
            return shape
        i, j = dim(src), dim(dst)
        s[i] *= n
        if s[j] % n:
            raise Bad("dim not divisible")
        s[j] //= n
        return tuple(s)
    if op == "convert" and dk == "P":  # V -> P or S(i) -> P
        if sk == "V":
            return (n, *shape)
        s[dim(src)] *= n
        return tuple(s)
    raise Bad(f"no shape rule for {op}({src}->{dst})")


# -- statements as candidates -------------------------------------------------------------------


@dataclass
class Value:
    name: str
    shape: Shape
    types: Types


# (template, classes applied inside out, minimum ndim, result shape).  A
# template with two classes is a composition: "torch.exp({0} * 0.1)" is a
# product with a number, then a nonlinear op.
def _same(s: Shape) -> Shape:
    return s


def _swap(s: Shape) -> Shape:
    return (s[1], s[0])


UNARY: Tuple[Tuple[str, Tuple[str, ...], int, Callable[[Shape], Shape]], ...] = (
    ("F.gelu({0})", (NONLINEAR,), 0, _same),
    ("torch.relu({0})", (NONLINEAR,), 0, _same),
    ("{0}.relu()", (NONLINEAR,), 0, _same),
    ("F.silu({0})", (NONLINEAR,), 0, _same),
    ("ACT({0})", (NONLINEAR,), 0, _same),  # a value declared spmd.Activation
    ("torch.tanh({0})", (NONLINEAR,), 0, _same),
    ("torch.sigmoid({0})", (NONLINEAR,), 0, _same),
    ("torch.special.expit({0})", (NONLINEAR,), 0, _same),
    ("torch.linalg.vector_norm({0}, dim=-1)", (NONLINEAR,), 1, lambda s: s[:-1]),
    ("torch.fft.fft({0}).real", (LINEAR,), 1, _same),
    ("torch.exp({0} * 0.1)", (MULTI, NONLINEAR), 0, _same),
    ("{0}.abs()", (NONLINEAR,), 0, _same),
    ("torch.clamp({0}, -1.0, 1.0)", (NONLINEAR,), 0, _same),
    ("torch.softmax({0}, dim=-1)", (NONLINEAR,), 1, _same),
    ("F.softmax({0}, dim=0)", (NONLINEAR,), 1, _same),
    ("F.normalize({0}, dim=-1)", (NONLINEAR,), 1, _same),
    ("{0} ** 2", (NONLINEAR,), 0, _same),
    ("-{0}", (LINEAR,), 0, _same),
    ("{0} * 0.5", (MULTI,), 0, _same),
    ("2.0 * {0}", (MULTI,), 0, _same),
    ("{0} / 4.0", (DIVIDE,), 0, _same),
    ("{0} + 1.0", (AFFINE,), 0, _same),
    ("1.0 - {0}", (AFFINE,), 0, _same),
    ("{0}.T", (LINEAR,), 2, _swap),
    ("{0}.transpose(0, 1)", (LINEAR,), 2, _swap),
    ("{0}.sum()", (LINEAR,), 1, lambda s: ()),
    ("{0}.mean()", (LINEAR,), 1, lambda s: ()),
    ("{0}.sum(dim=0)", (LINEAR,), 2, lambda s: s[1:]),
    ("{0}.mean(dim=-1)", (LINEAR,), 2, lambda s: s[:-1]),
    ("torch.cumsum({0}, dim=0)", (LINEAR,), 1, _same),
    ("{0}.flatten()", (LINEAR,), 2, lambda s: (s[0] * s[1],)),
    ("{0}[0]", (LINEAR,), 1, lambda s: s[1:]),
)


def _matmul(a: Shape, b: Shape) -> Shape:
    if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        raise Bad("matmul shapes")
    return (a[0], b[1])


def _matmul_t(a: Shape, b: Shape) -> Shape:
    if len(b) != 2:
        raise Bad("matmul shapes")
    return _matmul(a, _swap(b))


def _elementwise(a: Shape, b: Shape) -> Shape:
    if a == b or a == ():
        return b
    if b == ():
        return a
    raise Bad("elementwise shapes")


def _cat0(a: Shape, b: Shape) -> Shape:
    if len(a) != len(b) or not a or a[1:] != b[1:]:
        raise Bad("cat shapes")
    return (a[0] + b[0], *a[1:])


def _stack(a: Shape, b: Shape) -> Shape:
    if a != b:
        raise Bad("stack shapes")
    return (2, *a)


def _equal(a: Shape, b: Shape) -> Shape:
    if a != b:
        raise Bad("different shapes")
    return a


def _conv1d(a: Shape, b: Shape) -> Shape:
    """F.conv1d of input [c, l] (as [1, c, l]) by weight [o, c] (as [o, c, 1]) -> [o, l]."""
    if len(a) != 2 or len(b) != 2 or a[0] != b[1]:
        raise Bad("conv1d shapes")
    return (b[0], a[1])


def _masked(a: Shape, b: Shape) -> Shape:
    if b != a and b != ():
        raise Bad("mask shape")
    return a


def _where(a: Shape, b: Shape) -> Shape:
    if a != b or not a:
        raise Bad("where shapes")
    return a


def _index_add(a: Shape, b: Shape) -> Shape:
    if not a or not b or a[1:] != b[1:]:
        raise Bad("index_add shapes")
    return a


SELECT = "select"  # a value from one of two branches: mypy sees the Union of both

BINARY: Tuple[Tuple[str, str, Callable[[Shape, Shape], Shape]], ...] = (
    ("{0} + {1}", LINEAR, _elementwise),
    ("{0} - {1}", LINEAR, _elementwise),
    ("{0} * {1}", MULTI, _elementwise),
    ("{0} @ {1}", MULTI, _matmul),
    ("torch.matmul({0}, {1})", MULTI, _matmul),
    ("{0} @ {1}.T", MULTI, _matmul_t),
    ("F.linear({0}, {1})", MULTI, _matmul_t),
    ('torch.einsum("ij,jk->ik", {0}, {1})', MULTI, _matmul),
    ("torch.cat([{0}, {1}], dim=0)", LINEAR, _cat0),
    ("torch.stack([{0}, {1}])", LINEAR, _stack),
    ("{0} * {1}.detach()", MULTI + "/nograd", _elementwise),
    ("{0} + {1}.detach()", LINEAR + "/nograd", _elementwise),
    ("({0} if FLAG else {1})", SELECT, _equal),
    # zeros where a mask says multiply by its indicator; any other fill is nonlinear
    ("{0}.masked_fill({1}.detach() > 0, 0.0)", MULTI + "/nograd", _masked),
    ("{0}.masked_fill({1}.detach() > 0, 1.0)", NONLINEAR + "/nograd", _masked),
    ("torch.where({1}.detach() < 0, {0}, 0.0)", MULTI + "/nograd", _masked),
    # where by a mask the same on every rank is a linear combination of its branches
    ("torch.where(torch.arange({0}.shape[-1]) % 2 == 0, {0}, {1})", LINEAR, _where),
    # rows of one added into another at indices the same on every rank: linear in both
    ("{0}.index_add(0, torch.arange({1}.shape[0]) % {0}.shape[0], {1})", LINEAR, _index_add),
    ("F.conv1d({0}.unsqueeze(0), {1}.unsqueeze(-1)).squeeze(0)", MULTI, _conv1d),
)


def _fits(shape: Shape) -> bool:
    numel = 1
    for d in shape:
        numel *= d
    return len(shape) <= MAX_NDIM and numel <= MAX_NUMEL


def _types_of_op(cls: str, operands: Sequence[Types], nograd: Sequence[bool] = ()) -> Tuple[Types, List[str]]:
    out: Types = {}
    why: List[str] = []
    for a in AXES:
        try:
            out[a] = op_rule(cls, [t[a] for t in operands], nograd)
        except Bad as e:
            out[a] = None
            why.append(f"{a}: {e}")
    return out, why


@dataclass
class Candidate:
    stmt: Stmt
    shape: Shape
    types: Types
    why: List[str]  # empty: the generator's rules accept it


def _types_of_chain(classes: Sequence[str], x: Types) -> Tuple[Types, List[str]]:
    types, why = x, []
    for cls in classes:
        types, w = _types_of_op(cls, [types])
        why += w
    return types, why


@dataclass(frozen=True)
class Helper:
    """A module-level function the program calls: annotated, one torch op in its body.

    A "part_" helper names the tp axis only (dp is unknown inside it)."""

    name: str
    params: Tuple[Tuple[str, str], ...]
    returns: Tuple[Tuple[str, str], ...]
    template: str

    def render(self) -> str:
        p = ", ".join(f"{a}={t}" for a, t in self.params)
        r = ", ".join(f"{a}={t}" for a, t in self.returns)
        body = self.template.format("a")
        return (
            f"def {self.name}(a: Annotated[Tensor, Spmd({p})]) -> Annotated[Tensor, Spmd({r})]:\n"
            f"    return {body}\n"
        )

    def call(self, x: Value, name: str) -> Candidate:
        params, types, why = dict(self.params), dict(x.types), []
        for a in AXES:
            if a not in params:
                types[a] = None  # unknown: the helper does not name it
                continue
            t = x.types[a]
            if t is not None and _local(t) != _local(params[a]):
                why.append(f"argument is {a}={t}, {self.name} takes {params[a]}")
            types[a] = dict(self.returns)[a]
        return Candidate(Stmt(name, expr=f"{self.name}({x.name})"), x.shape, types, why)


def helper_strategy(index: int) -> st.SearchStrategy[Helper]:
    @st.composite
    def draw_helper(draw: st.DrawFn) -> Helper:
        partial = draw(st.integers(0, 5)) == 0
        axes = ("tp",) if partial else AXES
        params = {a: draw(st.sampled_from(["R", "I", "V", "P", "S(0)", "S(1)"])) for a in axes}
        full = {a: params.get(a, "R") for a in AXES}
        shaped = [(t, c) for t, c, m, fn in UNARY if m == 0 and fn is _same]
        valid = [(t, c) for t, c in shaped if not _types_of_chain(c, full)[1]]
        template, classes = valid[draw(st.integers(0, len(valid) - 1))] if valid else shaped[0]
        out = _types_of_chain(classes, full)[0]
        returns = tuple((a, out[a] or "R") for a in axes)
        name = f"{'part_' if partial else ''}helper{index}"
        return Helper(name, tuple(params.items()), returns, template)

    return draw_helper()


def unary_candidates(name: str, x: Value, helpers: Sequence[Helper] = ()) -> List[Candidate]:
    out = [h.call(x, name) for h in helpers]
    for template, classes, min_ndim, shape_fn in UNARY:
        if len(x.shape) < min_ndim or (min_ndim == 2 and len(x.shape) != 2):
            continue
        types, why = _types_of_chain(classes, x.types)
        out.append(Candidate(Stmt(name, expr=template.format(x.name)), shape_fn(x.shape), types, why))
    return out


def write_candidates(name: str, x: Value, values: Sequence[Value]) -> List[Candidate]:
    """`name = x.clone()` then an item write into it: a number (0.0 adds
    nothing; 1.0 is affine) or a value shaped like a row.  An in-place write
    keeps name's type: the write is the linear op of the two, and a result of
    another type is an error."""
    if not x.shape:
        return []
    out = []
    writes = [("[0] = 0.0", None), ("[0] = 1.0", None)] + [
        (f"[0] = {y.name}", y) for y in values if y.shape == x.shape[1:] and y.name != x.name
    ] + [(f"[0] = {y.name}[0]", y) for y in values if y.shape == x.shape and y.name != x.name]
    for write, y in writes:
        if y is None:
            result, why = _types_of_op(AFFINE, [x.types]) if write.endswith("1.0") else (dict(x.types), [])
        else:
            result, why = _types_of_op(LINEAR, [x.types, y.types])
        for a in AXES:
            r, t = result[a], x.types[a]
            if r is not None and t is not None and _local(r) != _local(t):
                why.append(f"{a}: the write makes {name} {r} where it is {t}")
        out.append(Candidate(Stmt(name, expr=f"{x.name}.clone()", write=write), x.shape, dict(x.types), why))
    return out


def binary_candidates(name: str, x: Value, y: Value, flag: bool) -> List[Candidate]:
    out = []
    for template, cls, shape_fn in BINARY:
        try:
            shape = shape_fn(x.shape, y.shape)
        except Bad:
            continue
        if cls == SELECT:
            taken = x if flag else y
            types, why = dict(taken.types), []
            if x.types != y.types:
                why = ["a Union of two types"]
        else:
            base, _, ng = cls.partition("/")
            types, why = _types_of_op(base, [x.types, y.types], (False, True) if ng else ())
        out.append(Candidate(Stmt(name, expr=template.format(x.name, y.name)), shape, types, why))
    return out


def _src_choices(t: Optional[str], shape: Shape) -> List[str]:
    """The src a careful author writes for a value of type t (S(i) for any fitting i)."""
    if t is None:
        return []
    if t == "V" or t.startswith("S("):
        return ["V"] + [f"S({i})" for i in range(len(shape))]
    return [t]


def _all_types(shape: Shape) -> List[str]:
    return ["R", "I", "V", "P"] + [f"S({i})" for i in range(len(shape))]


def collective_candidates(name: str, x: Value, careless: bool) -> List[Candidate]:
    """Every collective on x the generator can shape; `careless` adds wrong src/dst."""
    out = []
    axes: List[Axis] = ["dp", "tp", ("dp", "tp")]
    for op, pairs in ACCEPTS.items():
        for axis in axes:
            group = axis if isinstance(axis, tuple) else (axis,)
            if len(group) > 1 and op not in ("all_reduce", "all_gather", "reduce_scatter"):
                continue
            n = SIZE ** len(group)
            cur = {x.types[a] for a in group}
            own = _src_choices(next(iter(cur)), x.shape) if len(cur) == 1 else []
            srcs = _all_types(x.shape) if careless else own
            for src in srcs:
                for dst in _all_types(x.shape):
                    key = (src[0], dst[0])
                    valid_pair = key in pairs
                    if not careless and not valid_pair:
                        continue
                    try:
                        shape = collective_shape(op, src, dst, x.shape, n) if valid_pair else x.shape
                    except Bad:
                        continue
                    if not _fits(shape):
                        continue
                    why = []
                    if src not in own and not (src[0] in "VS" and own and own[0] == "V"):
                        why.append(f"src={src} does not match the value")
                    if not valid_pair:
                        why.append(f"{op} does not take {src}->{dst}")
                    expert = (op, src[0], dst[0]) in EXPERT
                    for flag in (False, True) if expert else (False,):
                        w = why + (["expert-only without expert_mode"] if expert and not flag else [])
                        types = dict(x.types)
                        for a in group:
                            types[a] = None if w else dst
                        stmt = Stmt(name, op=op, arg=x.name, axis=axis, src=src, dst=dst, expert=flag)
                        out.append(Candidate(stmt, shape, types, w))
    return out


# -- the strategy -----------------------------------------------------------------------------

_INPUT_TYPES = ["R", "R", "I", "I", "V", "S(0)", "S(1)", "S(0)", "S(1)", "P"]
_DIMS = [2, 4]


@st.composite
def inputs(draw: st.DrawFn) -> Tuple[Input, ...]:
    k = draw(st.integers(1, 3))
    out = []
    for i in range(k):
        types = {a: draw(st.sampled_from(_INPUT_TYPES)) for a in AXES}
        shape = (draw(st.sampled_from(_DIMS)), draw(st.sampled_from(_DIMS)))
        eligible = all(t in ("R", "I", "P", "V") or t.startswith("S(") for t in types.values())
        spec = eligible and any(t.startswith("S(") for t in types.values()) and draw(
            st.integers(0, 4)
        ) == 0
        out.append(Input(f"x{i}", types, shape, spec))
    return tuple(out)


def _pick(draw: st.DrawFn, cands: List[Candidate], p_bad: int) -> Optional[Candidate]:
    """A candidate: one the rules accept, except with chance 1/p_bad any one."""
    if not cands:
        return None
    good = [c for c in cands if not c.why]
    pool = cands if (not good or draw(st.integers(0, p_bad - 1)) == 0) else good
    return pool[draw(st.integers(0, len(pool) - 1))]


def _finish_candidates(name: str, x: Value) -> List[Candidate]:
    """Collectives that move one axis of x towards I or P (the scalar-loss types)."""
    out = []
    for c in collective_candidates(name, x, careless=False):
        s = c.stmt
        if c.why or isinstance(s.axis, tuple):
            continue
        before, after = x.types[s.axis], c.types[s.axis]  # type: ignore[index]
        if before not in ("I", "P") and after in ("I", "P"):
            out.append(c)
    return out


def _spelling(draw: st.DrawFn, t: str, shape: Shape) -> str:
    """How an annotation may write type t: V and S(i) are interchangeable in local SPMD."""
    if _local(t) != "V":
        return t
    return draw(st.sampled_from(["V"] + [f"S({i})" for i in range(len(shape))]))


# statement kinds, weighted: "call" calls a helper, "select" takes a value from one of two branches
_KINDS = ["unary"] * 3 + ["binary"] * 4 + ["collective"] * 6 + ["call"] * 2 + ["select", "write"]


@st.composite
def programs(draw: st.DrawFn, max_statements: int = 6) -> Program:
    flag = draw(st.booleans())
    helpers = [draw(helper_strategy(j)) for j in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2])))]
    prelude = f"FLAG: bool = {flag}\n" + "".join(f"\n\n{h.render()}" for h in helpers)
    ins = draw(inputs())
    values = [Value(x.name, x.shape, dict(x.types)) for x in ins]
    statements: List[Stmt] = []
    why: List[str] = []
    steps = draw(st.integers(1, max_statements))
    p_bad = 12

    def add(c: Candidate) -> Value:
        stmt, types = c.stmt, c.types
        why.extend(f"{stmt.name}: {w}" for w in c.why)
        if all(t is not None for t in types.values()) and draw(st.integers(0, 5)) == 0:
            # an annotated local: usually its own type, sometimes a wrong one
            declared = {a: _spelling(draw, t, c.shape) for a, t in types.items()}  # type: ignore[arg-type]
            if draw(st.integers(0, 5)) == 0:
                a = draw(st.sampled_from(AXES))
                declared[a] = draw(st.sampled_from(_all_types(c.shape)))
                if _local(declared[a]) != _local(types[a]):  # type: ignore[arg-type]
                    why.append(f"{stmt.name}: declared {a}={declared[a]} but the value is {types[a]}")
            stmt = replace(stmt, annot=tuple(sorted(declared.items())))
            types = dict(declared)
        statements.append(stmt)
        v = Value(stmt.name, c.shape, types)
        values.append(v)
        return v

    for k in range(steps):
        name = f"v{k}"
        kind = draw(st.sampled_from(_KINDS))
        # prefer recent values so the statements chain
        x = values[-1 - draw(st.integers(0, min(2, len(values) - 1)))]
        cands: List[Candidate] = []
        if kind in ("binary", "select"):
            for y in values:
                cands += binary_candidates(name, x, y, flag) + binary_candidates(name, y, x, flag)
            if kind == "select":
                cands = [c for c in cands if " if FLAG else " in c.stmt.expr and c.stmt.expr.count(x.name) == 1]
        elif kind == "call":
            cands = [h.call(x, name) for h in helpers]
        elif kind == "write":
            cands = write_candidates(name, x, values)
            bad = [c for c in cands if c.why]
            if bad and draw(st.booleans()):  # a careless write: the hole once found
                cands = bad
        elif kind == "collective":
            careless = draw(st.integers(0, 5)) == 0
            cands = collective_candidates(name, x, careless)
            if careless:
                c = _pick(draw, [c for c in cands if _fits(c.shape)], 2)
                if c is not None:
                    add(c)
                    continue
        if not cands:
            cands = unary_candidates(name, x, helpers)
        c = _pick(draw, [c for c in cands if _fits(c.shape)], p_bad)
        if c is not None:
            add(c)
    if not statements:
        add(unary_candidates("v0", values[-1])[0])
    last = values[-1]
    # usually end with a loss-like value: I or P on each axis, often a scalar
    if draw(st.integers(0, 4)) > 0:
        for k in range(2):
            cands = _finish_candidates(f"v{len(statements)}", last)
            if not cands:
                break
            last = add(cands[draw(st.integers(0, len(cands) - 1))])
        if last.shape and draw(st.booleans()):
            last = add(Candidate(Stmt(f"v{len(statements)}", expr=f"{last.name}.sum()"), (),
                                 *_types_of_op(LINEAR, [last.types])))
    out_types: Dict[str, str] = {}
    for a in AXES:
        t = last.types[a]
        if t is None or draw(st.integers(0, 11)) == 0:
            t = draw(st.sampled_from(["R", "I", "V", "P"] + [f"S({i})" for i in range(len(last.shape))]))
            if last.types[a] is not None and _local(t) != _local(last.types[a]):
                why.append(f"return: {a}={t} but the value is {last.types[a]}")
        else:
            t = _spelling(draw, t, last.shape)
        out_types[a] = t
    return Program(tuple(ins), tuple(statements), last.name, out_types, not why, tuple(why), prelude)
