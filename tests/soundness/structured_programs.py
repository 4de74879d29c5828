"""Random local programs with structure: Union values from runtime flags, module attributes, loops.

Three hypothesis strategies over the same dp x tp mesh, value model and
generator rules as programs.py (whose candidates they reuse):

- `union_programs`: 5-6 values `u = (a if flag0 else b)` with the flags
  runtime arguments, combined in ONE op (torch.cat, torch.stack or a chain
  of +), then sometimes a nonlinear op.  Mostly every alternative has one
  type; sometimes one alternative of one value (first, middle or last) has
  another, so only some combinations are wrong (the hole of a Union operand
  set checked only in part).  Each program runs once per flag assignment.
- `class_programs`: an nn.Module with class-body annotated attributes that
  forward writes (`self.c0 = <expr>`) and reads back; sometimes a write of
  another type than declared.
- `loop_programs`: `for _ in range(2):` re-binding a value `h`; the body is
  typed right on the first iteration and sometimes breaks a rule on the
  second.
- `buffer_programs`: a buffer `buf = torch.zeros(...)` (sometimes ones)
  filled in place (`buf += x`, `buf.add_(x)`, `buf.sub_(x)`) or rebound to
  a sum (`buf = buf + x`, `buf - x`, `torch.add(buf, x)`, sometimes a
  longer sum `(buf + x) - z`), straight or in a loop of two, sometimes read after the op in the loop; sometimes another
  name holds the buffer first (`keep = buf`), whose type an in-place op
  then makes wrong.

Each program is a `Program` (programs.py) whose `statements` are what the
ranks execute in order, so meaning.py's `run` gives its meaning unchanged:
a loop's body appears twice, and an attribute `self.c0` is the name
`self_c0` there.  `source()` renders the module mypy checks and the ranks run.
`runs()` gives the programs to judge: one per flag assignment.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from hypothesis import strategies as st

from .programs import (
    AXES, LINEAR, NONLINEAR, Candidate, Input, Program, Stmt, Types, Value, _all_types,
    _fits, _local, _pick, _spelling, _types_of_op, annotation, binary_candidates,
    collective_candidates, inputs, unary_candidates,
)

KINDS = ("union", "class", "loop", "buffer")
_TYPES = ["R", "I", "V", "P", "S(0)", "S(1)"]


@dataclass(frozen=True)
class FlagProgram(Program):
    """Straight-line code with `flags` runtime bool parameters; `values` binds them for a run."""

    flags: int = 1
    values: Tuple[bool, ...] = ()

    def source(self, fn: str = "program") -> str:
        src = super().source(fn)
        params = "".join(f"    flag{i}: bool = False,\n" for i in range(self.flags))
        src = src.replace("\n) -> ", f"\n{params}) -> ", 1)
        if self.values:  # the ranks call program(*tensors): bind the flags
            args = ", ".join(f"flag{i}={v}" for i, v in enumerate(self.values))
            src += f"\n\n_checked = {fn}\n\n\ndef {fn}(*xs):  # type: ignore\n    return _checked(*xs, {args})\n"
        return src

    def runs(self) -> List[Program]:
        out: List[Program] = []
        for vs in itertools.product((False, True), repeat=self.flags):
            bind = "".join(f"flag{i} = {v}\n" for i, v in enumerate(vs))  # the meaning's globals
            out.append(replace(self, values=vs, prelude=self.prelude + bind))
        return out


@dataclass(frozen=True)
class ClassProgram(Program):
    """forward of `class Block(nn.Module)` with class-body attributes (name -> types), called by program."""

    attrs: Tuple[Tuple[str, Tuple[Tuple[str, str], ...]], ...] = ()

    def source(self, fn: str = "program") -> str:
        params = "".join(f"        {x.name}: {x.annotation()},\n" for x in self.inputs)
        body = "".join(f"        {s.render().replace('self_', 'self.')}\n" for s in self.statements)
        fields = "".join(f"    {n[len('self_'):]}: {annotation(dict(t), False, 0)}\n" for n, t in self.attrs)
        ret = annotation(self.out_types, False, 0)
        args = ", ".join(x.name for x in self.inputs)
        outer = "".join(f"    {x.name}: {x.annotation()},\n" for x in self.inputs)
        return (
            f"{self.header}\n\nclass Block(torch.nn.Module):\n{fields}\n"
            f"    def forward(\n        self,\n{params}    ) -> {ret}:\n{body}"
            f"        return {self.result.replace('self_', 'self.')}\n\n\n"
            f"def {fn}(\n{outer}) -> {ret}:\n    return Block()({args})\n"
        )

    def runs(self) -> List[Program]:
        return [self]


@dataclass(frozen=True)
class LoopProgram(Program):
    """statements = pre + body + body + post (as run); the source has the body once in a loop."""

    pre: int = 0
    body: int = 0

    def source(self, fn: str = "program") -> str:
        once = self.statements[: self.pre + self.body] + self.statements[self.pre + 2 * self.body :]
        src = replace(self, statements=once, pre=0, body=0)
        text = Program.source(src, fn)
        lines = [f"    {s.render()}\n" for s in once]
        looped = lines[: self.pre] + ["    for _ in range(2):\n"]
        looped += ["    " + ln for ln in lines[self.pre : self.pre + self.body]] + lines[self.pre + self.body :]
        return text.replace("".join(lines), "".join(looped), 1)

    def runs(self) -> List[Program]:
        return [self]


def _ret_types(draw: st.DrawFn, last: Value, why: List[str]) -> Dict[str, str]:
    """The return annotation: the value's types (spelled either way), sometimes a wrong one."""
    out: Dict[str, str] = {}
    for a in AXES:
        t = last.types[a]
        if t is None or draw(st.integers(0, 9)) == 0:
            t = draw(st.sampled_from(_all_types(last.shape)))
            if last.types[a] is not None and _local(t) != _local(last.types[a]):  # type: ignore[arg-type]
                why.append(f"return: {a}={t} but the value is {last.types[a]}")
        else:
            t = _spelling(draw, t, last.shape)
        out[a] = t
    return out


