"""Shard propagation in global SPMD: a factor table, in the style of Shardy.

Every op is described by factors.  Each operand dim and each result dim is a
list of factors (major to minor; most dims hold one, a dim that a reshape
splits or merges holds several, a broadcast size-1 dim holds none).  A
factor has a kind:

  pass-through      in operands and the result: its axes carry over
  sum               summed away (a contraction, sum over a dim): sharded, it
                    makes the result a pending sum, which the call must
                    declare with out_partial_axes
  reduction         reduced by something other than a sum (mean, amax, ...):
                    must be unsharded (a pending max has no type)
  need-replication  the op needs the whole dim (softmax, cumsum, sort, cat)
  permutation       the op moves elements along the dim (slicing, flip, conv
                    windows): must be unsharded

`FACTOR_TABLE` (factor_table.py) maps a torch callable's name to a row: a builder family
(one of about twenty) and its fixed arguments.  A builder (factor_build_*.py)
turns the operand ranks, the known sizes and the literal arguments into a
`Signature`.  `propagate` then checks it, with no hidden communication:

  * operands sharing a factor carry identical axes on it;
  * need-replication, permutation and non-sum reduction factors are unsharded;
  * sharded sum factors need out_partial_axes equal to their axes and make
    the result P on them;
  * a dim made of several factors is sharded on its major factor only, unless
    the major factor is fully sharded (known sizes); with the mesh sizes, an
    axis larger than the factor it starts in is split into sub-axes ("x":(1)2
    for this factor, "x":(2)2 for the next: seed 002), and adjacent parts of
    one axis in a result dim merge back (into the axis when they cover it);
  * no mesh axis, or part of one, appears twice in the result;
  * the local per-axis rules of opclasses.py still hold (global refines
    local): a Partial operand enters linear ops only, P * R stays P, ...

Sizes and literal shapes are global sizes (the full tensor's, as JAX prints
them).  Every error is a FactorError naming the op, the dims, the axes and
the operands' global types, with `fix`, the call that makes it pass
(factor_errors.py).

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

import math
from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Set, Tuple, Union

from .collectives import fix_call
from .factor_build_compute import FAMILIES as COMPUTE_FAMILIES
from .factor_build_index import FAMILIES as INDEX_FAMILIES
from .factor_build_layout import FAMILIES as LAYOUT_FAMILIES
from .factor_errors import (
    Seen,
    axes_text,
    check_kind,
    gather_call,
    raise_axis_twice,
    raise_mismatch,
    raise_out_partial,
    redistribute_call,
    rule_error,
)
from .factor_signature import BuildContext, Operand, Signature, is_scalar
from .factor_table import (
    DTYPE_RESULT,
    FACTOR_TABLE,
    NEED_REPLICATION,
    PASS,
    PERMUTATION,
    REDUCE,
    RULES,
    SUM,
    FactorError,
    Row,
    has_rule,
    reads_indices,
)
from .globaltype import GlobalType, dtype_name
from .subaxis import axis_size, base_axis, merge_dim, overlap, parse_axis_ref, sub_axis_text
from .localtype import I, LocalType, P, R, V
from .opclasses import LINEAR, NO_GRAD_RESULTS, NONLINEAR, RANDOM, SCALAR, OpRuleError, combine, op_class_or_none

__all__ = [
    "PASS",
    "SUM",
    "REDUCE",
    "NEED_REPLICATION",
    "PERMUTATION",
    "FactorError",
    "RULES",
    "Row",
    "Signature",
    "FACTOR_TABLE",
    "BUILDERS",
    "has_rule",
    "reads_indices",
    "signature",
    "propagate",
    "gather_call",
    "redistribute_call",
]

# Every family's builder (the families of FACTOR_TABLE's rows).
BUILDERS: Mapping[str, Callable[[BuildContext], Signature]] = {**COMPUTE_FAMILIES, **LAYOUT_FAMILIES, **INDEX_FAMILIES}


def _default_names(operands: Sequence[Operand]) -> List[str]:
    if len(operands) == 1:
        return ["x"]
    return [chr(ord("a") + k) if k < 26 else f"x{k}" for k in range(len(operands))]


def _row(op: str) -> Row:
    row = FACTOR_TABLE.get(op)
    if row is None:
        raise FactorError(f"{op}: no global shard-propagation rule for this op", code="no-rule")
    return row


def signature(op: str, operands: Sequence[Operand], params: Optional[Mapping[str, object]] = None) -> Signature:
    """The factor signature of `op` applied to these operands (for tests and the plugin)."""
    row = _row(op)
    names = _default_names(operands)
    return BUILDERS[row.family](BuildContext(op, row, list(operands), dict(params or {}), names))


def propagate(
    op: str,
    operands: Sequence[Operand],
    params: Optional[Mapping[str, object]] = None,
    out_partial_axes: Union[str, Sequence[str], FrozenSet[str]] = frozenset(),
    *,
    mesh: Optional[Mapping[str, int]] = None,
    names: Optional[Sequence[str]] = None,
    nonlinear: bool = False,
) -> GlobalType:
    """The global type of op(*operands, **params), or raise FactorError.

    operands: GlobalTypes in the op's positional order (a Python number is
    SCALAR or the number itself); params: literal arguments by torch's
    parameter names (dim, keepdim, shape, equation, ...); mesh: known mesh
    axis sizes (for reshape's sub-axis and divisibility checks; without
    them an axis is assumed to divide the dim it shards); names: the
    operands' source text, used in messages and fixes; nonlinear: an
    argument of the call makes the op nonlinear (opclasses.ARGUMENT_CLASSES,
    cast_class: a nonzero fill, an integer dtype, a rounding mode).
    """
    out_partial = frozenset((out_partial_axes,) if isinstance(out_partial_axes, str) else out_partial_axes)
    names = list(names) if names is not None else _default_names(operands)
    if len(names) < len(operands):
        names += _default_names(operands)[len(names) :]
    row = _row(op)
    for k, o in enumerate(operands):
        if not isinstance(o, GlobalType) and not is_scalar(o):
            raise FactorError(f"{op}: operand {k} is neither a GlobalType nor a number: {o!r}", code="bad-param")
    c = BuildContext(op, row, list(operands), dict(params or {}), names)
    sig = BUILDERS[row.family](c)
    mesh = dict(mesh or {})
    seen = _operand_axes(c, sig, mesh)  # 1. each operand dim hands its axes to its factors
    factor_axes = _factor_axes(c, sig, seen)  # 2. whole dims stay whole; sharing factors agree
    _check_summed(c, sig, seen, factor_axes, out_partial)  # 3. sharded sums are declared partial
    result, origin = _result_dims(c, sig, seen, factor_axes, mesh, out_partial)  # 4. the result's dims
    # 5. the local per-axis rules (global refines local)
    placed = {a for e in result for a in e}
    partial, local = _local_rules(
        op, row, operands, names, out_partial, placed | {base_axis(a) for a in placed},
        NONLINEAR if nonlinear else _class(op, row),
    )
    for a in sorted(partial):
        if a in origin:
            raise_axis_twice(op, a, origin[a], (-1, ""), seen, operands, names)
    return _result_type(c, sig, result, partial, local)


def _operand_axes(c: BuildContext, sig: Signature, mesh: Mapping[str, int]) -> Dict[str, List[Seen]]:
    """Each operand dim hands its axes to its factors: factor -> the dims that shard it."""
    seen: Dict[str, List[Seen]] = {}
    for k, o in enumerate(c.operands):
        if not isinstance(o, GlobalType):
            continue
        for d, factors in enumerate(sig.operands[k]):
            axes = o.spec[d]
            if not factors:
                if axes:
                    raise FactorError(
                        f"{c.op}: dim {d} of {c.names[k]}: {o} is broadcast (size 1) but sharded on "
                        f"{axes_text(axes)}",
                        gather_call(c.names[k], o, d),
                        code="broadcast-sharded",
                    )
                continue
            for f, part in _split_axes(c.op, c, k, d, factors, axes, sig, mesh).items():
                seen.setdefault(f, []).append(Seen(k, d, part))
    return seen


def _factor_axes(c: BuildContext, sig: Signature, seen: Mapping[str, List[Seen]]) -> Dict[str, Tuple[str, ...]]:
    """The axes of each factor: whole factors stay unsharded, operands sharing one agree."""
    factor_axes: Dict[str, Tuple[str, ...]] = {}
    for f, obs in seen.items():
        ref = max(obs, key=lambda s: len(s.axes))
        if ref.axes:
            check_kind(c.op, sig, f, ref, c.operands, c.names)
        for s in obs:
            if s.axes != ref.axes:
                raise_mismatch(c.op, sig, f, ref, s, c.operands, c.names)
        factor_axes[f] = ref.axes
    return factor_axes


def _check_summed(
    c: BuildContext,
    sig: Signature,
    seen: Mapping[str, List[Seen]],
    factor_axes: Mapping[str, Tuple[str, ...]],
    out_partial: FrozenSet[str],
) -> None:
    """Sharded sums make the result partial only when out_partial_axes declares them."""
    summed: List[str] = []
    summed_seen: List[Seen] = []
    for f, axes in factor_axes.items():
        if axes and sig.kinds[f] == SUM:
            summed.extend(a for a in axes if a not in summed)
            summed_seen.extend(x for x in seen[f] if x.axes)
    if set(summed) != set(out_partial):
        raise_out_partial(c.op, c.params, c.names, c.operands, summed, summed_seen, out_partial, sig)


def _result_dims(
    c: BuildContext,
    sig: Signature,
    seen: Mapping[str, List[Seen]],
    factor_axes: Mapping[str, Tuple[str, ...]],
    mesh: Mapping[str, int],
    out_partial: FrozenSet[str],
) -> Tuple[List[Tuple[str, ...]], Dict[str, Tuple[int, str]]]:
    """The axes of each result dim, and where each axis lands (dim, factor)."""
    result: List[Tuple[str, ...]] = []
    origin: Dict[str, Tuple[int, str]] = {}
    for e, factors in enumerate(sig.result):
        here: List[str] = []
        for pos, f in enumerate(factors):
            fa = factor_axes.get(f, ())
            if fa and pos > 0 and not _fully_sharded(factors[:pos], factor_axes, sig, mesh):
                s = next(x for x in seen[f] if x.axes)
                t = c.operands[s.k]
                assert isinstance(t, GlobalType)
                raise FactorError(
                    f"{c.op}: dim {s.d} of {c.names[s.k]}: {t} is sharded on {axes_text(fa)} but is not the "
                    f"major part of result dim {e}; the ranks' pieces would interleave",
                    gather_call(c.names[s.k], t, s.d),
                    code="reshape-minor",
                )
            for a in fa:
                twice = _overlapping(a, origin)
                if twice is not None:
                    raise_axis_twice(c.op, twice, origin[twice], (e, f), seen, c.operands, c.names)
                origin[a] = (e, f)
            here.extend(fa)
        result.append(merge_dim(here, mesh) if any(":" in a for a in here) else tuple(here))
    for a in sorted(out_partial):
        twice = _overlapping(a, origin)
        if twice is not None:  # a summed axis also shards a result dim
            raise_axis_twice(c.op, twice, origin[twice], (-1, ""), seen, c.operands, c.names)
    return result, origin


def _overlapping(axis: str, placed: Mapping[str, object]) -> Optional[str]:
    """The axis already placed that is `axis` or shares a part of a mesh axis with it."""
    if axis in placed:
        return axis
    if not any(":" in a for a in placed) and ":" not in axis:
        return None
    ref = parse_axis_ref(axis)
    return next((a for a in placed if overlap(ref, parse_axis_ref(a))), None)


def _result_type(
    c: BuildContext,
    sig: Signature,
    result: Sequence[Tuple[str, ...]],
    partial: Set[str],
    local: Dict[str, LocalType],
) -> GlobalType:
    """The result's global type: its dims, partial and local axes, dtype, sizes and grad."""
    row, operands = c.row, c.operands
    values = row.values if row.values is not None else tuple(range(len(operands)))
    tensors = [operands[k] for k in values if isinstance(operands[k], GlobalType) and k not in row.indices]
    all_tensors = [o for o in operands if isinstance(o, GlobalType)]
    nograd = c.op in NO_GRAD_RESULTS or all(t.nograd for t in all_tensors)
    return GlobalType(
        [r if r else None for r in result],
        partial,
        local=local,
        dtype=_result_dtype(c.op, c.params, tensors),
        sizes=sig.result_sizes,
        nograd=nograd,
    )


