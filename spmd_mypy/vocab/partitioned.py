"""Partitioned shards (seed 004): layouts, their conversions, and the static rules.

A tensor dim of total length L is cut into `num_partitions` partitions (in a
mixture of experts: the tokens routed to each expert).  On an axis of n
ranks, every rank starts with its own slice of every partition: rank s holds
`splits[s][p]` elements of partition p.  The full (replicated) tensor lists
the partitions in order, and inside a partition the ranks' slices in rank
order:  P00 P10 .. P01 P11 .. (Psp: rank s's slice of partition p).

  unaligned  PS(i)   rank s holds Ps0 Ps1 .. Ps(np-1)   its `splits`: M[s], one per partition
  aligned    PSA(i)  rank k holds every slice of partitions k*m .. k*m+m-1 (m = np / n),
                     partition-major:  P0p P1p .. for each of its p;
                     its `splits`: [M[s][p] for p in its partitions for s in ranks]
  replicate  R / I   every rank holds the full tensor; scattering it needs all of M

The sizes are known at runtime only; the checker knows the dim and whether
the layout is aligned (PS(i) vs PSA(i) in localtype), and nothing else, so
two partitioned values meet in an elementwise op only with the same type,
and the dim is never reshaped, split or concatenated (the pieces of another
layout would be mixed).  `op_rule` is that rule; `CONVERSIONS` the typed
conversions (runtime/partitioned.py implements them with autograd).

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import Dict, Final, List, Optional, Sequence, Tuple

from .localtype import LocalType, P, PartitionedShard, Shard, V

__all__ = [
    "PartitionError",
    "CONVERSIONS",
    "owned",
    "piece_index",
    "aligned_splits",
    "check_matrix",
    "layout_type",
    "unaligned_layout",
    "aligned_layout",
    "full_layout",
    "op_rule",
    "DIM_OPS",
    "RESHAPES",
    "REDUCTIONS",
    "REINDEX",
    "dim_position",
    "boundary_fix",
    "boundary_consequence",
]

Matrix = Sequence[Sequence[int]]


class PartitionError(ValueError):
    """A partitioned value used in a way its opaque layout does not allow."""


# -- layouts (element counts; every function is the same on every rank) ---------


def owned(num_partitions: int, n: int, k: int) -> range:
    """The partitions rank k holds whole in the aligned layout."""
    if n <= 0 or num_partitions % n:
        raise PartitionError(
            f"{num_partitions} partitions cannot be aligned over {n} ranks: "
            f"each rank must own the same number of whole partitions"
        )
    m = num_partitions // n
    return range(k * m, (k + 1) * m)


def piece_index(sizes: Sequence[int], order: Sequence[int]) -> List[int]:
    """Element indices that put pieces (of `sizes`, stored in order) in `order`."""
    starts, acc = [], 0
    for s in sizes:
        starts.append(acc)
        acc += s
    return [starts[q] + e for q in order for e in range(sizes[q])]


def unaligned_layout(M: Matrix, s: int) -> List[Tuple[int, int]]:
    """Rank s's pieces in the unaligned layout, in storage order: (rank, partition)."""
    return [(s, p) for p in range(len(M[s]))]


def aligned_layout(M: Matrix, k: int) -> List[Tuple[int, int]]:
    """Rank k's pieces in the aligned layout, in storage order: (rank, partition)."""
    return [(s, p) for p in owned(len(M[0]), len(M), k) for s in range(len(M))]


def full_layout(M: Matrix) -> List[Tuple[int, int]]:
    """The replicated tensor's pieces in order: partition-major, rank-minor."""
    return [(s, p) for p in range(len(M[0])) for s in range(len(M))]


def aligned_splits(M: Matrix, k: int) -> List[int]:
    """Rank k's aligned `splits` (its pieces' sizes, in storage order)."""
    return [M[s][p] for s, p in aligned_layout(M, k)]


def check_matrix(M: Matrix, n: int) -> List[List[int]]:
    """M as lists, checked: n rows of one length, sizes >= 0."""
    rows = [list(r) for r in M]
    if len(rows) != n or len({len(r) for r in rows}) != 1 or not rows[0]:
        raise PartitionError(f"splits of a replicated value are {n} rows (one per rank) of one length; got {M!r}")
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for r in rows for v in r):
        raise PartitionError(f"split sizes are ints >= 0; got {M!r}")
    return rows


