"""Raw torch.distributed collectives on typed tensors.

A raw collective works in place and outside autograd.  On a value that
carries a gradient, in code where autograd records one, that is a bug the
typed collectives fix (their backward is the design's): spmd-collective.
It is correct code, not reported, when

  - the value carries no gradient (nograd: `.detach()`, a `.grad` read,
    comparisons, integer casts, `Spmd(..., nograd=True)`);
  - the call is in the forward or backward of an autograd Function
    (nograd_regions.py): the Function's own backward is the gradient;
  - the call runs with gradients off (`with torch.no_grad():`,
    `@torch.no_grad()`), writes the tensor it reads (all_reduce, broadcast)
    and that tensor is R or I on every axis it names: an initialisation or a
    parameter sync, which changes values only.  A gather under no_grad into
    another tensor still cuts the gradient of what it read: reported.

Either way the tensor it writes, when held in a name, gets the type of what
was written (the rewrite of _mypy/raw_writes.py routes the statement through
`spmd_phantom.raw_write`, whose hook is here): on the group's axes the same
value on every rank (all_reduce, broadcast, all_gather_into_tensor: R, or I
where it was I) or each rank its piece (reduce_scatter_tensor,
all_to_all_single: V), the other axes as the read value had them
(vocab.opnames.RAW_WRITES); a buffer written from another tensor, or any
tensor written in an autograd Function's body, carries no gradient.  A group the checker cannot name as an axis leaves the tensor
unknown (never a guess); no group is every rank: every axis.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from ..vocab.axis import axis_names
from ..vocab.localtype import I, R, V, AxisType, local_kind
from ..vocab.opnames import RAW_COLLECTIVES, RAW_WRITES
from ..vocab.spec import Spmd
from . import _mypy
from .callsite import grad_off
from .carrier import carrier, spmd_of
from .errors import SPMD_COLLECTIVE
from .grad_aliases import report_live_aliases
from .groups import axis_of
from .guard import default_return, guarded
from .nograd_regions import FUNCTION, NO_GRAD


def _accepted(ctx: Any, name: str, spmd: Spmd) -> bool:
    """A raw collective that is right where it stands (see the module's doc)."""
    if spmd.nograd:
        return True
    where = grad_off(ctx.api, ctx.context)
    if where == FUNCTION:
        return True  # the Function's own backward is the gradient
    row = RAW_WRITES.get(name)
    in_place = row is not None and row[0] == row[1]
    replicated = all(local_kind(t) in ("R", "I") for t in spmd.axes.values())
    # With gradients off, an in-place collective on a replicated value (an
    # initialisation, a parameter sync) changes values only: the tensor keeps
    # its layout and its place in autograd.  Anything else cuts a gradient.
    return where == NO_GRAD and in_place and replicated


def raw_collective_hook(name: str) -> Optional[Callable[[Any], _mypy.Type]]:
    typed = RAW_COLLECTIVES.get(name)
    if typed is None:
        return None

    row = RAW_WRITES.get(name)
    in_place = row is not None and row[0] == row[1]

    def hook(ctx: Any) -> _mypy.Type:
        if in_place and row is not None and hasattr(ctx.context, "arg_kinds"):
            report_live_aliases(ctx, name, _group_axes(ctx, ctx.context, row[2])[1])
        for _, expr, typ in _mypy.call_args(ctx):
            spmd = spmd_of(typ)
            if spmd is None or not spmd.axes:
                continue  # an output buffer (torch.empty(...)) names no axis
            if _accepted(ctx, name, spmd):
                continue
            text = _mypy.expr_text(expr)
            found = ", ".join(f"{a}={t}" for a, t in spmd.axes.items())
            ctx.api.fail(
                f"raw torch.distributed.{name} on {text} ({found}): a raw collective has no "
                f"SPMD-aware backward (it works in place outside autograd, so the gradient is cut "
                f"or never reduced). Hint: use spmd.{typed}({text}, <axis>, src=..., dst=...), "
                f"or {text}.detach() if no gradient should flow through it",
                ctx.context,
                code=SPMD_COLLECTIVE,
            )
            break
        return ctx.default_return_type

    return guarded(hook, default_return)


def _group_axes(ctx: Any, call: Any, position: int) -> Tuple[bool, Optional[Tuple[str, ...]]]:
    """(whether the call names a group, the axes it stands for or None)."""
    group = _mypy.call_argument(call, position, "group")
    if group is None or _mypy.is_none_expr(group):
        return False, None
    axis = axis_of(group, _mypy.typed_before(ctx.api, group))
    if axis is None:
        return True, None
    return True, axis_names(axis)


def written_type(source: Spmd, axes: Optional[Tuple[str, ...]], effect: AxisType, in_place: bool) -> Spmd:
    """The written tensor's type: `effect` on `axes` (on every axis when None;
    an I value stays I where the effect is R: still the same on every rank),
    the read value's types elsewhere.  A tensor written in place keeps its
    gradient flag (its place in autograd is unchanged); a buffer written from
    another tensor (or anything in an autograd Function's body) carries none."""
    nograd = source.nograd or not in_place

    def after(t: Optional[AxisType]) -> AxisType:
        return I if effect is R and t is I else effect

    if axes is None:
        return Spmd.of({a: after(t) for a, t in source.axes.items()}, None, nograd, effect)
    result: Dict[str, AxisType] = dict(source.axes)
    for a in axes:
        result[a] = after(source.axis_type(a))
    rest = R if source.spec is not None else source.rest
    return Spmd.of(result, None, nograd, rest)


# The read tensor's parameter name where it is not the written one.
_READ_KEYWORDS = {"all_gather_into_tensor": "input_tensor", "reduce_scatter_tensor": "input", "all_to_all_single": "input"}


def _raw_write(ctx: Any) -> _mypy.Type:
    default = ctx.default_return_type
    found = _mypy.raw_write_call(ctx)
    row = RAW_WRITES.get(found[0]) if found is not None else None
    if found is None or row is None:
        return default
    call = found[1]
    _, read_at, group_at, effect = row
    read = _mypy.call_argument(call, read_at, _READ_KEYWORDS.get(found[0], "tensor"))
    source = spmd_of(_mypy.typed_before(ctx.api, read)) if read is not None else None
    if source is None:
        return default  # a plain tensor stays plain
    named, axes = _group_axes(ctx, call, group_at)
    if named and axes is None:
        return _mypy.replace_tensors(default, _mypy.unknown_carrier(ctx.api))
    # In an autograd Function's forward or backward nothing records a gradient.
    in_place = row[0] == row[1] and grad_off(ctx.api, ctx.context) != FUNCTION
    typed = written_type(source, axes, R if effect == "R" else V, in_place)
    return _mypy.replace_tensors(default, carrier(ctx.api, typed))


HOOKS: Dict[str, Callable[[Any], _mypy.Type]] = {_mypy.RAW_WRITE: guarded(_raw_write, default_return)}
