"""Partitioned shards at runtime (seed 004): the six conversions, with autograd.

Layouts and the meaning of `splits` are in vocab/partitioned.py.  Every
function takes this rank's local tensor and its splits and returns the
converted tensor with its new splits; the sizes travel first (one small
all_to_all or all_gather of ints), then the payload, which moves each element
once through the typed collectives of api.py, so the backward passes are
theirs:

  unaligned_to_aligned   sizes all_to_all; payload all_to_all V->V (backward: the
                         reverse all_to_all); a local reorder (backward: its inverse)
  aligned_to_unaligned   the same, the other way
  *_to_replicate         sizes all_gather; payload all_gather S(dim) -> dst (R: backward
                         is the exact reduce-scatter of the Partial gradient, seed 001's
                         duality; I: a slice); the unaligned form reorders
                         rank-major pieces into partition order
  replicate_to_*         no communication: convert src -> S(dim) of this rank's pieces
                         (backward: the gradient placed in zeros, a Partial)

The splits of a replicated value are the full matrix M (M[s][p]: rank s's
slice of partition p); the *_to_replicate functions return it.  Runs on real
process groups (gloo, nccl), not on simulated ranks.
"""

from __future__ import annotations

from typing import Any, Callable, List, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from ..vocab.localtype import AxisType, R, Shard, V
from ..vocab.partitioned import aligned_splits, check_matrix, owned, piece_index
from .api import all_gather, all_to_all, convert
from .mesh import AxisArg, Comm, resolve_axis

__all__ = [
    "unaligned_to_aligned",
    "aligned_to_unaligned",
    "unaligned_to_replicate",
    "aligned_to_replicate",
    "replicate_to_unaligned",
    "replicate_to_aligned",
    "map_partitions",
]

Splits = List[int]
Matrix = List[List[int]]


def _ints(values: Sequence[int], what: str) -> List[int]:
    out = list(values)
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in out):
        raise ValueError(f"{what} are ints >= 0, got {values!r}")
    return out


def _sizes_all_to_all(send: List[int], comm: Comm) -> List[int]:
    """Each rank sends len(send)/n ints to each rank; returns what it received, by source."""
    t = torch.tensor(send, dtype=torch.int64)
    out = torch.empty_like(t)
    dist.all_to_all_single(out, t, group=comm.group)
    return [int(v) for v in out.tolist()]


def _sizes_all_gather(mine: List[int], comm: Comm) -> Matrix:
    t = torch.tensor(mine, dtype=torch.int64)
    out = t.new_empty((comm.size * t.numel(),))
    dist.all_gather_into_tensor(out, t, group=comm.group)
    flat = [int(v) for v in out.tolist()]
    k = len(mine)
    return [flat[s * k : (s + 1) * k] for s in range(comm.size)]


def _reorder(x: Tensor, dim: int, sizes: Sequence[int], order: Sequence[int]) -> Tensor:
    """Pieces of `x` along dim (of `sizes`) put in `order` (index_select: autograd scatters back)."""
    if list(order) == list(range(len(sizes))):
        return x
    index = torch.tensor(piece_index(sizes, order), dtype=torch.long, device=x.device)
    return x.index_select(dim, index)


def _check_length(x: Tensor, dim: int, splits: Sequence[int], what: str) -> None:
    if x.shape[dim] != sum(splits):
        raise ValueError(f"{what} {list(splits)} sum to {sum(splits)}, but dim {dim} of the local tensor has {x.shape[dim]}")


def unaligned_to_aligned(x: Tensor, axis: AxisArg, splits: Sequence[int], *, dim: int = 0) -> Tuple[Tensor, Splits]:
    """PS(dim) -> PSA(dim).  `splits`: this rank's slice of each partition.
    Returns the aligned local tensor and its splits (partition-major, rank-minor)."""
    comm = resolve_axis(axis)
    u, n = _ints(splits, "splits"), comm.size
    _check_length(x, dim, u, "splits")
    m = len(owned(len(u), n, 0))
    got = _sizes_all_to_all(u, comm)  # got[s*m + j]: rank s's slice of my j-th partition
    send = [sum(u[k * m : (k + 1) * m]) for k in range(n)]
    recv = [sum(got[s * m : (s + 1) * m]) for s in range(n)]
    y = all_to_all(x.movedim(dim, 0), axis, src=V, dst=V, split_sizes=(send, recv))
    # received rank-major (s, j); the aligned layout is partition-major (j, s)
    order = [s * m + j for j in range(m) for s in range(n)]
    out = _reorder(y, 0, got, order).movedim(0, dim)
    return out, [got[q] for q in order]