# -- typed conversions -------------------------------------------------------------

# (runtime function name) -> (src layout, dst layout).  "PS": unaligned,
# "PSA": aligned, "R": replicated (dst R or I: the dst= argument).
CONVERSIONS: Final[Dict[str, Tuple[str, str]]] = {
    "unaligned_to_aligned": ("PS", "PSA"),
    "aligned_to_unaligned": ("PSA", "PS"),
    "unaligned_to_replicate": ("PS", "R"),
    "aligned_to_replicate": ("PSA", "R"),
    "replicate_to_unaligned": ("R", "PS"),
    "replicate_to_aligned": ("R", "PSA"),
    "map_partitions": ("PSA", "PSA"),  # fn on each whole partition: the layout is kept
}


def layout_type(layout: str, dim: int) -> PartitionedShard:
    return PartitionedShard(dim, layout == "PSA")


# -- the static rule for ops ------------------------------------------------------

# Ops that cut or join a dim -> (the dim when none is written, the position of
# the dim among the call's arguments that are not tensors).
DIM_OPS: Final[Dict[str, Tuple[int, int]]] = {
    "cat": (0, 0), "concat": (0, 0), "concatenate": (0, 0), "stack": (0, 0),
    "split": (0, 1), "chunk": (0, 1), "tensor_split": (0, 1), "split_with_sizes": (0, 1),
    "unsafe_split": (0, 1), "unsafe_chunk": (0, 1), "unbind": (0, 0), "narrow": (0, 0),
    "roll": (0, 1), "flip": (0, 0), "cumsum": (0, 0), "sort": (-1, 0), "topk": (-1, 1),
}
# Ops that may merge or split any dim: never on a partitioned value.
RESHAPES: Final = frozenset(
    "reshape view view_as flatten unflatten ravel as_strided unfold movedim moveaxis "
    "permute transpose swapaxes swapdims t T mT".split()
)
# Reductions (dim at position 0, all dims when none is written): over the
# partitioned dim the result is a per-rank value (V), over another it keeps the layout.
REDUCTIONS: Final = frozenset(
    "sum mean amax amin max min prod logsumexp norm argmax argmin std var softmax log_softmax softmin".split()
)
# Ops that pick rows by an index tensor: the layout is lost (V).
REINDEX: Final = frozenset(
    "__getitem__ index_select gather scatter scatter_add index_add take take_along_dim "
    "masked_select nonzero".split()
)


def dim_position(name: str) -> Optional[int]:
    """Where an op's dim is among its non-tensor arguments (None: no dim)."""
    if name in DIM_OPS:
        return DIM_OPS[name][1]
    return 0 if name in REDUCTIONS else None


def _fix(t: PartitionedShard, value: str, axis: str) -> str:
    return (
        f"convert it first (spmd.partitioned.{'aligned' if t.aligned else 'unaligned'}_to_replicate"
        f"({value}, {axis!r}, splits)), or keep the op off dim {t.dim}"
    )


