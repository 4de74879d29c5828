"""Typing calls of torch.distributed.nn.functional (rows: vocab/dist_nn.py).

torch leaves these autograd-aware collectives untyped (mypy gives their
results Any).  In a file that uses spmd, a call of one whose row names a
typed collective is typed as that collective (comms.type_collective): the
input (each element of an input list) must hold the collective's src on the
group's axes, and the result (each element of a result tuple) holds its dst
there, the other axes as the input had them.

The group: a group of an axis (groups.axis_of: `Annotated[ProcessGroup,
spmd.Axis("tp")]`, a configured getter, `mesh.get_group("tp")`) names that
axis; no group, `None` or `group.WORLD` is every rank: the flattened group
of every axis of `[spmd_mypy] axes` (unchecked when none are configured).

Never silent: a call that cannot be typed -- a function with no typed
collective of the same forward and backward (broadcast, reduce, gather,
scatter), a reduction op that is not the sum, a group that names no axis,
`*args` -- gets one spmd-collective note saying it is unchecked and why (as
megatron.py's calls do), and its result is a tensor of unknown type
(SpmdTensor[Any]), which `python -m spmd_mypy.coverage` lists as an
unchecked call.

torch.distributed._functional_collectives ("funcol") is typed from its own
rows the same way, with two differences: its reduction op is a string (only
a literal "sum", in any case, is typed), and its group names an axis only
when it is a ProcessGroup (a string there is a group's name; a DeviceMesh,
(mesh, dim) or a list of ranks names no axis): anything else is unchecked.
funcol.wait_tensor(t) has t's type.

Register: the function-hook table takes HOOKS (keys: the functions' fullnames).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ..vocab.dist_nn import (
    FUNCOL_IDENTITY,
    FUNCOL_MODULE,
    LIST,
    SPMD_REDUCE_OPS,
    SUM_OPS,
    SUM_STRINGS,
    TUPLE,
    WORLD_GROUPS,
    Row,
    by_fullname,
)
from . import _mypy
from .callsite import in_spmd_file
from .carrier import spmd_of
from .comms import type_collective
from .config import Settings
from .errors import SPMD_COLLECTIVE
from .groups import axis_of, unnamed_axis_message
from .guard import default_return, guarded

_mypy.load("collective_calls")

Hook = Callable[[Any], _mypy.Type]
Axes = Union[str, Tuple[str, ...]]
Arg = Tuple[_mypy.Expression, _mypy.Type]

_SETTINGS: List[Settings] = []


def configure(settings: Settings) -> None:
    _SETTINGS[:] = [settings]


def _unknown(ctx: Any, row: Row) -> _mypy.Type:
    """The result of unknown SPMD type: a tensor, or a tuple of them."""
    unknown = _mypy.unknown_carrier(ctx.api)
    return _mypy.tensor_tuple(ctx.api, unknown) if row.result == TUPLE else unknown


def _callee(row: Row) -> str:
    return f"{row.module}.{row.name}"


def _unchecked(ctx: Any, row: Row, why: str) -> _mypy.Type:
    """One note at the call (`why` starts with the callee), the result unknown."""
    _mypy.note(ctx.api, f"unchecked: {why}", ctx.context, SPMD_COLLECTIVE)
    return _unknown(ctx, row)


def _not_sum(ctx: Any, row: Row, axes: Optional[Axes], group_text: Optional[str]) -> Optional[str]:
    """Why the call is unchecked when its reduction op is not the sum (the
    default); None for the sum."""
    got = _mypy.formal_args(ctx, row.op) if row.op is not None else []
    if row.str_op and got:
        written = _mypy.str_value(got[0][0])
        if written is not None and written.lower() in SUM_STRINGS:
            return None
        why = (
            f"{_callee(row)}: {row.op}={_mypy.expr_text(got[0][0])} is not the string \"sum\": torch's backward "
            f"of any other op raises RuntimeError (it supports only 'sum'), and no typed collective reduces with it"
        )
        spmd_op = SPMD_REDUCE_OPS.get((written or "").upper())
    else:
        full = _mypy.member_fullname(got[0][0]) if got else None
        if not got or full in SUM_OPS:
            return None
        why = (
            f"{_callee(row)}: op={_mypy.expr_text(got[0][0])} is not the sum (ReduceOp.SUM): torch's backward "
            f"reduces the gradient with the same op, which no typed collective does"
        )
        spmd_op = SPMD_REDUCE_OPS.get((full or "").rpartition(".")[2])
    x = _mypy.formal_args(ctx, row.tensor)
    if spmd_op is None or not x or row.typed is None:
        return why
    axis = group_text or (repr(axes) if axes is not None else "<axis>")
    return (
        f"{why}. Hint: a {spmd_op} of a value without gradient is "
        f"spmd.all_reduce({_mypy.expr_text(x[0][0])}.detach(), {axis}, src=P, dst={row.typed.dst}, op={spmd_op!r})"
    )


def _group(ctx: Any, row: Row) -> Tuple[Optional[Axes], Optional[str], str]:
    """(the axes the group names, the group's text for hints, why unchecked
    when it names none)."""
    got = _mypy.formal_args(ctx, row.group)
    expr = got[0][0] if got else None
    if expr is None or _mypy.is_none_expr(expr) or _mypy.member_fullname(expr) in WORLD_GROUPS:
        axes = _SETTINGS[-1].axes if _SETTINGS else ()
        if not axes:
            return None, None, (
                f"{_callee(row)}: the default group is every rank, and no mesh axes are configured to name it "
                "(set [spmd_mypy] axes = ..., or pass the group of one axis)"
            )
        return (axes[0] if len(axes) == 1 else tuple(axes)), None, ""
    typ = got[0][1]
    if row.group_only and not _mypy.is_process_group(typ):
        return None, None, (
            f"{_callee(row)} over {_mypy.expr_text(expr)}: only a ProcessGroup of a declared axis names a mesh axis "
            "here (a DeviceMesh, (mesh, dim), a list of ranks or a group's name names none), so this call is not "
            'checked. Hint: pass mesh.get_group("tp"), or a group typed Annotated[ProcessGroup, spmd.Axis("tp")]'
        )
    axis = axis_of(expr, typ, ctx.api)
    if axis is None:
        return None, None, unnamed_axis_message(_callee(row), expr, typ, ctx.api)
    written = _mypy.str_value(expr) or _mypy.str_tuple(expr)
    return axis, (None if written else _mypy.expr_text(expr)), ""


def _inputs(ctx: Any, row: Row) -> List[Arg]:
    """The input tensors to check: the tensor, or a list's elements (each
    item of a list display, else the list's element type once)."""
    got = _mypy.formal_args(ctx, row.tensor)
    if not got or row.inputs != LIST:
        return got[:1]
    expr, typ = got[0]
    items = _mypy.display_items(expr)
    if items is not None:
        seen: Dict[object, Arg] = {}
        for item in items:
            item_type = _mypy.typed_before(ctx.api, item)
            seen.setdefault(str(spmd_of(item_type)), (item, item_type))
        return list(seen.values())
    elements = _mypy.element_types(typ)
    return [(expr, elements[0] if elements else _mypy.plain_tensor(ctx.api))]


