"""Exact uneven collectives: one all_to_all_single that moves the sum of the splits.

gloo's all_gather and reduce_scatter need equal pieces on every rank, so an
uneven shard used to be padded to the largest split (up to max * n elements
per rank instead of the sum).  Here every uneven form is one
all_to_all_single with per-rank split sizes, which moves each element once:

  gather      rank c sends its shard whole to every rank; each receives
              the shards in rank order, which is the concatenation.
  scatter     rank c sends piece k of its full tensor to rank k; each sums
              the n pieces it receives (in rank order).
  re-split    rank c sends to rank k the rows where c's old range and k's new
              range of the dim overlap; the rows received, in rank order, are
              k's new range.
  transpose   S(i) -> S(j): piece k of dim j, flattened, to rank k; the
              pieces received are concatenated on dim i.

All work on dim 0 (the callers move the sharded dim there).  The functional
all_to_all_single is the form torch.compile traces and the one that takes
per-rank split sizes on simulated ranks; everything that depends on this
rank's coordinate runs through `per_rank`.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import torch
import torch.distributed._functional_collectives as funcol
from torch import Tensor

from ._local import per_rank
from .mesh import Comm

__all__ = ["gather_rows", "scatter_rows", "resplit_rows", "transpose_pieces"]


def _exchange(buf: Tensor, outs: Sequence[Any], ins: Sequence[Any], comm: Comm) -> Tensor:
    return funcol.wait_tensor(funcol.all_to_all_single(buf, list(outs), list(ins), comm.group))


def _offsets(sizes: Sequence[int]) -> List[int]:
    out, acc = [], 0
    for s in sizes:
        out.append(acc)
        acc += s
    return out


def _overlap(a0: int, a: int, b0: int, b: int) -> int:
    return max(0, min(a0 + a, b0 + b) - max(a0, b0))


@per_rank
def _repeat(x: Tensor, n: int) -> Tuple[Any, ...]:
    """My shard n times (one copy per receiver) and its row count per receiver."""
    return (x.repeat((n,) + (1,) * (x.ndim - 1)), *([x.shape[0]] * n))


def gather_rows(x: Tensor, sizes: Sequence[int], comm: Comm) -> Tensor:
    """Concatenate every rank's x along dim 0; rank r has sizes[r] rows."""
    n = comm.size
    packed = _repeat(x.contiguous(), n)
    return _exchange(packed[0], sizes, packed[1:], comm)


@per_rank
def _scatter_counts(sizes: Sequence[int], c: int, n: int) -> Tuple[int, ...]:
    return (sizes[c],) * n


@per_rank
def _sum_pieces(recv: Tensor, n: int) -> Tensor:
    return recv.view((n, recv.shape[0] // n) + tuple(recv.shape[1:])).sum(0)


def scatter_rows(x: Tensor, sizes: Sequence[int], comm: Comm) -> Tensor:
    """Sum x over the ranks and keep rows [off(c), off(c) + sizes[c]) on rank c."""
    n = comm.size
    outs = _scatter_counts(list(sizes), comm.coord(), n)
    recv = _exchange(x.contiguous(), outs, list(sizes), comm)
    return _sum_pieces(recv, n)


@per_rank
def _resplit_counts(a: Sequence[int], b: Sequence[int], c: int) -> Tuple[int, ...]:
    oa, ob = _offsets(a), _offsets(b)
    ins = [_overlap(oa[c], a[c], ob[k], b[k]) for k in range(len(b))]
    outs = [_overlap(oa[r], a[r], ob[c], b[c]) for r in range(len(a))]
    return (*ins, *outs)


def resplit_rows(x: Tensor, a: Sequence[int], b: Sequence[int], comm: Comm) -> Tensor:
    """Rows split by `a` over the ranks (x: my a[c] rows) -> split by `b` (sum(a) == sum(b))."""
    n = comm.size
    counts = _resplit_counts(list(a), list(b), comm.coord())
    return _exchange(x.contiguous(), counts[n:], counts[:n], comm)


@per_rank
def _pack_pieces(x: Tensor, j: int, b: Sequence[int]) -> Tuple[Any, ...]:
    pieces = [p.reshape(-1) for p in x.split(list(b), j)]
    buf = torch.cat(pieces) if pieces else x.new_empty((0,))
    return (buf, *[p.numel() for p in pieces])


@per_rank
def _piece_counts(x: Tensor, i: int, j: int, a: Sequence[int], b: Sequence[int],
                  c: int) -> Tuple[int, ...]:
    rest = 1
    for d, s in enumerate(x.shape):
        if d not in (i, j):
            rest *= s
    return tuple(a[r] * b[c] * rest for r in range(len(a)))


@per_rank
def _unpack_pieces(recv: Tensor, x: Tensor, i: int, j: int, a: Sequence[int],
                   b: Sequence[int], c: int) -> Tensor:
    out: List[Tensor] = []
    off = 0
    for r in range(len(a)):
        s = list(x.shape)
        s[i], s[j] = a[r], b[c]
        k = 1
        for v in s:
            k *= v
        out.append(recv[off:off + k].view(s))
        off += k
    return torch.cat(out, i)


def transpose_pieces(
    x: Tensor, i: int, j: int, a: Optional[Sequence[int]], b: Sequence[int], comm: Comm
) -> Tensor:
    """S(i) -> S(j), i != j: a = every rank's size along i (None: all equal), b along j."""
    n = comm.size
    c = comm.coord()
    x = x.contiguous()
    src = list(a) if a is not None else [x.shape[i]] * n
    packed = _pack_pieces(x, j, list(b))
    outs = _piece_counts(x, i, j, src, list(b), c)
    recv = _exchange(packed[0], outs, packed[1:], comm)
    return _unpack_pieces(recv, x, i, j, src, list(b), c)