# -- unions ---------------------------------------------------------------------------------------

_COMBINE = (
    ("torch.cat([{}], dim=0)", LINEAR, lambda s, k: (s[0] * k, *s[1:])),
    ("torch.stack([{}])", LINEAR, lambda s, k: (k, *s)),
    ("{}", LINEAR, lambda s, k: s),  # u0 + u1 + ...
)


def _combo_types(cls: str, alts: Sequence[Sequence[Types]]) -> Tuple[Optional[Types], List[str]]:
    """The one result type of every combination of alternatives, or the reasons it has none."""
    results, why = set(), []
    for combo in itertools.product(*alts):
        types, w = _types_of_op(cls, list(combo))
        why += w
        results.add(tuple(sorted(types.items())))
    if len(results) > 1:
        why.append("the combinations of alternatives have different types")
    if why:
        return None, sorted(set(why))
    return dict(next(iter(results))), []


def _respell(types: Types) -> Dict[str, str]:
    """The same local types written the other way (V <-> S(0)): a distinct member of a Union."""
    other = {"V": "S(0)", "S(0)": "V", "S(1)": "V"}
    return {a: other.get(t, t) for a, t in types.items()}  # type: ignore[misc]


@st.composite
def union_programs(draw: st.DrawFn) -> FlagProgram:
    """x0 and x1 are the same local types written two ways (so every u_j is a Union of two
    members, 2**k combinations); x2 is another type on one axis, in some u_j's branch."""
    base = {a: draw(st.sampled_from(["V", "S(0)", "V", "R", "I", "P"])) for a in AXES}
    odd = dict(base)
    a = draw(st.sampled_from(AXES))
    # P first and thrice: a Partial alternative among Varying ones is the hole once found
    odd[a] = draw(st.sampled_from([t for t in ["P", "P"] + _TYPES if _local(t) != _local(base[a])]))
    shape = (2, 4)
    ins = (Input("x0", base, shape), Input("x1", _respell(base), shape), Input("x2", odd, shape))  # type: ignore[arg-type]
    nflags, k = draw(st.integers(1, 2)), draw(st.integers(5, 6))
    # the odd value in u0 or u1, as the second alternative: outside the first 16 combinations
    wrong = draw(st.sampled_from([0, 1, 0, k - 1, k // 2, None])) if draw(st.integers(0, 3)) else None
    stmts: List[Stmt] = []
    alts: List[List[Types]] = []
    for j in range(k):
        pair = list(draw(st.sampled_from([("x0", "x1"), ("x1", "x0"), ("x0", "x0")])))
        if j == wrong:
            pair[1 - draw(st.integers(0, 1))] = "x2"
        f = draw(st.integers(0, nflags - 1))
        stmts.append(Stmt(f"u{j}", expr=f"({pair[0]} if flag{f} else {pair[1]})"))
        alts.append([dict(next(x.types for x in ins if x.name == n)) for n in pair])
    template, cls, shape_fn = draw(st.sampled_from(_COMBINE))
    names = [f"u{j}" for j in range(k)]
    expr = " + ".join(names) if template == "{}" else template.format(", ".join(names))
    stmts.append(Stmt("v0", expr=expr))
    types, why = _combo_types(cls, alts)
    shape = shape_fn(shape, k)
    last = Value("v0", shape, types or {a: None for a in AXES})
    if draw(st.booleans()):
        post, pcls = draw(st.sampled_from([("F.gelu(v0)", NONLINEAR), ("v0 * 2.0", LINEAR), ("v0.sum()", LINEAR)]))
        pshape = () if post.endswith(".sum()") else shape
        ptypes, w = _types_of_op(pcls, [last.types])
        why += w
        stmts.append(Stmt("v1", expr=post))
        last = Value("v1", pshape, ptypes)
    out = _ret_types(draw, last, why)
    return FlagProgram(ins, tuple(stmts), last.name, out, not why, tuple(why), flags=nflags)


# -- classes with module attributes ------------------------------------------------------------------


@st.composite
def class_programs(draw: st.DrawFn) -> ClassProgram:
    ins = draw(inputs())
    values = [Value(x.name, x.shape, dict(x.types)) for x in ins]
    stmts: List[Stmt] = []
    why: List[str] = []
    attrs = []
    for j in range(draw(st.integers(1, 2))):
        x = values[-1 - draw(st.integers(0, min(1, len(values) - 1)))]
        name = f"self_c{j}"
        cands = [Candidate(Stmt(name, expr=x.name), x.shape, dict(x.types), [])]
        cands += [c for c in unary_candidates(name, x) if _fits(c.shape)]
        c = _pick(draw, cands, 6)
        why += [f"{name}: {w}" for w in c.why]
        declared = {a: _spelling(draw, t or "R", c.shape) for a, t in c.types.items()}
        if draw(st.integers(0, 2)) == 0:  # a write of another type than declared
            a = draw(st.sampled_from(AXES))
            declared[a] = draw(st.sampled_from(_all_types(c.shape)))
        for a in AXES:
            t = c.types[a]
            if t is not None and _local(declared[a]) != _local(t):
                why.append(f"{name}: declared {a}={declared[a]} but written {t}")
        attrs.append((name, tuple(sorted(declared.items()))))
        stmts.append(c.stmt)
        attr = Value(name, c.shape, dict(declared))  # read back: the declared type
        cands = unary_candidates(f"v{j}", attr)
        for y in values:
            cands += [c for c in binary_candidates(f"v{j}", attr, y, False) if "FLAG" not in c.stmt.expr]
        c = _pick(draw, [c for c in cands if _fits(c.shape)], 10)
        why += [f"v{j}: {w}" for w in c.why]
        stmts.append(c.stmt)
        values.append(Value(c.stmt.name, c.shape, c.types))
    last = values[-1]
    out = _ret_types(draw, last, why)
    return ClassProgram(ins, tuple(stmts), last.name, out, not why, tuple(why), attrs=tuple(attrs))


# -- loops ------------------------------------------------------------------------------------------


def _body_candidates(h: Value, others: Sequence[Value]) -> List[Candidate]:
    """Statements `h = ...` that keep h's shape (so the loop can run again)."""
    cands = unary_candidates("h", h) + collective_candidates("h", h, careless=True)
    for y in others:
        cands += binary_candidates("h", h, y, False) + binary_candidates("h", y, h, False)
    return [c for c in cands if c.shape == h.shape and "FLAG" not in c.stmt.expr]


def _retype(stmt: Stmt, h: Value, others: Sequence[Value]) -> Candidate:
    """stmt typed again with h's new types (its second iteration)."""
    for c in _body_candidates(h, others):
        if c.stmt == stmt:
            return c
    return Candidate(stmt, h.shape, {a: None for a in AXES}, ["not typed on the second iteration"])


@st.composite
def loop_programs(draw: st.DrawFn) -> LoopProgram:
    ins = draw(inputs())
    others = [Value(x.name, x.shape, dict(x.types)) for x in ins]
    h = others[draw(st.integers(0, len(others) - 1))]
    pre = [Stmt("h", expr=h.name)]
    h = Value("h", h.shape, dict(h.types))
    body: List[Stmt] = []
    why: List[str] = []
    for _ in range(draw(st.integers(1, 2))):
        cands = [c for c in _body_candidates(h, others) if not c.why]
        changing = [c for c in cands if c.types != h.types]
        pool = changing if changing and draw(st.booleans()) else cands
        if not pool:
            break
        c = pool[draw(st.integers(0, len(pool) - 1))]
        body.append(c.stmt)
        h = Value("h", c.shape, c.types)
    if not body:
        body.append(Stmt("h", expr="h * 0.5"))
        h = Value("h", h.shape, _types_of_op(LINEAR, [h.types])[0])
    # the second iteration, by the generator's rules
    for s in body:
        c = _retype(s, h, others)
        why += [f"second iteration: {w}" for w in c.why]
        h = Value("h", c.shape, c.types)
    stmts = tuple(pre) + tuple(body) * 2 + (Stmt("v0", expr="h * 1.0"),)
    last = Value("v0", h.shape, h.types)
    out = _ret_types(draw, last, why)
    return LoopProgram(ins, stmts, "v0", out, not why, tuple(why), pre=len(pre), body=len(body))


# -- buffers filled in place ------------------------------------------------------------------------


@dataclass(frozen=True)
class InPlace(Stmt):
    """`buf += x` or `buf.add_(x)`: rendered as the write alone (meaning.run
    evaluates `expr`, the name itself, then runs the write on it)."""

    def render(self) -> str:
        return f"{self.name}{self.write}"


_FILLS = (" += {}", ".add_({})", ".sub_({})")
_ACCUMULATE = ("buf + {}", "buf - {}", "torch.add(buf, {})")  # out of place, rebinding buf


@st.composite
def buffer_programs(draw: st.DrawFn) -> Program:
    """Straight code is a FlagProgram without flags (one run)."""
    ins = draw(inputs())
    x = ins[draw(st.integers(0, len(ins) - 1))]
    same = [y for y in ins if y.shape == x.shape]
    zeros = draw(st.integers(0, 4)) > 0
    factory = "zeros" if zeros else "ones"
    # float64 like the inputs: a float32 buffer rounds `buf += x; buf -= x` to noise, not 0
    pre = [Stmt("buf", expr=f"torch.{factory}({', '.join(map(str, x.shape))}, dtype=torch.float64)")]
    alias = draw(st.integers(0, 4)) == 0
    if alias:  # another name holds the buffer: the in-place op changes its value, not its type
        pre.append(Stmt("keep", expr="buf"))
    fills = [same[draw(st.integers(0, len(same) - 1))] for _ in range(draw(st.integers(1, 2)))]
    rebound = draw(st.booleans())  # buf = buf + x: the name is rebound, keep keeps the zeros
    terms: List[List[Value]] = [[y] for y in fills]  # what each statement of the body adds to buf
    if rebound:
        body: List[Stmt] = []
        for each in terms:
            form = draw(st.sampled_from(_ACCUMULATE))
            if form.startswith("buf") and draw(st.integers(0, 2)) == 0:  # a sum whose left spine holds the op: buf = buf + x - z
                each.append(same[draw(st.integers(0, len(same) - 1))])
                form = "(" + form + ") " + draw(st.sampled_from(("+", "-"))) + " {}"
            body.append(Stmt("buf", expr=form.format(*(y.name for y in each))))
    else:
        body = [InPlace("buf", expr="buf", write=draw(st.sampled_from(_FILLS)).format(y.name)) for y in fills]
    looped = draw(st.booleans())
    peek = looped and draw(st.integers(0, 3)) == 0
    if peek:  # read after the op in the loop
        body.append(Stmt("seen", expr="buf * 1.0"))
    why: List[str] = []
    # the rule: zeros are no term where the name holds nothing else when the
    # op reads it; a rebinding op's name read before (keep = buf) or again
    # in the loop (seen) is taken as a term
    term = not zeros or (rebound and (alias or peek))
    types: Optional[Types] = {a: "R" for a in AXES} if term else None  # None: zeros, which fit any type
    for y in [y for each in terms for y in each] * (2 if looped else 1):
        if types is None:
            types = dict(y.types)
        else:
            types, w = _types_of_op(LINEAR, [types, y.types])
            why += w
    assert types is not None
    if alias and not rebound:  # keep is typed as the buffer was made, R without gradient; the fill gives it one
        why.append("keep holds the buffer the in-place op changed")
        types = {a: "R" for a in AXES}
    post = (Stmt("v0", expr=("keep" if alias and not rebound else "buf") + " * 1.0"),)
    out = _ret_types(draw, Value("v0", x.shape, types), why)
    if looped:
        stmts = tuple(pre) + tuple(body) * 2 + post
        return LoopProgram(ins, stmts, "v0", out, not why, tuple(why), pre=len(pre), body=len(body))
    return FlagProgram(ins, tuple(pre) + tuple(body) + post, "v0", out, not why, tuple(why), flags=0)


STRATEGIES = {"union": union_programs, "class": class_programs, "loop": loop_programs, "buffer": buffer_programs}
