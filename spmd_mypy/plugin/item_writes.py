"""Item writes into a typed tensor: `x[index] = value`.

mypy checks the statement as a call of `x.__setitem__(index, value)`, whose
result is None, so the op hooks (which type tensor results) left it alone
and a write of another type went unchecked.  On each axis the write is the
linear op that replaces some of x's elements by the value's: x keeps its
type only if the value fits it, and a Partial x (a pending sum) takes only a
Partial value or a literal zero (a constant c would be counted once per
rank).  The positions come from the index: an index tensor that differs per
rank (V) writes different places on each rank, so x is then V on that axis
(and a pending sum written so is an error).  As for any in-place op, a write
that would change x's type is an spmd-inplace error.  In global code a
write into a value laid out on a global axis is an error: the index names
global positions, each rank writes its own shard's.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from ..vocab.collectives import fix_call
from ..vocab.localtype import I, P, R, V, AxisType, local_kind
from ..vocab.opclasses import LINEAR, SCALAR, Operand, OpRuleError, combine
from ..vocab.spec import Spmd
from . import _mypy, global_mode
from .callsite import receiver_text
from .carrier import spmd_of
from .errors import SPMD_GLOBAL, SPMD_INPLACE, SPMD_OP


def setitem(ctx: Any) -> _mypy.Type:
    """The hook of Tensor.__setitem__: check the write, per axis."""
    target = spmd_of(ctx.type)
    args = _mypy.call_args(ctx)
    if target is None or len(args) != 2:
        return ctx.default_return_type
    (_, index, _), (_, value_expr, value_type) = args
    value = _value(value_expr, value_type)
    if value is None:
        return ctx.default_return_type  # a plain tensor: gradual typing, unchecked
    x = receiver_text(ctx)
    where = f"{x}[{_mypy.expr_text(index)}] = {_mypy.expr_text(value_expr)}"
    if _sharded_in_global_code(ctx, where, x, target):
        return ctx.default_return_type
    positions = _index_types(ctx, index)
    axes = sorted(set(target.axes) | (set(value.axes) if isinstance(value, Spmd) else set()))
    for axis in axes:
        if not _axis_ok(ctx, where, x, target, value, positions, axis):
            return ctx.default_return_type  # one error per write
    return ctx.default_return_type


def _sharded_in_global_code(ctx: Any, where: str, x: str, target: Spmd) -> bool:
    """In global code an index names global positions, but each rank writes
    its own shard's: a write into a value laid out on a global axis is an
    error (reported here) rather than typed by the local rules."""
    scope = global_mode.scope_of(ctx)
    if scope is None:
        return False
    laid = [a for a in target.axes if scope.has(a) and local_kind(target.axis_type(a) or R) == "V"]
    if not laid:
        return False
    _fail(
        ctx,
        f"item write {where} in global code: {x} is laid out on {', '.join(repr(a) for a in laid)}, so each "
        f"rank would write the positions of its own shard, not the global ones the index names",
        "write it in local code (spmd.local_map), or gather it first",
        SPMD_GLOBAL,
    )
    return True


def _value(expr: _mypy.Expression, typ: _mypy.Type) -> object:
    """The written value: its Spmd, SCALAR for a number (None for a literal
    zero: it adds nothing), None for a plain tensor."""
    if _mypy.is_python_number(typ):
        literal = _mypy.literal_value(expr)
        zero = literal.__class__ in (int, float, bool) and literal == 0
        return _ZERO if zero else SCALAR
    return spmd_of(typ)


_ZERO: Any = object()  # a literal 0: x keeps its type whatever it is


def _index_types(ctx: Any, index: _mypy.Expression) -> List[Tuple[str, Spmd]]:
    """The typed tensors among the index (`x[mask]`, `x[ids, :]`), with their text."""
    items = _mypy.display_items(index)
    found = []
    for item in items if items is not None else [index]:
        t = spmd_of(_mypy.typed_before(ctx.api, item))
        if t is not None:
            found.append((_mypy.expr_text(item), t))
    return found


def _axis_ok(
    ctx: Any, where: str, x: str, target: Spmd, value: object, positions: List[Tuple[str, Spmd]], axis: str
) -> bool:
    was = target.axis_type(axis)
    have: Operand = value.axis_type(axis) if isinstance(value, Spmd) else (None if value is _ZERO else SCALAR)
    if was is None or (isinstance(value, Spmd) and have is None):
        return True  # an axis one side does not know
    operands: List[Operand] = [was] if have is None else [was, have]
    nograd = [target.nograd] + ([value.nograd if isinstance(value, Spmd) else True] if have is not None else [])
    try:
        now = combine(LINEAR, operands, nograd)
    except OpRuleError as err:
        found = f"{x} is {was}" + (f", the value is {have}" if have is not SCALAR and have is not None else "")
        _fail(ctx, f"item write {where} on axis {axis!r} ({found}): {err}", _fix(x, where, axis, err.code, was, have), SPMD_OP)
        return False
    varying = [text for text, t in positions if local_kind(t.axis_type(axis) or R) not in ("R", "I")]
    if varying and now is not None:
        if local_kind(now) == "P":
            _fail(
                ctx,
                f"item write {where} on axis {axis!r}: the index {varying[0]} differs per rank, so the ranks "
                f"write a pending sum ({x} is {was}) at different positions",
                f"index with positions that are the same on every rank (R or I on {axis!r}), or write into "
                f"a per-rank value",
                SPMD_OP,
            )
            return False
        now = V
    if now is not None and local_kind(now) != local_kind(was):
        _fail(
            ctx,
            f"item write {where} would change {x} from {was} to {now} on axis {axis!r}, but a write "
            f"in place keeps the tensor's type",
            _inplace_fix(where, axis, was, have, now, bool(varying)),
            SPMD_INPLACE,
        )
        return False
    return True


def _fix(x: str, where: str, axis: str, code: str, was: AxisType, have: Operand) -> str:
    """Convert the side the rule names: the target before the write, or the
    value in it (a Partial one reduced, an Invariant one converted to R)."""
    lhs, _, value = where.partition(" = ")
    if code == "invariant-mixed":
        if have is I:
            return f"{lhs} = {fix_call(I, R, axis, value)}"
        return f"{x} = {fix_call(I, R, axis, x)}; {where}"
    if was is P:
        return f"{x} = {fix_call(P, I if have is I else R, axis, x)}; {where}"
    call = fix_call(P, I if was is I else R, axis, value) if have is P else None
    return f"{lhs} = {call}" if call is not None else f"write a value of {x}'s type ({was} on {axis!r})"


def _inplace_fix(where: str, axis: str, was: AxisType, have: Operand, now: AxisType, by_index: bool) -> str:
    lhs, _, value = where.partition(" = ")
    if by_index:
        return f"index with a tensor that is {was} on {axis!r}, or write into a tensor that is {now} there"
    typed = have if have is P or have is I else None
    call = fix_call(typed, was, axis, value) if typed is not None else None
    if call is not None:
        return f"{lhs} = {call}"
    return f"write a value that is {was} on {axis!r}, or write into a tensor that is {now} there"


def _fail(ctx: Any, message: str, hint: Optional[str], code: Any) -> None:
    ctx.api.fail(message + (f". Hint: {hint}" if hint else ""), ctx.context, code=code)