def aligned_to_unaligned(x: Tensor, axis: AxisArg, splits: Sequence[int], *, dim: int = 0) -> Tuple[Tensor, Splits]:
    """PSA(dim) -> PS(dim).  `splits`: this rank's pieces, partition-major, rank-minor.
    Returns the unaligned local tensor and its splits (one per partition)."""
    comm = resolve_axis(axis)
    a, n = _ints(splits, "splits"), comm.size
    _check_length(x, dim, a, "splits")
    if len(a) % n:
        raise ValueError(f"aligned splits hold one size per (partition, rank): a multiple of {n}; got {a}")
    m = len(a) // n
    order = [j * n + s for s in range(n) for j in range(m)]  # (j, s) -> rank-major (s, j)
    x0 = _reorder(x.movedim(dim, 0), 0, a, order)
    by_rank = [a[q] for q in order]
    u = _sizes_all_to_all(by_rank, comm)  # from owner k: my slices of k's partitions
    send = [sum(by_rank[s * m : (s + 1) * m]) for s in range(n)]
    recv = [sum(u[k * m : (k + 1) * m]) for k in range(n)]
    y = all_to_all(x0, axis, src=V, dst=V, split_sizes=(send, recv))
    return y.movedim(0, dim), u


def unaligned_to_replicate(
    x: Tensor, axis: AxisArg, splits: Sequence[int], *, dim: int = 0, dst: AxisType = R
) -> Tuple[Tensor, Matrix]:
    """PS(dim) -> dst (R or I): the full tensor, partitions in order, and the matrix M."""
    comm = resolve_axis(axis)
    u = _ints(splits, "splits")
    _check_length(x, dim, u, "splits")
    M = _sizes_all_gather(u, comm)
    n, k = comm.size, len(u)
    full = all_gather(x.movedim(dim, 0), axis, src=Shard(0), dst=dst, split_sizes=[sum(r) for r in M])
    flat = [v for r in M for v in r]
    order = [s * k + p for p in range(k) for s in range(n)]
    return _reorder(full, 0, flat, order).movedim(0, dim), M


def aligned_to_replicate(
    x: Tensor, axis: AxisArg, splits: Sequence[int], *, dim: int = 0, dst: AxisType = R
) -> Tuple[Tensor, Matrix]:
    """PSA(dim) -> dst (R or I): the full tensor (the ranks' blocks in order) and M."""
    comm = resolve_axis(axis)
    a, n = _ints(splits, "splits"), comm.size
    _check_length(x, dim, a, "splits")
    every = _sizes_all_gather(a, comm)  # every[k]: rank k's aligned splits
    m = len(a) // n
    M = [[every[p // m][(p % m) * n + s] for p in range(m * n)] for s in range(n)]
    full = all_gather(x.movedim(dim, 0), axis, src=Shard(0), dst=dst, split_sizes=[sum(r) for r in every])
    return full.movedim(0, dim), M


def replicate_to_unaligned(
    x: Tensor, axis: AxisArg, splits: Sequence[Sequence[int]], *, dim: int = 0, src: AxisType = R
) -> Tuple[Tensor, Splits]:
    """src (R or I) -> PS(dim): this rank's slice of every partition (no communication)."""
    comm = resolve_axis(axis)
    M, n = check_matrix(splits, comm.size), comm.size
    k = len(M[0])
    _check_length(x, dim, [v for r in M for v in r], "splits")
    full_sizes = [M[s][p] for p in range(k) for s in range(n)]  # partition-major storage
    order = [p * n + s for s in range(n) for p in range(k)]  # to rank-major
    x0 = _reorder(x.movedim(dim, 0), 0, full_sizes, order)
    c = comm.coord()
    mine = convert(x0, axis, src=src, dst=Shard(0), split_sizes=[sum(r) for r in M])
    return mine.movedim(0, dim), list(M[c])


def replicate_to_aligned(
    x: Tensor, axis: AxisArg, splits: Sequence[Sequence[int]], *, dim: int = 0, src: AxisType = R
) -> Tuple[Tensor, Splits]:
    """src (R or I) -> PSA(dim): the whole partitions this rank owns (no communication)."""
    comm = resolve_axis(axis)
    M, n = check_matrix(splits, comm.size), comm.size
    _check_length(x, dim, [v for r in M for v in r], "splits")
    blocks = [sum(aligned_splits(M, k)) for k in range(n)]
    mine = convert(x.movedim(dim, 0), axis, src=src, dst=Shard(0), split_sizes=blocks)
    return mine.movedim(0, dim), aligned_splits(M, comm.coord())


def map_partitions(
    fn: Callable[[Any, int], Tensor], x: Tensor, axis: AxisArg, splits: Sequence[int], *, dim: int = 0
) -> Tensor:
    """An aligned PSA(dim) value with `fn(rows, j)` applied to each whole partition it
    holds (j: its index among this rank's partitions; `splits` has one piece per
    rank of the axis per partition).  fn must keep the rows (dim length) of its
    block: the layout, and the splits, are unchanged.  No communication."""
    ranks = resolve_axis(axis).size
    a = _ints(splits, "splits")
    _check_length(x, dim, a, "splits")
    if ranks <= 0 or len(a) % ranks:
        raise ValueError(f"aligned splits hold {ranks} sizes per partition; got {a}")
    blocks = [sum(a[j * ranks : (j + 1) * ranks]) for j in range(len(a) // ranks)]
    outs = [fn(rows, j) for j, rows in enumerate(x.split(blocks, dim))]
    for j, (o, b) in enumerate(zip(outs, blocks)):
        if o.shape[dim] != b:
            raise ValueError(f"map_partitions: fn changed partition {j}'s {b} rows along dim {dim} to {o.shape[dim]}")
    return torch.cat(outs, dim) if outs else x
