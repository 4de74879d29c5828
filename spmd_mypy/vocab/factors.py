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
(one of about fifteen) and its fixed arguments.  A builder turns the operand
ranks, the known sizes and the literal arguments into a `Signature`.
`propagate` then checks it, with no hidden communication:

  * operands sharing a factor carry identical axes on it;
  * need-replication, permutation and non-sum reduction factors are unsharded;
  * sharded sum factors need out_partial_axes equal to their axes and make
    the result P on them;
  * a dim made of several factors is sharded on its major factor only, unless
    the major factor is fully sharded (known sizes); a reshape that would need
    a sub-axis ("x":(1)2) is an error naming it;
  * no mesh axis appears twice in the result;
  * the local per-axis rules of opclasses.py still hold (global refines
    local): a Partial operand enters linear ops only, P * R stays P, ...

Sizes and literal shapes are global sizes (the full tensor's, as JAX prints
them).  Every error is a FactorError naming the op, the dims, the axes and
the operands' global types, with `fix`, the call that makes it pass.

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

import math
from typing import Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union

from .collectives import fix_call
from .factor_table import (
    FACTOR_TABLE,
    FactorError,
    NEED_REPLICATION,
    Operand,
    PASS,
    PERMUTATION,
    REDUCE,
    RULES,
    Row,
    SUM,
    Signature,
    _BUILDERS,
    _Ctx,
    _DTYPE_RESULT,
    _UNKNOWN_RESHAPE,
    _is_scalar,
    has_rule,
)
from .globaltype import GlobalType, dtype_name
from .localtype import I, LocalType, P, R, V
from .opclasses import LINEAR, NO_GRAD_RESULTS, NONLINEAR, RANDOM, SCALAR, OpRuleError, combine, op_class_or_none
from .spec import SpecError

__all__ = [
    "PASS",
    "SUM",
    "REDUCE",
    "NEED_REPLICATION",
    "PERMUTATION",
    "FactorError",
    "Row",
    "Signature",
    "FACTOR_TABLE",
    "has_rule",
    "signature",
    "propagate",
    "gather_call",
    "redistribute_call",
]



# -- text of types and calls -----------------------------------------------------------


def _default_names(operands: Sequence[Operand]) -> List[str]:
    if len(operands) == 1:
        return ["x"]
    return [chr(ord("a") + k) if k < 26 else f"x{k}" for k in range(len(operands))]


def _axes_text(axes: Sequence[str]) -> str:
    if len(axes) == 1:
        return repr(axes[0])
    return "(" + ", ".join(repr(a) for a in axes) + ")"


def _tuple_text(axes: Sequence[str]) -> str:
    return "(" + ", ".join(repr(a) for a in axes) + ("," if len(axes) == 1 else "") + ")"


def redistribute_call(name: str, src: GlobalType, dst: GlobalType) -> str:
    """The spec-level redistribute from src to dst, as a call."""
    return f"spmd.redistribute({name}, src={src.to_spmd()!r}, dst={dst.to_spmd()!r})"


def _with_dim(t: GlobalType, d: int, axes: Sequence[str]) -> GlobalType:
    """t with dim d sharded on `axes` (taken off other dims and partial)."""
    entries = [tuple(a for a in e if a not in axes) for e in t.spec.dims]
    entries[d] = tuple(axes)
    return t.replace(
        spec=[e if e else None for e in entries],
        partial=t.partial - set(axes),
        local={a: v for a, v in t.local.items() if a not in axes},
    )


def gather_call(name: str, t: GlobalType, d: int, axes: Optional[Sequence[str]] = None) -> str:
    """The call that leaves dim d of t unsharded on `axes` (default: all its axes)."""
    entry = t.spec[d]
    drop = tuple(entry if axes is None else axes)
    if len(drop) == 1 and entry and entry[-1] == drop[0]:
        return f"spmd.all_gather({name}, {drop[0]!r}, src=S({d}), dst=R)"
    return redistribute_call(name, t, _with_dim(t, d, [a for a in entry if a not in drop]))


def _render(value: object) -> str:
    return repr(value)


def _op_call(op: str, names: Sequence[str], params: Mapping[str, object], out_partial: Sequence[str]) -> str:
    args = list(names)
    rest = dict(params)
    if op == "einsum" and "equation" in rest:
        args.insert(0, _render(rest.pop("equation")))
    args += [f"{k}={_render(v)}" for k, v in rest.items()]
    if out_partial:
        args.append(f"out_partial_axes={_tuple_text(out_partial)}")
    return f"spmd.{op}({', '.join(args)})"