def op_rule(
    name: str, operands: Sequence[object], dims: Sequence[Optional[int]], ndim: Optional[int] = None,
    value: str = "x", axis: str = "ep",
) -> Optional[PartitionedShard]:
    """The result type on one axis of op `name` whose operands include a
    partitioned shard there (None: the general rules decide; the result is then
    no longer partitioned), or PartitionError.  `operands`: each operand's type
    on the axis (None unknown, anything else a scalar); `dims`: the op's int
    arguments that name dims; `value`, `axis`: the
    names the hint writes."""
    ps = [o for o in operands if isinstance(o, PartitionedShard)]
    if not ps:
        return None
    t = ps[0]
    if any(o != t for o in ps):
        found = ", ".join(str(o) for o in dict.fromkeys(ps))
        raise PartitionError(
            f"operands have different partitioned layouts ({found}): their partitions' sizes "
            f"and places are only known at runtime, so their elements need not line up; "
            f"convert one to the other's layout first"
        )
    if name in RESHAPES:
        raise PartitionError(
            f"{name} may merge or split dim {t.dim} of a {t} value, whose partitions have "
            f"sizes known only at runtime; {_fix(t, value, axis)}"
        )
    def touches(ds: Sequence[Optional[int]]) -> bool:  # None: not a literal, so maybe
        return any(d is None or d == t.dim or (ndim is not None and d + ndim == t.dim) for d in ds)

    if name in REINDEX:
        return None
    if name in REDUCTIONS:
        return None if not dims or touches(dims) else t
    if name in DIM_OPS:
        if touches(list(dims) or [DIM_OPS[name][0]]):
            raise PartitionError(
                f"{name} on dim {t.dim} of a {t} value cuts or joins its partitions, whose "
                f"sizes are known only at runtime; {_fix(t, value, axis)}"
            )
        return t
    others = [o for o in operands if isinstance(o, (LocalType, Shard)) and not isinstance(o, PartitionedShard)]
    if any(o is P for o in others):
        return None  # the general rules report the Partial operand
    if any(o is V or isinstance(o, Shard) for o in others):
        if not t.aligned or any(isinstance(o, Shard) for o in others):
            kinds = ", ".join(str(o) for o in others if o is V or isinstance(o, Shard))
            raise PartitionError(
                f"a {t} value meets an operand that is {kinds}: the ranks' rows follow a partitioned "
                f"layout the other operand does not have"
                + ("" if t.aligned else "; only an aligned PSA value meets per-rank (V) values, "
                   "e.g. the weights of the experts a rank owns")
            )
    return t  # elementwise with R/I/scalars, or an aligned value with per-owner weights



# -- where a partitioned value meets a declared type (boundaries) -----------------


def _layout_name(t: object) -> Optional[str]:
    """The CONVERSIONS name of a layout: "PS", "PSA", "R" (R or I), else None."""
    if isinstance(t, PartitionedShard):
        return "PSA" if t.aligned else "PS"
    return "R" if str(t) in ("R", "I") else None


def boundary_fix(got: object, want: object, axis: str, name: str) -> Optional[str]:
    """The conversion that turns a `got` value into a `want` one where either is
    partitioned (the splits written as `splits`, a replicated value's as the
    matrix `M`), indexed to its tensor; None when no conversion gives `want`."""
    src, dst = _layout_name(got), _layout_name(want)
    if src is None or dst is None or src == dst:
        return None
    fn = next(f for f, (s, d) in CONVERSIONS.items() if (s, d) == (src, dst))
    dim = want.dim if isinstance(want, PartitionedShard) else getattr(got, "dim", 0)
    sizes = "M" if src == "R" else "splits"
    extra = (f", src={got}" if src == "R" else f", dst={want}") if "R" in (src, dst) else ""
    # [0]: a conversion returns (tensor, its new splits); the hint stands for the tensor.
    return f"spmd.partitioned.{fn}({name}, {axis!r}, {sizes}{extra}" + (f", dim={dim})[0]" if dim else ")[0]")


def boundary_consequence(got: object, want: object, axis: str) -> Optional[str]:
    """What goes wrong when a `got` value stands for `want` and either is
    partitioned; None when neither is."""
    if isinstance(got, PartitionedShard) and isinstance(want, PartitionedShard):
        return (
            f"the ranks' rows follow the {got} layout, not {want}: the partitions' pieces "
            f"would be read from the wrong places and the value (and its gradient) scrambled"
        )
    if isinstance(got, PartitionedShard) and _layout_name(want) is None:
        return (
            f"dim {got.dim} is cut into partitions whose sizes are known only at runtime, and code "
            f"typed {want} may reshape, cut or join that dim or meet per-rank values with rows "
            f"that are not its own partitions; run per-partition code with "
            f"spmd.partitioned.map_partitions on the aligned layout, or convert first"
        )
    if isinstance(got, PartitionedShard):
        return f"each rank holds only its slices of the partitions over {axis!r}, not the full value"
    if isinstance(want, PartitionedShard):
        return f"a {got} value is not cut into {want}'s partitions; scatter it by its split sizes"
    return None
