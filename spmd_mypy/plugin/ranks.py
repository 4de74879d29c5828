"""Rank numbers: ints whose value differs on a mesh axis.

`dist.get_rank(g)` of a group g that names axis tp (an AxisGroup, a
configured group getter's result), `g.rank()` and `mesh.get_local_rank("tp")`
are typed `spmd_phantom.RankOf[Literal["*=R, tp=V, nograd"]]`: an int whose
arithmetic keeps the type (the stub's dunders), holding the SPMD type it has
as an operand: V where it differs, R elsewhere, no gradient.  `dist.get_rank()`
of the default group differs on every axis (`*=V, nograd`).  A group the
plugin cannot read gives a plain int, unchecked as any unknown group is.

Where a rank meets a tensor it is that operand (callsite.operands reads it
in an argument, a slice or a tuple of indices), so the op rules decide:
`x[rank]`, `x[r * n:(r + 1) * n]`, `x.narrow(0, r * n, n)`, `ids - r * n`
and `torch.arange(start, end)` are V where x is R (each rank takes its own
piece: Megatron's split into a tensor-parallel region), an error where x is
P (a piece of each rank's addend is no piece of the sum) or I (convert it to
R first: the pieces' gradients differ by rank).  An element of a tuple or
list of tensors picked by a rank (`torch.split(x, n, dim=-1)[rank]`) is
typed here, by the same rule through the getitem op.  An argument bound to
a `device` parameter is no operand (`x.to(rank)`, `x.cuda(rank)` move the
same values).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ..vocab.axis import axis_names, parse_axis_text
from ..vocab.localtype import P, R, V
from ..vocab.opclasses import op_class
from ..vocab.spec import Spmd
from . import _mypy
from .answers import uses_spmd
from .callsite import RankText, joined_rank, one_arg, rank_operand, receiver_text
from .carrier import carrier, spmd_of
from .groups import axis_of
from .errors import SPMD_OP
from .guard import default_return, guarded
from .op_inference import Operand, infer_operands
from .rank_arguments import check_rank_argument
from .relation import pending_signature


def rank_type(api: Any, axes: Optional[Tuple[str, ...]], default: _mypy.Type) -> _mypy.Type:
    """The int type of a rank that differs on `axes` (None: on every axis);
    `default` (a plain int) in a file that does not use spmd (torch's own)."""
    if not uses_spmd(api):
        return default
    spmd = Spmd.of({}, None, True, V) if axes is None else Spmd.of({a: V for a in axes}, None, True, R)
    return _mypy.rank_in_checker(api, spmd.canonical())


def _axes(expr: _mypy.Expression, typ: Optional[_mypy.Type], api: Any) -> Optional[Tuple[str, ...]]:
    axis = axis_of(expr, typ, api)
    if axis is None:
        return None
    return axis_names(axis)


def _get_rank(ctx: Any) -> _mypy.Type:
    """dist.get_rank(group): the rank on the group's axes; of the default group, on all."""
    found = one_arg(ctx, "group")
    if found is None or _mypy.is_none_expr(found[0]):
        return rank_type(ctx.api, None, ctx.default_return_type)
    axes = _axes(found[0], found[1], ctx.api)
    return ctx.default_return_type if axes is None else rank_type(ctx.api, axes, ctx.default_return_type)


def _group_rank(ctx: Any) -> _mypy.Type:
    """g.rank() of a group that stands for axes."""
    text = _mypy.group_text(ctx.type)
    return ctx.default_return_type if text is None else rank_type(ctx.api, parse_axis_text(text), ctx.default_return_type)


def _local_rank(ctx: Any) -> _mypy.Type:
    """mesh.get_local_rank("tp"): the rank on that mesh dim (by name only)."""
    found = one_arg(ctx, "mesh_dim")
    name = _mypy.str_value(found[0]) if found is not None else None
    return ctx.default_return_type if name is None else rank_type(ctx.api, (name,), ctx.default_return_type)


def _picked(ctx: Any) -> _mypy.Type:
    """seq[i] of a tuple or list of tensors: with a rank among the index, the
    getitem op's rule on the element and the rank (V from R)."""
    default = ctx.default_return_type
    if not ctx.arg_types or not ctx.arg_types[0]:
        return default
    rank = rank_operand(ctx.arg_types[0][0])
    element = spmd_of(default) if rank is not None else None
    if rank is None or element is None:
        return default
    index = _mypy.expr_text(ctx.args[0][0])
    split = _mypy.split_source(getattr(ctx.context, "base", None))
    if split is not None:
        element = _reduced_by_scatter(ctx, element, rank, split, index)
    # named by the tensor a split made the tuple of (torch.split(i, n)[rank]: i)
    text = _mypy.expr_text(split[0]) if split is not None else f"{receiver_text(ctx)}[{index}]"
    ops: List[Operand] = [(text, element), (RankText(index), rank)]
    result = infer_operands(ctx, "__getitem__", op_class("__getitem__", "tensor"), "tensor", ops)
    if result is None:
        return default
    return _mypy.replace_tensors(default, carrier(ctx.api, result))


def _reduced_by_scatter(
    ctx: Any, element: Spmd, rank: Spmd, split: Tuple[_mypy.Expression, Optional[int], bool], index: str
) -> Spmd:
    """`p.chunk(n)[rank]` of a P value: this rank's piece of the pending sum is
    what reduce_scatter gives, so that is the error's fix (the element is
    then typed as reduced: one error, at the pick)."""
    axes = [a for a, t in element.axes.items() if t is P and rank.axis_type(a) is V]
    if not axes:
        return element
    source, dim, drops = _mypy.expr_text(split[0]), split[1], split[2]
    axis = axes[0]
    shard = f"S({dim})" if dim is not None else "S(<the split dim>)"
    # unbind's piece has no split dim: the scattered piece's (of size 1) goes
    squeeze = f".squeeze({dim if dim is not None else '<the split dim>'})" if drops else ""
    _mypy.fail(
        ctx.api,
        f"a piece by rank of {source} on axis {axis!r} ({source} is P, {index} differs from rank to rank): "
        f"a piece of each rank's addend is no piece of the pending sum. Hint: take this rank's piece of the "
        f"sum with spmd.reduce_scatter({source}, {axis!r}, src=P, dst={shard}){squeeze} in place of "
        f"{_mypy.expr_text(ctx.context)}",
        ctx.context,
        SPMD_OP,
    )
    return Spmd.of({a: (R if a in axes else t) for a, t in element.axes.items()}, element.spec, element.nograd, element.rest)


def through_call(hook: Callable[[Any], _mypy.Type], callee: str) -> Callable[[Any], _mypy.Type]:
    """A user function's call hook whose int results differ by rank where an
    argument does: `first, last = vocab_range(n, rank, world)` or `offset(rank,
    n)` gives rank numbers of the arguments' axes taken together (the
    function's body is no part of its signature, so whatever it computes
    from the rank may differ by it); a RankOf result, or anything but an
    int, is the hook's.  A rank number given to a parameter of a function
    declaring SPMD types that is declared one value on every rank is an
    error (_check_rank_arguments); `callee` names the function in it."""

    def call(ctx: Any) -> _mypy.Type:
        result = hook(ctx)
        texts = _mypy.argument_rank_texts(ctx.arg_types)
        joined = joined_rank(texts) if texts else None
        if joined is None or not uses_spmd(ctx.api):
            return result
        _check_rank_arguments(ctx, callee)
        return _mypy.with_rank_ints(result, _mypy.rank_in_checker(ctx.api, joined.canonical()))

    return call


def _check_rank_arguments(ctx: Any, callee: str) -> None:
    """Of a function declaring SPMD types (relation.pending_signature), each
    argument against its declared parameter (rank_arguments.check_rank_argument)."""
    sig = pending_signature(ctx)
    if sig is None:
        return
    for i, (types, exprs) in enumerate(zip(ctx.arg_types, ctx.args)):
        if i >= len(sig.arg_types):
            break
        name = sig.arg_names[i] if i < len(sig.arg_names) else None
        label = f'Argument "{name}" to "{callee}"' if name else f'Argument {i + 1} to "{callee}"'
        for typ, expr in zip(types, exprs):
            check_rank_argument(ctx.api, label, name, expr, typ, sig.arg_types[i])


FUNCTION_HOOKS: Dict[str, Any] = {
    "torch.distributed.distributed_c10d.get_rank": guarded(_get_rank, default_return),
}


def _arithmetic(ctx: Any) -> _mypy.Type:
    """`a + b`, `r * n` on rank numbers: the stub's dunders return the
    receiver's own type (Self), which would drop the axes another rank
    operand differs on (`tp_rank * dp_size + dp_rank`); the result differs
    on every axis one operand does."""
    texts = _mypy.rank_texts(ctx.type) + _mypy.argument_rank_texts(ctx.arg_types)
    joined = joined_rank(texts)
    return ctx.default_return_type if joined is None else _mypy.rank_in_checker(ctx.api, joined.canonical())


_DUNDERS = ("add", "sub", "mul", "floordiv", "mod")
METHOD_HOOKS: Dict[str, Any] = {
    **{f"{_mypy.RANK_CARRIER}.{d}": guarded(_arithmetic, default_return)
       for d in [f"__{c}__" for c in _DUNDERS] + [f"__r{c}__" for c in _DUNDERS] + ["__neg__"]},
    "spmd_phantom.AxisGroup.rank": guarded(_group_rank, default_return),
    "torch.distributed.device_mesh.DeviceMesh.get_local_rank": guarded(_local_rank, default_return),
    "builtins.tuple.__getitem__": guarded(_picked, default_return),
    "builtins.list.__getitem__": guarded(_picked, default_return),
}