# -- propagation --------------------------------------------------------------------------


def signature(op: str, operands: Sequence[Operand], params: Optional[Mapping[str, object]] = None) -> Signature:
    """The factor signature of `op` applied to these operands (for tests and the plugin)."""
    row = FACTOR_TABLE.get(op)
    if row is None:
        raise FactorError(f"{op}: no global shard-propagation rule for this op", code="no-rule")
    names = _default_names(operands)
    return _BUILDERS[row.family](_Ctx(op, row, list(operands), dict(params or {}), names))


class _Seen(NamedTuple):
    k: int  # operand
    d: int  # dim
    axes: Tuple[str, ...]


def propagate(
    op: str,
    operands: Sequence[Operand],
    params: Optional[Mapping[str, object]] = None,
    out_partial_axes: Union[str, Sequence[str], FrozenSet[str]] = frozenset(),
    *,
    mesh: Optional[Mapping[str, int]] = None,
    names: Optional[Sequence[str]] = None,
) -> GlobalType:
    """The global type of op(*operands, **params), or raise FactorError.

    operands: GlobalTypes in the op's positional order (a Python number is
    SCALAR or the number itself); params: literal arguments by torch's
    parameter names (dim, keepdim, shape, equation, ...); mesh: known mesh
    axis sizes (for reshape's sub-axis and divisibility checks; without
    them an axis is assumed to divide the dim it shards); names: the
    operands' source text, used in messages and fixes.
    """
    params = dict(params or {})
    out_partial = frozenset((out_partial_axes,) if isinstance(out_partial_axes, str) else out_partial_axes)
    row = FACTOR_TABLE.get(op)
    names = list(names) if names is not None else _default_names(operands)
    if len(names) < len(operands):
        names += _default_names(operands)[len(names) :]
    if row is None:
        raise FactorError(f"{op}: no global shard-propagation rule for this op", code="no-rule")
    for k, o in enumerate(operands):
        if not isinstance(o, GlobalType) and not _is_scalar(o):
            raise FactorError(f"{op}: operand {k} is neither a GlobalType nor a number: {o!r}", code="bad-param")
    ctx = _Ctx(op, row, list(operands), params, names)
    sig = _BUILDERS[row.family](ctx)
    mesh = dict(mesh or {})

    def typed(k: int) -> str:
        return f"{names[k]}: {operands[k]}"

    # 1. each operand dim hands its axes to its factors
    seen: Dict[str, List[_Seen]] = {}
    for k, o in enumerate(operands):
        if not isinstance(o, GlobalType):
            continue
        for d, factors in enumerate(sig.operands[k]):
            axes = o.spec[d]
            if not factors:
                if axes:
                    raise FactorError(
                        f"{op}: dim {d} of {typed(k)} is broadcast (size 1) but sharded on "
                        f"{_axes_text(axes)}",
                        gather_call(names[k], o, d),
                        code="broadcast-sharded",
                    )
                continue
            for f, part in _split_axes(op, ctx, k, d, factors, axes, sig, mesh).items():
                seen.setdefault(f, []).append(_Seen(k, d, part))

    # 2. whole dims stay whole; operands sharing a factor carry identical axes
    factor_axes: Dict[str, Tuple[str, ...]] = {}
    for f, obs in seen.items():
        ref = max(obs, key=lambda s: len(s.axes))
        if ref.axes:
            _check_kind(op, sig, f, ref, operands, names)
        for s in obs:
            if s.axes != ref.axes:
                _mismatch(op, sig, f, ref, s, operands, names)
        factor_axes[f] = ref.axes

    # 3. sharded sums become partial only when declared
    summed: List[str] = []
    summed_seen: List[_Seen] = []
    for f, axes in factor_axes.items():
        if axes and sig.kinds[f] == SUM:
            summed.extend(a for a in axes if a not in summed)
            summed_seen.extend(x for x in seen[f] if x.axes)
    if set(summed) != set(out_partial):
        _out_partial_error(op, params, names, operands, summed, summed_seen, out_partial, sig)

    # 4. the result's dims
    result: List[Tuple[str, ...]] = []
    origin: Dict[str, Tuple[int, str]] = {}
    for e, factors in enumerate(sig.result):
        here: List[str] = []
        for pos, f in enumerate(factors):
            fa = factor_axes.get(f, ())
            if fa and pos > 0 and not _fully_sharded(factors[:pos], factor_axes, sig, mesh):
                s = next(x for x in seen[f] if x.axes)
                t = operands[s.k]
                assert isinstance(t, GlobalType)
                raise FactorError(
                    f"{op}: dim {s.d} of {typed(s.k)} is sharded on {_axes_text(fa)} but is not the "
                    f"major part of result dim {e}; the ranks' pieces would interleave",
                    gather_call(names[s.k], t, s.d),
                    code="reshape-minor",
                )
            for a in fa:
                if a in origin:
                    _twice(op, a, origin[a], (e, f), seen, operands, names)
                origin[a] = (e, f)
            here.extend(fa)
        result.append(tuple(here))
    for a in sorted(out_partial):
        if a in origin:  # a summed axis also shards a result dim
            _twice(op, a, origin[a], (-1, ""), seen, operands, names)

    # 5. the local per-axis rules (global refines local)
    partial, local = _local_rules(op, row, operands, names, out_partial, {a for e in result for a in e})
    for a in sorted(partial):
        if a in origin:
            e, f = origin[a]
            _twice(op, a, (e, f), (-1, ""), seen, operands, names)

    values = row.values if row.values is not None else tuple(range(len(operands)))
    tensors = [operands[k] for k in values if isinstance(operands[k], GlobalType) and k not in row.indices]
    all_tensors = [o for o in operands if isinstance(o, GlobalType)]
    nograd = op in NO_GRAD_RESULTS or all(t.nograd for t in all_tensors)
    return GlobalType(
        [r if r else None for r in result],
        partial,
        local=local,
        dtype=_result_dtype(op, params, tensors),
        sizes=sig.result_sizes,
        nograd=nograd,
    )


