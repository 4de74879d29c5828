"""The contraction rule in local code: a product whose contracted dim is
sharded on an axis in two operands is a pending sum there.

op_inference.py asks `site` once per call of a product op (matmul, `@`, F.linear,
einsum, bmm, ...; vocab/contractions.py) and `violation` per axis.  The
product is exempt on the axes the code declares partial: `out_partial_axes=`
of spmd.matmul/linear/einsum, or `spmd.reinterpret(..., src=V, dst=P)` on the
product, directly or as the next use of the name it is assigned to
(_mypy.partial_sites).  Elsewhere it is an spmd-op error and the result is P
on that axis, the type the fix gives, so the checks downstream see the
pending sum the ranks really hold.
"""

from __future__ import annotations

from typing import Any, FrozenSet, List, Optional, Sequence, Tuple

from ..vocab.contractions import CONTRACTIONS, EINSUM, ONE_CALL, partial_operands
from ..vocab.localtype import AxisType, P, V
from ..vocab.opclasses import AFFINE
from ..vocab.opnames import display_name
from ..vocab.spec import Spmd
from . import _mypy
from .decoding import LOCAL_TYPES
from .answers import depends_on_site
from .callsite import Text, one_arg
from .sourcefile import read_source

REINTERPRET = "spmd_mypy.runtime.api.reinterpret"
# spmd_types' reinterpret (read with our rules, plugin/spmd_types.py) says the same
REINTERPRETS = (REINTERPRET, "spmd_types.reinterpret")
_SPMD_TYPES_V_P = {"spmd_types.V": V, "spmd_types.P": P}
ANY_AXIS = "*"  # reinterpret over an axis not written as a string: every axis


def is_product(name: str) -> bool:
    return name in CONTRACTIONS or name in EINSUM


class Site:
    """What a product call's context says: its einsum equation, and the axes
    the code declares partial (ANY_AXIS: all).  The declared axes are read
    only when a contraction is found sharded (`exempt`): they need the
    function's next uses (_mypy.declared_partial), and most products in
    clean code contract no sharded dim.  `consulted` says whether they were
    read, so a result that depended on them is not memoised by operand types
    alone (op_inference.infer_one)."""

    __slots__ = ("equation", "_ctx", "_exempt")

    def __init__(self, ctx: Any, equation: Optional[str]) -> None:
        self.equation = equation
        self._ctx = ctx
        self._exempt: Optional[FrozenSet[str]] = None

    @property
    def consulted(self) -> bool:
        return self._exempt is not None

    @property
    def exempt(self) -> FrozenSet[str]:
        if self._exempt is None:
            depends_on_site(declared_partial=True)  # the function's next uses (answers.remembered's site)
            self._exempt = declared_exempt(self._ctx)
        return self._exempt


def _local_type(expr: Any) -> object:
    name = _mypy.fullname_of(expr) or ""
    return LOCAL_TYPES.get(name) or _SPMD_TYPES_V_P.get(name)


def _reads(call: Any) -> Optional[Tuple[Any, FrozenSet[str]]]:
    """`spmd.reinterpret(value, axis, src=V, dst=P)`: (value, its axes)."""
    parts = _mypy.call_parts(call)
    if parts is None or parts[0] not in REINTERPRETS:
        return None
    _, pos, kws = parts
    named = dict(kws)
    value = pos[0] if pos else named.get("x")
    axis = pos[1] if len(pos) > 1 else named.get("axis")
    src, dst = named.get("src"), named.get("dst")
    if value is None or axis is None or src is None or dst is None:
        return None
    if _local_type(src) is not V or _local_type(dst) is not P:
        return None
    one = _mypy.str_value(axis)
    axes = (one,) if one is not None else _mypy.str_tuple(axis)
    return value, frozenset(axes) if axes is not None else frozenset({ANY_AXIS})


def site(ctx: Any, name: str) -> Site:
    equation = None
    if name in EINSUM:
        first = next(iter(_mypy.call_args(ctx)), None)
        equation = _mypy.str_value(first[1]) if first is not None else None
    return Site(ctx, equation)


