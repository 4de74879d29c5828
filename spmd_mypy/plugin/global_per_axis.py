"""Values in per-axis form (`Spmd(dp=S(0), tp=S(1))`) in global code.

A per-axis type names the dim each axis shards but not the tensor's rank,
so it has no spec and global_mode's spec-level rules cannot type it.  Where
the local rules would take it instead, S(i) and S(j) stand for each other
(locally both are V), which in global code accepts a value sharded on the
wrong dim.  Three places make the dims count:

  * comparisons (arguments, returns, annotated assignments, redistribute's
    src) with a per-axis side: each global axis sharding a dim on both sides
    must shard the same one, and a V value (no dim) meets no type that
    shards a dim on its axis (`shard_mismatch`);
  * typed collectives on a global axis of a per-axis operand: the local
    rules are exact only when src's S(i) is the dim the axis shards and no
    other global axis shards a dim the collective cuts or fills (then the
    order of the axes on that dim, which only a spec writes, would matter):
    `collective_problem` says why not;
  * annotations: two global axes on one dim in per-axis form do not say
    which is the major one (`shared_dim`).

Pure: it reads vocabulary values only.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..vocab.localtype import AxisType, Shard, V
from ..vocab.spec import Spmd

IsGlobal = Callable[[str], bool]


def _dims(spmd: Spmd, is_global: IsGlobal, rank: Optional[int]) -> Dict[str, int]:
    """Each global axis's sharded dim (negative dims resolved when the rank is known)."""
    out: Dict[str, int] = {}
    for axis, t in spmd.axes.items():
        if isinstance(t, Shard) and is_global(axis):
            out[axis] = t.dim + rank if t.dim < 0 and rank is not None else t.dim
    return out


def shard_mismatch(got: Spmd, want: Spmd, is_global: IsGlobal) -> Optional[Tuple[str, str]]:
    """(got, want) written out when one side is in per-axis form and a global
    axis shards a dim on both sides but not the same one, or is V in `got`
    (no dim) where `want` shards one, or two global axes share a dim whose
    order the per-axis side cannot state; else None."""
    if got.spec is not None and want.spec is not None:
        return None  # global_mode.spec_mismatch compares specs
    rank = got.ndim if got.ndim is not None else want.ndim
    gd, wd = _dims(got, is_global, rank), _dims(want, is_global, rank)
    differ = any(gd[a] != wd[a] for a in gd.keys() & wd.keys())
    differ = differ or unplaced(got, want, is_global) is not None
    spec = got.spec if got.spec is not None else want.spec
    if not differ and spec is not None:
        differ = any(sum(1 for a in d if is_global(a)) > 1 for d in spec.dims if set(d) & (gd.keys() & wd.keys()))
    return (repr(got), repr(want)) if differ else None


def unplaced(got: Spmd, want: Spmd, is_global: IsGlobal) -> Optional[Tuple[str, int]]:
    """(axis, dim) where `got`, in per-axis form, is V on a global axis (no
    dim written) and `want` shards that dim on it; else None."""
    if got.spec is not None:
        return None
    dims = _dims(want, is_global, got.ndim if got.ndim is not None else want.ndim)
    return next(((a, d) for a, d in dims.items() if got.axis_type(a) is V), None)


def unplaced_message(what: str, want: Spmd, axis: str, dim: int, verb: str) -> str:
    """The error for an `unplaced` value: no collective fixes it, the type
    that made it must say its dim."""
    return (
        f"{what} is V on axis {axis!r} where {want!r} is {verb}, sharding dim {dim} on it: in "
        f"global code a per-axis V does not say which dim it shards, so the layout cannot be checked. "
        f"Hint: write the dim where its type is declared, S({dim}) in place of V on {axis!r}, if that is the dim it shards"
    )


def shared_dim(spmd: Spmd, is_global: IsGlobal) -> Optional[Tuple[int, List[str]]]:
    """(dim, axes) when two or more global axes of a per-axis type shard one dim."""
    if spmd.spec is not None:
        return None
    by_dim: Dict[int, List[str]] = {}
    for axis, dim in _dims(spmd, is_global, None).items():
        by_dim.setdefault(dim, []).append(axis)
    return next(((d, axes) for d, axes in sorted(by_dim.items()) if len(axes) > 1), None)


SPEC_HINT = "annotate {name} in spec form, Spmd(spec=PartitionSpec(...)), or move this code into a spmd.local_map region"


def collective_problem(
    actual: Spmd, axes: Sequence[str], src: AxisType, dst: AxisType, is_global: IsGlobal
) -> Optional[Tuple[str, str]]:
    """Why the local rules cannot type exactly a collective on the global
    `axes` of a per-axis operand, and the fix (a template naming `{name}`);
    None: they can."""
    dims = _dims(actual, is_global, None)
    for axis in axes:
        held = actual.axis_type(axis)
        if isinstance(src, Shard):
            if held is V:
                return f"it is V on {axis!r}, which names no dim", SPEC_HINT
            if isinstance(held, Shard) and held.dim != src.dim:
                return f"it shards dim {held.dim} on {axis!r}, not dim {src.dim}", f"src=S({held.dim})"
        for role, t in (("cuts", src), ("fills", dst)):
            if not isinstance(t, Shard):
                continue
            others = sorted(a for a, d in dims.items() if d == t.dim and a not in axes)
            if others:
                return (
                    f"the collective {role} dim {t.dim}, which {', '.join(repr(a) for a in others)} "
                    f"also shard{'s' if len(others) == 1 else ''}: only a spec says which axis is the minor one",
                    SPEC_HINT,
                )
    return None
