"""The errors of shard propagation: their messages and the call that fixes each.

`factors.propagate` finds what is wrong; the functions here say it: which op,
which dims, which axes, the operands' global types, and `fix`, the call to
write (a gather, a redistribute, or the op with out_partial_axes).

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .collectives import fix_call
from .factor_signature import Operand, Signature
from .factor_table import NEED_REPLICATION, PERMUTATION, REDUCE, SUM, UNKNOWN_RESHAPE, FactorError
from .globaltype import GlobalType
from .localtype import I, P, R
from .opclasses import SCALAR, OpRuleError
from .spec import SpecError

__all__ = [
    "Seen",
    "axes_text",
    "tuple_text",
    "redistribute_call",
    "gather_call",
    "check_kind",
    "raise_mismatch",
    "raise_out_partial",
    "raise_axis_twice",
    "rule_error",
]


class Seen(NamedTuple):
    """An operand dim that hands axes to a factor."""

    k: int  # operand
    d: int  # dim
    axes: Tuple[str, ...]


def axes_text(axes: Sequence[str]) -> str:
    if len(axes) == 1:
        return repr(axes[0])
    return "(" + ", ".join(repr(a) for a in axes) + ")"


def tuple_text(axes: Sequence[str]) -> str:
    return "(" + ", ".join(repr(a) for a in axes) + ("," if len(axes) == 1 else "") + ")"


def redistribute_call(name: str, src: GlobalType, dst: GlobalType) -> str:
    """The spec-level redistribute from src to dst, as a call (the layouts only: no sizes)."""
    src, dst = src.replace(sizes=None), dst.replace(sizes=None)
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
        args.append(f"out_partial_axes={tuple_text(out_partial)}")
    return f"spmd.{op}({', '.join(args)})"


def check_kind(
    op: str, sig: Signature, f: str, s: Seen, operands: Sequence[Operand], names: Sequence[str]
) -> None:
    """Raise if factor f, sharded as operand dim s says, must be whole."""
    kind = sig.kinds[f]
    t = operands[s.k]
    assert isinstance(t, GlobalType)
    typed = f"{names[s.k]}: {t}"
    axes = axes_text(s.axes)
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
    if kind == UNKNOWN_RESHAPE:
        raise FactorError(
            f"{op}: {typed} is sharded and its sizes are not all known, so the dims the sharding "
            f"moves to cannot be found; use flatten/unflatten (whose grouping is explicit) or "
            f"gather first",
            redistribute_call(names[s.k], t, t.replace(spec=[None] * t.ndim))
            if sum(1 for e in t.spec.dims if e) > 1
            else gather_call(names[s.k], t, s.d),
            code="unknown-sizes",
        )


def raise_mismatch(
    op: str,
    sig: Signature,
    f: str,
    ref: Seen,
    s: Seen,
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
            f"{op}: {both} is sharded on {axes_text(ref.axes)} in {names[ref.k]}: {t_ref} but "
            f"not in {names[s.k]}: {t}; {extra}",
            fix,
            code="sharded-replicated",
        )
    raise FactorError(
        f"{op}: {both} is sharded on {axes_text(ref.axes)} in {names[ref.k]}: {t_ref} but on "
        f"{axes_text(s.axes)} in {names[s.k]}: {t}; operands sharing a dim must carry identical axes",
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


def raise_out_partial(
    op: str,
    params: Mapping[str, object],
    names: Sequence[str],
    operands: Sequence[Operand],
    summed: Sequence[str],
    summed_seen: Sequence[Seen],
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
            f"{op}: {dims} summed over and sharded on {axes_text(summed)} ({types}); each rank "
            f"computes a partial sum, so the result is Partial on {axes_text(summed)}: declare it "
            f"with out_partial_axes",
            fix,
            code="needs-out-partial",
        )
    has_sum = any(k == SUM for k in sig.kinds.values())
    needed = f"the sharded summed dims are on {axes_text(summed)}" if summed else (
        "no summed dim is sharded" if has_sum else f"{op} sums over no dim"
    )
    raise FactorError(
        f"{op}: out_partial_axes={tuple_text(sorted(out_partial))} but {needed} ({types}); "
        f"a result is Partial exactly on the axes of its sharded summed dims",
        fix,
        code="out-partial-mismatch",
    )


def raise_axis_twice(
    op: str,
    axis: str,
    first: Tuple[int, str],
    second: Tuple[int, str],
    seen: Mapping[str, List[Seen]],
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


def rule_error(op: str, axis: str, on: Sequence[Tuple[str, object]], err: OpRuleError) -> FactorError:
    found = ", ".join(f"{n} is {t}" for n, t in on if t is not SCALAR)
    culprit_type = I if err.code == "invariant-mixed" else P
    culprit = next((n for n, t in on if t is culprit_type), on[0][0] if on else "x")
    return FactorError(
        f"{op} on axis {axis!r} ({found}): {err}",
        fix_call(culprit_type, R, axis, culprit) or "",
        code=err.code,
    )