def _check_kind(
    op: str, sig: Signature, f: str, s: _Seen, operands: Sequence[Operand], names: Sequence[str]
) -> None:
    """Raise if factor f, sharded as operand dim s says, must be whole."""
    kind = sig.kinds[f]
    t = operands[s.k]
    assert isinstance(t, GlobalType)
    typed = f"{names[s.k]}: {t}"
    axes = _axes_text(s.axes)
    if kind in (NEED_REPLICATION, PERMUTATION):
        what = (
            "the op needs the whole dim on every rank"
            if kind == NEED_REPLICATION
            else "the op would move elements across shard boundaries"
        )
        raise FactorError(
            f"{op}: dim {s.d} of {typed} is sharded on {axes}, but {sig.why.get(f, 'it must be whole')}: "
            f"{what} (gather it first)",
            gather_call(names[s.k], t, s.d),
            code="need-replication" if kind == NEED_REPLICATION else "permutation",
        )
    if kind == REDUCE:
        how = sig.why.get(f, "a reduction")
        extra = "; for a mean, sum with out_partial_axes and divide by the full size" if how == "mean" else ""
        raise FactorError(
            f"{op}: dim {s.d} of {typed} is sharded on {axes} and reduced by {how}; each rank would "
            f"hold the {how} of its shard, which no type describes (P is a pending sum only){extra}",
            gather_call(names[s.k], t, s.d),
            code="reduce-sharded",
        )
    if kind == _UNKNOWN_RESHAPE:
        raise FactorError(
            f"{op}: {typed} is sharded and its sizes are not all known, so the dims the sharding "
            f"moves to cannot be found; use flatten/unflatten (whose grouping is explicit) or "
            f"gather first",
            redistribute_call(names[s.k], t, t.replace(spec=[None] * t.ndim))
            if sum(1 for e in t.spec.dims if e) > 1
            else gather_call(names[s.k], t, s.d),
            code="unknown-sizes",
        )


