"""spmd_types' `rules.einsum` sharding rule, on spmd-mypy's per-axis types.

In an `spmd_typecheck` hook, `rules.einsum("mk,nk->mn", x, w)` states the
type of a kernel's result from its operands' types (the kernel itself is
trusted).  Per mesh axis, following spmd_types 0.3.1's rule:

  - operands sharded on the axis (S(i)) name the label of dim i; all such
    labels must be one label (an axis shards at most one), and every operand
    holding that label must be sharded on it (V: its shard of it);
  - the label reaches the output: the result is S(its position there);
    it is contracted: the result is P (the kernel sums over the shards: the
    rule is the declaration of that sum, so no reinterpret is asked for;
    spmd_types does this in its global mode, typecheck(local=False); its
    local mode ignores shard dims and gives V: DESIGN.md, spmd_types);
  - no operand sharded: the per-axis rule of a multilinear op (R with V is
    V, I does not mix with V); a P operand passes only through an operand
    declared in `linear_in`, all others R.

Pure Python.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set

from .contractions import einsum_letters
from .localtype import AxisType, P, R, Shard, V
from .opclasses import MULTILINEAR, OpRuleError, combine
from .spec import Spmd

__all__ = ["rules_einsum"]


def _letter(subscripts: str, dim: int) -> Optional[str]:
    before, dot, after = subscripts.partition(".")
    if not dot:
        return subscripts[dim] if -len(subscripts) <= dim < len(subscripts) else None
    if 0 <= dim < len(before):
        return before[dim]
    if dim < 0 and -dim <= len(after):
        return after[dim]
    return None


def _position(output: str, letter: str) -> int:
    """The output dim of `letter` (negative when it follows an ellipsis)."""
    before, dot, after = output.partition(".")
    if letter in before:
        return before.index(letter)
    return after.index(letter) - len(after)


def _axis(equation: str, parts: Sequence[str], output: str, types: List[AxisType],
          nograd: List[bool], linear_in: Set[int], axis: str) -> AxisType:
    letters = {k: _letter(parts[k], t.dim) for k, t in enumerate(types) if isinstance(t, Shard)}
    named = {lt for lt in letters.values() if lt is not None}
    if len(named) > 1:
        raise OpRuleError("einsum-two-labels", f"axis {axis!r} shards two labels ({', '.join(sorted(named))}); "
                          f"an axis shards at most one dim of the computation")
    if named:
        (label,) = named
        for k, sub in enumerate(parts):
            t = types[k]
            if label in sub and not (isinstance(t, Shard) and letters.get(k) == label) and t is not V:
                raise OpRuleError("einsum-unsharded-label", f"operand {k} holds label {label!r} unsharded ({t}) "
                                  f"while another operand shards it on {axis!r}; the shapes would not agree")
            if label not in sub and t is not R:
                raise OpRuleError("einsum-not-replicated", f"operand {k} is {t} on {axis!r} but lacks the sharded "
                                  f"label {label!r}; it must be R there")
        return Shard(_position(output, label)) if label in output else P
    partial = [k for k, t in enumerate(types) if t is P]
    if partial and any(k not in linear_in for k in partial):
        raise OpRuleError("einsum-partial", f"operand(s) {partial} are P on {axis!r}; a P operand passes only "
                          f"through an operand the op is linear in (declare linear_in=({partial[0]},))")
    found = combine(MULTILINEAR, types, nograd)
    return found if found is not None else V


def rules_einsum(equation: str, operands: Sequence[Optional[Spmd]], linear_in: Sequence[int] = ()) -> Optional[Spmd]:
    """The result type of `rules.einsum(equation, *operands)`; None when an
    operand is unknown; OpRuleError (its message names the axis) when the
    operands' types break the rule."""
    parsed = einsum_letters(equation)
    if parsed is None or len(parsed[0]) != len(operands):
        raise OpRuleError("einsum-equation", f"cannot read the equation {equation!r} for {len(operands)} operand(s)")
    if any(o is None for o in operands):
        return None
    known: List[Spmd] = [o for o in operands if o is not None]
    parts, output = parsed
    axes: Dict[str, AxisType] = {}
    for axis in sorted({a for o in known for a in o.axes}):
        types = [o.axis_type(axis) for o in known]
        if any(t is None for t in types):
            continue  # unknown on that axis
        axes[axis] = _axis(equation, parts, output, types, [o.nograd for o in known], set(linear_in), axis)  # type: ignore[arg-type]
    return Spmd.of(axes, None, all(o.nograd for o in known))