def declared_exempt(ctx: Any) -> FrozenSet[str]:
    """The axes the code declares partial for the product at ctx: a
    reinterpret(V -> P) of it, or out_partial_axes= of spmd.matmul/linear/einsum."""
    where = _mypy.span(ctx.context)
    exempt = _mypy.declared_partial(ctx.api, _reads).get(where, frozenset()) if where is not None else frozenset()
    declared = one_arg(ctx, "out_partial_axes")
    if declared is not None:
        one = _mypy.str_value(declared[0])
        axes = (one,) if one is not None else _mypy.str_tuple(declared[0])
        exempt = exempt | (frozenset(axes) if axes is not None else frozenset({ANY_AXIS}))
    return exempt


def violation(
    ctx: Any, name: str, namespace: str, axis: str, product: Sequence[Tuple[Text, object]], where: Site
) -> Optional[str]:
    """The error message when the product is an undeclared pending sum on
    `axis`; `product`: the product operands (text, type) in source order."""
    on_axis: List[Tuple[Optional[AxisType], Optional[int]]] = []
    for _, o in product:
        t = o.axis_type(axis) if isinstance(o, Spmd) else None
        on_axis.append((t, o.ndim if isinstance(o, Spmd) else None))
    flagged = partial_operands(name, on_axis, where.equation)
    if flagged is None or axis in where.exempt or ANY_AXIS in where.exempt:
        return None
    found = ", ".join(f"{product[k][0]} is {on_axis[k][0]}" for k in flagged)
    varying = any(on_axis[k][0] is V for k in flagged)
    return (
        f"{display_name(name, namespace)} on axis {axis!r} ({found}): the contracted dim is sharded "
        f"on {axis!r} in both operands" + (" (the V operand must hold its shard, or the shapes would not agree)" if varying else "")
        + ", so each rank holds its partial sum of the product, not a "
        f"Varying value; unreduced, the forward misses the other ranks' terms and the gradient of "
        f"the sharded weight is wrong. Hint: {_fix(ctx, name, axis)}"
    )


def _fix(ctx: Any, name: str, axis: str) -> str:
    """The one-call form (then a reduction) and the reinterpret form, with the
    expressions as written."""
    data = read_source(_mypy.checker_path(ctx.api) or "")
    whole = _mypy.source_text(_mypy.span(ctx.context), data) or "<product>"
    args = _argument_texts(ctx, data)
    one = ONE_CALL.get(name)
    bias = args[2:] if name in AFFINE and args is not None else []
    reduce = f"then reduce it over {axis!r} (spmd.all_reduce or spmd.reduce_scatter, src=P)"
    if bias:  # the bias would be counted once per rank in the pending sum: add it after
        added = bias[0].partition("=")[2] if "=" in bias[0] else bias[0]
        if one is None or args is None or len(args) < 2:
            return f"compute the product with out_partial_axes={axis!r}, {reduce}, and add {added} after"
        return f"spmd.{one}({', '.join(args[:2])}, out_partial_axes={axis!r}), {reduce}, and add {added} after"
    reinterpret = f"spmd.reinterpret({whole}, {axis!r}, src=V, dst=P)"
    if one is not None and args is not None and len(args) >= 2:  # both operands written at the call
        return f"spmd.{one}({', '.join(args)}, out_partial_axes={axis!r}), {reduce}; or {reinterpret}"
    return f"{reinterpret}, {reduce}"


def _argument_texts(ctx: Any, data: bytes) -> Optional[List[str]]:
    """The operands of the call as written (the receiver first, keywords kept, out= dropped)."""
    context = ctx.context
    pieces: List[Tuple[Optional[str], Any]] = []
    left, right = getattr(context, "left", None), getattr(context, "right", None)
    if left is not None and right is not None:
        pieces = [(None, left), (None, right)]
    else:
        callee = getattr(context, "callee", None)
        receiver = getattr(callee, "expr", None)
        if receiver is not None and getattr(ctx, "type", None) is not None:  # a method call
            pieces.append((None, receiver))
        for arg, arg_name in zip(getattr(context, "args", ()), getattr(context, "arg_names", ())):
            if arg_name != "out":
                pieces.append((arg_name, arg))
    texts = []
    for arg_name, expr in pieces:
        text = _mypy.source_text(_mypy.span(expr), data) or _mypy.expr_text(expr)
        texts.append(f"{arg_name}={text}" if arg_name else text)
    return texts or None
