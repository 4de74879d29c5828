"""Partitioned shards in the checker (seed 004; rules in vocab/partitioned.py).

Three places:

  spmd.partitioned.<conversion>(x, axis, splits, dim=...)   HOOKS: x must have the
      conversion's source layout on the axis (PS(dim), PSA(dim), or src= R/I);
      the result has its destination layout (dst= R/I for *_to_replicate)
  torch ops on a PS/PSA operand     `adjust` (called by ops.op_hook after the
      general rules): the layout is kept by elementwise ops on one layout and
      by ops off the partitioned dim; mixing layouts, reshaping, cutting or
      joining the dim is an spmd-op error
  spmd.<collective> of a PS/PSA value   `collective_refine` (wraps global mode's
      refinement): a collective does not know the partitions; an error naming
      the conversion to use
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ..vocab.axis import axis_names
from ..vocab.localtype import AxisType, I, PartitionedShard, R
from ..vocab.opnames import display_name
from ..vocab.partitioned import CONVERSIONS, PartitionError, dim_position, layout_type, op_rule
from ..vocab.spec import Spmd
from . import _mypy, comm_sites
from .decoding import LOCAL_TYPES
from .callsite import one_arg, operands
from .carrier import carrier, spmd_of
from .errors import SPMD_COLLECTIVE, SPMD_OP
from .groups import axis_of
from .guard import default_return, guarded

__all__ = ["HOOKS", "adjust", "collective_refine", "MODULE"]

MODULE = "spmd_mypy.runtime.partitioned."


def _with(spmd: Spmd, axis: str, t: AxisType) -> Spmd:
    return Spmd.of({**spmd.axes, axis: t}, None, spmd.nograd, spmd.rest)


def _replicated(ctx: Any, formal: str) -> Optional[AxisType]:
    arg = one_arg(ctx, formal)
    if arg is None:
        return R
    t = LOCAL_TYPES.get(_mypy.fullname_of(arg[0]) or "")
    return t if t in (R, I) else None


def _conversion(ctx: Any, fn: str) -> _mypy.Type:
    default = ctx.default_return_type
    src_layout, dst_layout = CONVERSIONS[fn]
    x, axis_arg, dim_arg = one_arg(ctx, "x"), one_arg(ctx, "axis"), one_arg(ctx, "dim")
    dim = 0 if dim_arg is None else _mypy.int_value(dim_arg[0])
    axis = axis_of(axis_arg[0], axis_arg[1], ctx.api) if axis_arg is not None else None
    if x is None or not isinstance(axis, str) or dim is None:
        return default  # a computed axis or dim: not typed statically
    src = _replicated(ctx, "src") if src_layout == "R" else layout_type(src_layout, dim)
    dst = _replicated(ctx, "dst") if dst_layout == "R" else layout_type(dst_layout, dim)
    actual = spmd_of(x[1])
    if src is None or dst is None or actual is None:
        return default
    have = actual.axis_type(axis)
    if have is not None and have != src:
        name = _mypy.expr_text(x[0])
        ctx.api.fail(
            f"spmd.partitioned.{fn} on axis {axis!r}: it takes a {src} value, but {name} is "
            f"{have} there; the pieces would be taken from the wrong places and the value "
            f"(and its gradient) would be scrambled{_fix(ctx, fn, have, dst_layout, name, axis)}",
            ctx.context,
            code=SPMD_COLLECTIVE,
        )
    if fn != "map_partitions":  # no communication there
        comm_sites.record_call(ctx, "partitioned." + fn, x, (axis,), src, dst)
    return _mypy.replace_tensors(default, carrier(ctx.api, _with(actual, axis, dst)))


def _fix(ctx: Any, fn: str, have: AxisType, dst_layout: str, name: str, axis: str) -> str:
    """How the message ends: the conversion that takes `have` where the call
    wanted to go, as a hint in place of the call when it can be written with
    the call's own splits; else advice in words."""
    if isinstance(have, PartitionedShard):
        src_layout = "PSA" if have.aligned else "PS"
    elif have in (R, I):
        src_layout = "R"
    else:
        return f"; make {name} partitioned first (spmd.partitioned.replicate_to_unaligned of its full value)"
    if fn == "map_partitions":
        return f"; convert {name} to the aligned layout first (spmd.partitioned.unaligned_to_aligned)"
    if src_layout == dst_layout:
        return f"; {name} already has that layout, so drop this call"
    wanted = next(f for f, (s, d) in CONVERSIONS.items() if s == src_layout and d == dst_layout)
    splits = one_arg(ctx, "splits")
    if src_layout == "R" or splits is None:  # scattering needs every rank's splits (a matrix)
        return f"; use spmd.partitioned.{wanted}, which takes the splits of {name}'s layout"
    dim = f", dim={have.dim}" if isinstance(have, PartitionedShard) and have.dim else ""
    return f". Hint: spmd.partitioned.{wanted}({name}, {axis!r}, {_mypy.expr_text(splits[0])}{dim}) in place of this call"


def _conversion_hook(fn: str) -> Callable[[Any], _mypy.Type]:
    return lambda ctx: _conversion(ctx, fn)


