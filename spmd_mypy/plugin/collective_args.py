"""Checks of a typed collective's arguments beyond src/dst (comms.py calls
them): axis names against the configured `axes`, and all_reduce's reduce op
(vocab.collectives.REDUCE_OPS: a max or min has no additive backward, so it
takes only a value without gradient)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ..vocab.collectives import REDUCE_OPS
from ..vocab.localtype import AxisType
from ..vocab.spec import Spmd
from ..vocab.subaxis import base_axis
from . import _mypy
from .callsite import one_arg
from .carrier import spmd_of
from .config import Settings
from .errors import SPMD_COLLECTIVE
from .sourcefile import read_source


def axes_known(ctx: Any, op: str, axes: Sequence[str], settings: Optional[Settings]) -> bool:
    """With `[spmd_mypy] axes` configured, every axis a collective names must be
    one of them (reported; False when one is not)."""
    if settings is None or not settings.axes:
        return True
    unknown = [a for a in axes if base_axis(a) not in settings.axes]
    if not unknown:
        return True
    ctx.api.fail(
        f"spmd.{op} on axis {unknown[0]!r}: not a configured mesh axis (the configured axes are "
        f"{', '.join(settings.axes)}); a misspelled axis would fail at run time or name another "
        f"process group. Hint: one of {', '.join(repr(a) for a in settings.axes)}",
        ctx.context,
        code=SPMD_COLLECTIVE,
    )
    return False


def _keyword(ctx: Any, name: str) -> Optional[_mypy.Expression]:
    """The argument passed as `name=` (also when the callee's signature lacks it)."""
    got = one_arg(ctx, name)
    if got is not None:
        return got[0]
    context = ctx.context
    for arg, arg_name in zip(getattr(context, "args", ()), getattr(context, "arg_names", ())):
        if arg_name == name:
            return arg
    return None


def reduce_op(ctx: Any, x: Any, dst: AxisType, axes: Sequence[str]) -> Optional[str]:
    """all_reduce's `op=` when it is not the sum: checked (a known op, a value
    without gradient) and returned; None for the sum or an op not written as
    a literal."""
    expr = _keyword(ctx, "op")
    written = _mypy.str_value(expr) if expr is not None else None
    if written is None or written == "sum":
        return None
    data = read_source(_mypy.checker_path(ctx.api) or "")
    name = _mypy.source_text(_mypy.span(x[0]), data) or _mypy.expr_text(x[0])
    where = f"spmd.all_reduce(..., op={written!r}) on axis {axes[0]!r}"
    if written not in REDUCE_OPS:
        ctx.api.fail(
            f"{where}: op is one of {', '.join(repr(o) for o in REDUCE_OPS)}",
            ctx.context,
            code=SPMD_COLLECTIVE,
        )
        return written
    alternatives = _mypy.union_alternatives(x[1]) or [x[1]]
    with_grad = [s for s in (spmd_of(t) for t in alternatives) if isinstance(s, Spmd) and not s.nograd]
    if not REDUCE_OPS[written] and with_grad:
        axis = axes[0] if len(axes) == 1 else tuple(axes)
        ctx.api.fail(
            f"{where}: {name} carries a gradient, but a {written} over the ranks has no additive "
            f"backward: the sum's backward would hand every rank the whole gradient, while only "
            f"the rank holding the {written} affects it, so the gradients would be wrong. Reduce a "
            f"value without gradient (the vocab-parallel cross-entropy's logits {written} is a "
            f"constant shift). Hint: spmd.all_reduce({name}.detach(), {axis!r}, src=P, dst={dst}, "
            f"op={written!r}) in place of this call",
            ctx.context,
            code=SPMD_COLLECTIVE,
        )
    return written