def _split_axes(
    op: str,
    c: _Ctx,
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
    larger than what is left would need a sub-axis.
    """
    out: Dict[str, List[str]] = {f: [] for f in factors}
    if len(factors) == 1:
        out[factors[0]] = list(axes)
        return {f: tuple(v) for f, v in out.items()}
    t = c.operands[k]
    assert isinstance(t, GlobalType)
    fi = 0
    cap = sig.sizes.get(factors[0])
    for a in axes:
        m = mesh.get(a)
        if m is None or cap is None:
            out[factors[fi]].append(a)
            continue
        if cap % m == 0:
            out[factors[fi]].append(a)
            cap //= m
            if cap == 1 and fi + 1 < len(factors):
                fi += 1
                cap = sig.sizes.get(factors[fi])
            continue
        if m % cap == 0 and fi + 1 < len(factors):
            nxt = sig.sizes.get(factors[fi + 1])
            pre = m // cap
            raise FactorError(
                f"{op}: axis {a!r} (size {m}) shards dim {d} of {c.names[k]}: {t}, but the part of "
                f"that dim it would shard has size {cap}; keeping the data in place needs the "
                f"sub-axes {a!r}:(1){cap} and {a!r}:({cap}){pre}"
                + (f" (the next part has size {nxt})" if nxt is not None else "")
                + ", which a PartitionSpec cannot express",
                gather_call(c.names[k], t, d),
                code="sub-axis",
            )
        raise FactorError(
            f"{op}: axis {a!r} (size {m}) shards dim {d} of {c.names[k]}: {t}, but the part of that "
            f"dim it would shard has size {cap}, which {m} does not divide",
            gather_call(c.names[k], t, d),
            code="not-divisible",
        )
    return {f: tuple(v) for f, v in out.items()}


def _fully_sharded(
    factors: Sequence[str], factor_axes: Mapping[str, Tuple[str, ...]], sig: Signature, mesh: Mapping[str, int]
) -> bool:
    """Every factor is split across as many ranks as it has elements (local size 1)."""
    for f in factors:
        size = sig.sizes.get(f)
        axes = factor_axes.get(f, ())
        if size is None or any(a not in mesh for a in axes):
            return False
        if math.prod(mesh[a] for a in axes) != size:
            return False
    return True


def _mismatch(
    op: str,
    sig: Signature,
    f: str,
    ref: _Seen,
    s: _Seen,
    operands: Sequence[Operand],
    names: Sequence[str],
) -> None:
    t_ref, t = operands[ref.k], operands[s.k]
    assert isinstance(t_ref, GlobalType) and isinstance(t, GlobalType)
    kind = sig.kinds[f]
    dims = f"dim {ref.d} of {names[ref.k]} and dim {s.d} of {names[s.k]}"
    both = f"factor {f!r} ({dims})" if len(f) == 1 else f"the factor of {dims}"
    fix = _match_fix(names[s.k], t, s.d, ref.axes)
    if not s.axes:
        if kind == SUM:
            extra = (
                "a contraction over a dim sharded on one side only would need an all-reduce; "
                "shard both sides alike and pass out_partial_axes"
            )
        else:
            extra = "operands sharing a dim must be sharded on it alike (JAX would slice the replicated one)"
        raise FactorError(
            f"{op}: {both} is sharded on {_axes_text(ref.axes)} in {names[ref.k]}: {t_ref} but "
            f"not in {names[s.k]}: {t}; {extra}",
            fix,
            code="sharded-replicated",
        )
    raise FactorError(
        f"{op}: {both} is sharded on {_axes_text(ref.axes)} in {names[ref.k]}: {t_ref} but on "
        f"{_axes_text(s.axes)} in {names[s.k]}: {t}; operands sharing a dim must carry identical axes",
        fix,
        code="conflicting-axes",
    )


def _match_fix(name: str, t: GlobalType, d: int, axes: Tuple[str, ...]) -> str:
    """The call that shards dim d of t on exactly `axes`."""
    have = t.spec[d]
    if have == axes[: len(have)] and len(axes) == len(have) + 1:
        a = axes[-1]
        if t.axis_type(a) in (R, I):
            return f"spmd.convert({name}, {a!r}, src={t.axis_type(a)}, dst=S({d}))"
    try:
        return redistribute_call(name, t, _with_dim(t, d, axes))
    except SpecError:
        return gather_call(name, t, d)


def _out_partial_error(
    op: str,
    params: Mapping[str, object],
    names: Sequence[str],
    operands: Sequence[Operand],
    summed: Sequence[str],
    summed_seen: Sequence[_Seen],
    out_partial: FrozenSet[str],
    sig: Signature,
) -> None:
    tensor_names = [n for n, o in zip(names, operands)]
    fix = _op_call(op, tensor_names, params, sorted(summed))
    types = "; ".join(f"{names[k]}: {operands[k]}" for k in range(len(operands)) if isinstance(operands[k], GlobalType))
    if summed and not out_partial:
        listed = list(dict.fromkeys(f"dim {s.d} of {names[s.k]}" for s in summed_seen))
        dims = " and ".join(listed) + (" is" if len(listed) == 1 else " are")
        raise FactorError(
            f"{op}: {dims} summed over and sharded on {_axes_text(summed)} ({types}); each rank "
            f"computes a partial sum, so the result is Partial on {_axes_text(summed)}: declare it "
            f"with out_partial_axes",
            fix,
            code="needs-out-partial",
        )
    has_sum = any(k == SUM for k in sig.kinds.values())
    needed = f"the sharded summed dims are on {_axes_text(summed)}" if summed else (
        "no summed dim is sharded" if has_sum else f"{op} sums over no dim"
    )
    raise FactorError(
        f"{op}: out_partial_axes={_tuple_text(sorted(out_partial))} but {needed} ({types}); "
        f"a result is Partial exactly on the axes of its sharded summed dims",
        fix,
        code="out-partial-mismatch",
    )


def _twice(
    op: str,
    axis: str,
    first: Tuple[int, str],
    second: Tuple[int, str],
    seen: Mapping[str, List[_Seen]],
    operands: Sequence[Operand],
    names: Sequence[str],
) -> None:
    def place(p: Tuple[int, str]) -> str:
        return "be partial" if p[0] < 0 else f"shard result dim {p[0]}"

    types = "; ".join(f"{names[k]}: {operands[k]}" for k in range(len(operands)) if isinstance(operands[k], GlobalType))
    # fix: gather the axis where the second use comes from (or the first, for partial)
    use = second if second[0] >= 0 else first
    s = next((x for x in seen.get(use[1], []) if axis in x.axes), None)
    fix = ""
    if s is not None:
        t = operands[s.k]
        assert isinstance(t, GlobalType)
        fix = gather_call(names[s.k], t, s.d, [axis])
    raise FactorError(
        f"{op}: mesh axis {axis!r} would {place(first)} and also {place(second)} ({types}); "
        f"an axis can appear only once in a type",
        fix,
        code="axis-twice",
    )


def _local_rules(
    op: str,
    row: Row,
    operands: Sequence[Operand],
    names: Sequence[str],
    out_partial: FrozenSet[str],
    result_axes: Set[str],
) -> Tuple[Set[str], Dict[str, LocalType]]:
    """Per-axis local types of the result (P axes, and I/V axes), or raise."""
    cls = row.cls or op_class_or_none(op, "tensor") or op_class_or_none(op, "functional") or NONLINEAR
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
            raise _rule_error(op, axis, on, err) from None
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
                raise _rule_error(op, axis, on, err) from None
        if axis in out_partial or result is P:
            partial.add(axis)
        elif result is V:
            if axis in result_axes:
                continue
            if axis in in_spec and cls != RANDOM:
                raise FactorError(
                    f"{op}: the sharding on {axis!r} does not reach the result", code="bad-param"
                )
            local[axis] = V
        elif result is I:
            local[axis] = I
    return partial, local


def _rule_error(op: str, axis: str, on: Sequence[Tuple[str, object]], err: OpRuleError) -> FactorError:
    found = ", ".join(f"{n} is {t}" for n, t in on if t is not SCALAR)
    culprit_type = I if err.code == "invariant-mixed" else P
    culprit = next((n for n, t in on if t is culprit_type), on[0][0] if on else "x")
    return FactorError(
        f"{op} on axis {axis!r} ({found}): {err}",
        fix_call(culprit_type, R, axis, culprit) or "",
        code=err.code,
    )


def _result_dtype(op: str, params: Mapping[str, object], tensors: Sequence[object]) -> Optional[str]:
    if op in ("to", "type") and params.get("dtype") is not None:
        return dtype_name(params["dtype"])
    if op in _DTYPE_RESULT:
        return _DTYPE_RESULT[op]
    if params.get("dtype") is not None:
        return dtype_name(params["dtype"])
    known = {t.dtype for t in tensors if isinstance(t, GlobalType)}
    if len(known) == 1 and None not in known:
        return known.pop()
    return None