HOOKS: Dict[str, Callable[[Any], _mypy.Type]] = {
    MODULE + fn: guarded(_conversion_hook(fn), default_return) for fn in CONVERSIONS
}


# -- ops on partitioned values -----------------------------------------------------------


def _typed_args(ctx: Any, name: str, receiver: bool) -> List[Tuple[str, Optional[Spmd]]]:
    """The operands as the general rules see them (operator sides named as
    written); a value from two branches counts as unknown here."""
    out: List[Tuple[str, Optional[Spmd]]] = []
    for text, options in operands(ctx, name, receiver):
        only = options[0] if len(options) == 1 else None
        out.append((text, only if isinstance(only, Spmd) else None))
    return out


def _dims(ctx: Any, name: str) -> List[Optional[int]]:
    """The dims an op names: dim=/dims= keywords, else its positional dim (None: not a literal)."""
    found: List[Optional[int]] = []
    plain: List[Any] = []
    for arg_name, expr, typ in _mypy.call_args(ctx):
        if arg_name in ("dim", "dims"):
            found.extend(_ints(expr))
        elif arg_name is None and not _mypy.has_tensor(typ) and _mypy.display_items(expr) is None:
            plain.append(expr)
    pos = dim_position(name)
    if not found and pos is not None and pos < len(plain):
        found.extend(_ints(plain[pos]))
    return found


def _ints(expr: Any) -> List[Optional[int]]:
    v = _mypy.literal_value(expr)
    if isinstance(v, int) and not isinstance(v, bool):
        return [v]
    if isinstance(v, (tuple, list)) and all(isinstance(d, int) for d in v):
        return list(v)
    return [None]


def adjust(ctx: Any, name: str, namespace: str, receiver: bool, result: Optional[Spmd]) -> Optional[Spmd]:
    """The op's result after the partitioned-layout rule, reporting its errors;
    `result` (the general rules') unchanged when no operand is partitioned."""
    args = _typed_args(ctx, name, receiver) if _any_partitioned(ctx, receiver) else []
    axes = sorted({a for _, s in args if s is not None for a, t in s.axes.items() if isinstance(t, PartitionedShard)})
    if not axes:
        return result
    dims = _dims(ctx, name)
    base = name.strip("_") if name.startswith("__") and name not in ("__getitem__",) else name
    out = dict(result.axes) if result is not None else {}
    for axis in axes:
        types = [s.axis_type(axis) if s is not None else None for _, s in args]
        try:
            kept = op_rule(base, types, dims, value=_partitioned_text(args, types), axis=axis)
        except PartitionError as err:
            found = ", ".join(f"{text} is {t}" for (text, _), t in zip(args, types) if t is not None)
            ctx.api.fail(f"{display_name(name, namespace)} on axis {axis!r} ({found}): {err}", ctx.context, code=SPMD_OP)
            continue
        if kept is not None and axis in out:
            out[axis] = kept
    if result is None:
        return None
    return Spmd.of(out, result.spec, result.nograd, result.rest)


def _partitioned_text(args: List[Tuple[str, Optional[Spmd]]], types: List[Optional[AxisType]]) -> str:
    return next((text for (text, _), t in zip(args, types) if isinstance(t, PartitionedShard)), "x")


def _any_partitioned(ctx: Any, receiver: bool) -> bool:
    """A quick look (every op asks): an operand carrying PS(i)/PSA(i), or a
    list display (torch.cat([a, b])) to look inside."""
    if receiver and "PS(" in (_mypy.carried(ctx.type) or ""):
        return True
    for _, expr, typ in _mypy.call_args(ctx):
        if "PS" in (_mypy.carried(typ) or "") or _mypy.display_items(expr) is not None:
            return True
    return False


# -- collectives of partitioned values ---------------------------------------------------


def collective_refine(inner: Optional[Callable[..., Any]]) -> Callable[..., Any]:
    """`inner` (global mode's refinement), after rejecting a collective of a value
    partitioned on one of its axes."""

    def refine(ctx: Any, op: str, x: Tuple[Any, Any], axis: Any, src: AxisType, dst: AxisType,
               expert: bool) -> Any:
        actual = spmd_of(x[1])
        for a in axis_names(axis):
            have = actual.axis_type(a) if actual is not None else None
            if isinstance(have, PartitionedShard):
                name = _mypy.expr_text(x[0])
                layout = "aligned" if have.aligned else "unaligned"
                ctx.api.fail(
                    f"spmd.{op} on axis {a!r}: {name} is {have}, a dim cut into partitions of "
                    f"sizes known only at runtime; spmd.{op} would treat it as S({have.dim}) and "
                    f"put the partitions' pieces in the wrong order; use "
                    f"spmd.partitioned.{layout}_to_replicate with {name}'s splits",
                    ctx.context,
                    code=SPMD_COLLECTIVE,
                )
                return (_with(actual, a, dst) if actual is not None and isinstance(a, str) else None,)
        return inner(ctx, op, x, axis, src, dst, expert) if inner is not None else None

    return refine