def _split_axes(
    op: str,
    c: BuildContext,
    k: int,
    d: int,
    factors: Sequence[str],
    axes: Sequence[str],
    sig: Signature,
    mesh: Mapping[str, int],
) -> Dict[str, Tuple[str, ...]]:
    """Hand a dim's axes (major to minor) to its factors (major to minor).

    Without sizes every axis goes to the major factor.  With sizes an axis
    fills the current factor; a filled factor passes on to the next; an axis
    larger than what is left is split into sub-axes (Shardy's "x":(m)k): its
    major part fills this factor and the rest goes on to the next.
    """
    out: Dict[str, List[str]] = {f: [] for f in factors}
    if len(factors) == 1:
        out[factors[0]] = list(axes)
        return {f: tuple(v) for f, v in out.items()}
    t = c.operands[k]
    assert isinstance(t, GlobalType)
    fi = 0
    cap = sig.sizes.get(factors[0])
    todo = list(axes)
    while todo:
        a = todo.pop(0)
        m = axis_size(a, mesh)
        if m is None or cap is None:
            out[factors[fi]].append(a)
            continue
        if cap % m == 0:
            out[factors[fi]].append(a)
            cap //= m
        elif m % cap == 0 and fi + 1 < len(factors):
            ref = parse_axis_ref(a)
            out[factors[fi]].append(sub_axis_text(ref.name, ref.pre, cap))
            todo.insert(0, sub_axis_text(ref.name, ref.pre * cap, m // cap))
            cap = 1
        else:
            raise FactorError(
                f"{op}: axis {a!r} (size {m}) shards dim {d} of {c.names[k]}: {t}, but the part of that "
                f"dim it would shard has size {cap}, which {m} does not divide",
                gather_call(c.names[k], t, d),
                code="not-divisible",
            )
        if cap == 1 and fi + 1 < len(factors):
            fi += 1
            cap = sig.sizes.get(factors[fi])
    return {f: tuple(v) for f, v in out.items()}


def _fully_sharded(
    factors: Sequence[str], factor_axes: Mapping[str, Tuple[str, ...]], sig: Signature, mesh: Mapping[str, int]
) -> bool:
    """Every factor is split across as many ranks as it has elements (local size 1)."""
    for f in factors:
        size = sig.sizes.get(f)
        axes = factor_axes.get(f, ())
        known = [axis_size(a, mesh) for a in axes]
        if size is None or None in known:
            return False
        if math.prod(known) != size:  # type: ignore[arg-type]
            return False
    return True


def _class(op: str, row: Row) -> str:
    """The op's class on each axis: its row's, else its op table's (nonlinear
    when in none)."""
    return row.cls or op_class_or_none(op, "tensor") or op_class_or_none(op, "functional") or NONLINEAR


def _local_rules(
    op: str,
    row: Row,
    operands: Sequence[Operand],
    names: Sequence[str],
    out_partial: FrozenSet[str],
    result_axes: Set[str],
    cls: str,
) -> Tuple[Set[str], Dict[str, LocalType]]:
    """Per-axis local types of the result (P axes, and I/V axes) in class `cls`, or raise."""
    tensors = [o for o in operands if isinstance(o, GlobalType)]
    axes = sorted({a for t in tensors for a in t.axes})
    in_spec = {a for t in tensors for a in t.spec.axes}
    partial: Set[str] = set()
    local: Dict[str, LocalType] = {}
    for axis in axes:
        on: List[Tuple[str, object]] = []
        nograd: List[bool] = []
        for k, o in enumerate(operands):
            if isinstance(o, GlobalType):
                at = o.axis_type(axis)
                if k in row.indices and at is P:
                    raise FactorError(
                        f"{op} on axis {axis!r}: the index {names[k]}: {o} is Partial; an index "
                        f"must be the same on every rank or sharded",
                        fix_call(P, R, axis, names[k]) or "",
                        code="partial-index",
                    )
                on.append((names[k], at))
                nograd.append(o.nograd or k in row.indices)
            else:
                on.append((names[k], SCALAR))
                nograd.append(True)
        if axis in in_spec and any(at is V for _, at in on):
            ks = next(k for k, o in enumerate(operands) if isinstance(o, GlobalType) and axis in o.spec.axes)
            kv = next(k for k, (_, at) in enumerate(on) if at is V)
            t = operands[ks]
            assert isinstance(t, GlobalType)
            raise FactorError(
                f"{op}: axis {axis!r} shards {names[ks]}: {t} but {names[kv]}: {operands[kv]} is "
                f"Varying on it (local mode); a global and a local value do not mix",
                gather_call(names[ks], t, t.spec.dim_of(axis) or 0, [axis]),
                code="local-global-mixed",
            )
        types = [t for _, t in on]
        keep = [k for k in (row.values or range(len(types))) if k != row.bias]
        try:
            result = combine(cls, [types[k] for k in keep], [nograd[k] for k in keep])  # type: ignore[misc]
        except OpRuleError as err:
            raise rule_error(op, axis, on, err) from None
        if axis in out_partial:
            result = P  # the declared pending sum (local SPMD: the op, then reinterpret V -> P)
        if row.bias is not None and len(types) > row.bias:
            # an affine op: the product plus the bias (a Partial product takes a Partial bias)
            bias = types[row.bias]
            try:
                result = combine(LINEAR, [result, bias], [nograd[keep[0]], nograd[row.bias]])  # type: ignore[list-item]
            except OpRuleError as err:
                if result is P and bias is not P:
                    bname = names[row.bias]
                    raise FactorError(
                        f"{op} on axis {axis!r}: the product is P and the bias {bname} is {bias}: "
                        f"{err}",
                        fix_call(bias, P, axis, bname) or "",  # type: ignore[arg-type]
                        code=err.code,
                    ) from None
                raise rule_error(op, axis, on, err) from None
        if axis in out_partial or result is P:
            partial.add(axis)
        elif result is V:
            if axis in result_axes or base_axis(axis) in result_axes:
                continue
            if axis in in_spec and cls != RANDOM:
                raise FactorError(
                    f"{op}: the sharding on {axis!r} does not reach the result", code="bad-param"
                )
            local[axis] = V
        elif result is I:
            local[axis] = I
    return partial, local


def _result_dtype(op: str, params: Mapping[str, object], tensors: Sequence[object]) -> Optional[str]:
    if op in ("to", "type") and params.get("dtype") is not None:
        return dtype_name(params["dtype"])
    if op in DTYPE_RESULT:
        return DTYPE_RESULT[op]
    if params.get("dtype") is not None:
        return dtype_name(params["dtype"])
    known = {t.dtype for t in tensors if isinstance(t, GlobalType)}
    if len(known) == 1 and None not in known:
        return known.pop()
    return None