def _typed(ctx: Any, row: Row) -> _mypy.Type:
    if _mypy.has_star_args(ctx):
        return _unchecked(ctx, row, f"{_callee(row)}: *args or **kwargs: its arguments are not read")
    if row.typed is None:
        return _unchecked(
            ctx, row, f"{_callee(row)}: it runs {row.runs}; no typed collective has that forward and backward, so its "
            "result is of unknown type. Hint: a typed collective (spmd.all_reduce, spmd.all_gather, "
            "spmd.reduce_scatter, spmd.all_to_all), if one does what is meant",
        )
    axes, group_text, why = _group(ctx, row)
    not_sum = _not_sum(ctx, row, axes, group_text)
    if not_sum is not None:
        return _unchecked(ctx, row, not_sum)
    if axes is None:
        return _unchecked(ctx, row, why)
    inputs = _inputs(ctx, row)
    if not inputs:
        return _unknown(ctx, row)
    typed = row.typed
    plain = _mypy.with_default_return(ctx, _mypy.plain_tensor(ctx.api))
    suffix = f" ({_callee(row)}, read as spmd-mypy's spmd.{typed.op})"
    results = [
        type_collective(plain, typed.op, x, axes, typed.src, typed.dst, suffix=suffix, group_text=group_text)
        for x in inputs
    ]
    # A failed check leaves the plain Tensor: unknown, as is a list whose elements differ.
    one = len({str(t) for t in results}) == 1 and _mypy.holds_carrier(results[0])
    result = results[0] if one else _mypy.unknown_carrier(ctx.api)
    return _mypy.tensor_tuple(ctx.api, result) if row.result == TUPLE else result


def _call(ctx: Any, row: Row) -> _mypy.Type:
    if not in_spmd_file(ctx):
        return ctx.default_return_type
    return _typed(ctx, row)


def _hook(row: Row) -> Hook:
    return guarded(lambda ctx: _call(ctx, row), default_return)


def _identity(ctx: Any, param: str) -> _mypy.Type:
    """funcol.wait_tensor(t): t's own type (no collective; its backward is
    the identity)."""
    got = _mypy.formal_args(ctx, param)
    if not in_spmd_file(ctx) or not got or _mypy.has_star_args(ctx):
        return ctx.default_return_type
    return got[0][1]


def _identity_hook(param: str) -> Hook:
    return guarded(lambda ctx: _identity(ctx, param), default_return)


HOOKS: Dict[str, Hook] = {full: _hook(row) for full, row in by_fullname().items()}
HOOKS.update({f"{FUNCOL_MODULE}.{name}": _identity_hook(param) for name, param in FUNCOL_IDENTITY.items()})
