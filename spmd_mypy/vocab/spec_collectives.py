"""Per-axis collectives and coercions acting on global types (partition specs).

In global SPMD only the S(i) forms of the collectives have a rule (the V
forms add or remove a dim, which a spec cannot say), and each acts on the
last (minor) axis that shards its dim:

  all_gather(S(i) -> R | I)      the axis leaves dim i (R, or I)
  all_reduce(P -> R | I)         the axis leaves partial
  reduce_scatter(P -> S(i))      the axis becomes the minor axis of dim i
  all_to_all(S(i) -> S(j))       the axis moves from dim i to the minor end of dim j
  convert(R | I -> S(i))         a local split: the axis becomes the minor axis of dim i
  convert(R | I -> P), convert(S(i) -> P)
                                 the value is kept on one rank / padded: partial
  reinterpret / convert R <-> I  the spec does not change

Global sizes, dtype and the no-gradient flag never change.  An axis tuple
acts on the flattened group: its axes must be the minor axes of the dim, in
order.  Any other use (an axis that is not the minor one, a V form, a
reinterpret that changes the value) raises FactorError whose fix is the
spec-level spmd.redistribute(x, src=Spmd(...), dst=Spmd(...)) or the call
that fits.

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import List, Mapping, Optional, Sequence, Tuple, Union

from .collectives import CollectiveError, Step, fix_call, plan
from .factors import FactorError, redistribute_call
from .globaltype import GlobalType
from .subaxis import merge_roles, overlap, parse_axis_ref
from .localtype import AxisType, I, P, R, Shard, V, kind
from .spec import SpecError

__all__ = ["apply_collective"]

AxisArg = Union[str, Tuple[str, ...]]


def _call(op: str, name: str, axis: AxisArg, src: AxisType, dst: AxisType) -> str:
    return f"spmd.{op}({name}, {axis!r}, src={src}, dst={dst})"


def _drop(entries: List[List[str]], axes: Sequence[str]) -> None:
    for e in entries:
        e[:] = [a for a in e if a not in axes]


def _intended(t: GlobalType, axes: Sequence[str], dst: AxisType) -> Optional[GlobalType]:
    """The type the user most likely wants: axes off their dim, then placed as dst says."""
    entries = [list(e) for e in t.spec.dims]
    _drop(entries, axes)
    partial = set(t.partial) - set(axes)
    local = {a: v for a, v in t.local.items() if a not in axes}
    if isinstance(dst, Shard):
        entries[dst.dim].extend(axes)
    elif dst is P:
        partial |= set(axes)
    elif dst in (I, V):
        local.update({a: dst for a in axes})
    try:
        return t.replace(spec=[tuple(e) if e else None for e in entries], partial=partial, local=local)
    except SpecError:
        return None


def _norm(t: GlobalType, x: AxisType, what: str, op: str) -> AxisType:
    if isinstance(x, Shard):
        try:
            return x.normalized(t.ndim)
        except IndexError as e:
            raise FactorError(f"spmd.{op}: {what}={x}: {e}", code="bad-param") from None
    return x


def apply_collective(
    t: GlobalType,
    op: str,
    axis: AxisArg,
    src: AxisType,
    dst: AxisType,
    *,
    name: str = "x",
    expert_mode: bool = False,
    mesh: Optional[Mapping[str, int]] = None,
) -> GlobalType:
    """The global type after spmd.<op>(x, axis, src=src, dst=dst) on a value of type t
    (`mesh`: the axis sizes, when known, to write merged sub-axes as their axis)."""
    axes: Tuple[str, ...] = (axis,) if isinstance(axis, str) else tuple(axis)
    if not axes:
        raise FactorError(f"spmd.{op}: no mesh axis given", code="bad-param")
    src = _norm(t, src, "src", op)
    dst = _norm(t, dst, "dst", op)
    where = f"spmd.{op}({name}, {axis!r}, src={src}, dst={dst}) on {name}: {t}"
    try:
        steps = plan(op, src, dst, axis=axis, expert_mode=expert_mode)
    except CollectiveError as e:
        raise FactorError(f"{where}: {e}", fix_call(src, dst, axis, name) or "", code="collective") from None
    _check_src(t, op, axis, axes, src, dst, name, where)
    for step in steps:
        t = _apply(t, step, axis, axes, name, where, mesh)
    return t


def _check_whole(t: GlobalType, axes: Tuple[str, ...], name: str, where: str) -> None:
    """An axis the value holds only in parts (sub-axes), or a part of one it holds
    whole, has no per-axis type: the collective must name what the type names."""
    named = t.axes
    for a in axes:
        if a in named:
            continue
        ref = parse_axis_ref(a)
        held = sorted(b for b in named if overlap(ref, parse_axis_ref(b)))
        if held:
            where_held = ", ".join(
                f"{b} ({'dim ' + str(t.spec.dim_of(b)) if t.spec.dim_of(b) is not None else t.axis_type(b)})"
                for b in held
            )
            raise FactorError(
                f"{where}: {name} holds {a!r} as {where_held}; a per-axis op acts on an axis or part "
                f"the type names: name {held[-1]!r}, or use the spec-level redistribute",
                "",
                code="split-axis",
            )


def _check_src(
    t: GlobalType,
    op: str,
    axis: AxisArg,
    axes: Tuple[str, ...],
    src: AxisType,
    dst: AxisType,
    name: str,
    where: str,
) -> None:
    _check_whole(t, axes, name, where)
    actual = [t.axis_type(a) for a in axes]
    if all(x == src for x in actual):
        if isinstance(src, Shard):
            entry = t.spec[src.dim]
            if entry[len(entry) - len(axes) :] != axes:
                target = _intended(t, axes, dst)
                raise FactorError(
                    f"{where}: dim {src.dim} is sharded on {entry} (major to minor) and a per-axis "
                    f"op acts only on its last (minor) "
                    + ("axis" if len(axes) == 1 else f"{len(axes)} axes, in order")
                    + "; use the spec-level redistribute",
                    redistribute_call(name, t, target) if target is not None else "",
                    code="not-minor",
                )
        return
    shown = ", ".join(f"{a!r} is {x}" for a, x in zip(axes, actual))
    fix = ""
    if len(set(map(str, actual))) == 1:
        got = actual[0]
        if isinstance(got, Shard) and t.spec[got.dim][-len(axes) :] == axes:
            try:
                plan(op, got, dst, axis=axis)
                fix = _call(op, name, axis, got, dst)
            except CollectiveError:
                fix = fix_call(got, dst, axis, name) or ""
        else:
            fix = fix_call(got, dst, axis, name) or ""
    raise FactorError(
        f"{where}: src={src} does not match the value ({shown})",
        fix,
        code="src-mismatch",
    )


def _apply(
    t: GlobalType, step: Step, axis: AxisArg, axes: Tuple[str, ...], name: str, where: str,
    mesh: Optional[Mapping[str, int]] = None,
) -> GlobalType:
    sk, dk = kind(step.src), kind(step.dst)
    if "V" in (sk, dk):
        raise FactorError(
            f"{where}: {step} is a Varying form; it adds or removes a dim, which a partition "
            f"spec cannot describe (use an S(i) form, or local mode for {axis!r})",
            code="varying-form",
        )
    if step.op == "reinterpret" and {sk, dk} != {"R", "I"}:
        raise FactorError(
            f"{where}: {step} changes the global value (only convert and the collectives keep it)",
            _convert_fix(step, axis, name),
            code="reinterpret-global",
        )
    entries = [list(e) for e in t.spec.dims]
    partial = set(t.partial)
    local = dict(t.local)
    if sk == "S":
        _drop(entries, axes)
    elif sk == "P":
        partial -= set(axes)
    for a in axes:
        local.pop(a, None)
    if dk == "S":
        assert isinstance(step.dst, Shard)
        entries[step.dst.dim].extend(axes)
    elif dk == "P":
        partial |= set(axes)
    elif dk == "I":
        local.update({a: I for a in axes})
    # Parts of one axis left in one role merge (I on x:(1)2 beside I on x:(2)2 is I on x).
    partial = set(merge_roles({a: P for a in partial}, mesh))
    return t.replace(spec=[tuple(e) if e else None for e in entries], partial=partial,
                     local=merge_roles(local, mesh))


def _convert_fix(step: Step, axis: AxisArg, name: str) -> str:
    try:
        if plan("convert", step.src, step.dst, axis=axis):
            return _call("convert", name, axis, step.src, step.dst)
    except CollectiveError:
        pass
    return ""


# R is imported for readers of this module's table in the docstring.
_ = R
