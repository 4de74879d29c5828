"""Forward kernels of the primitives, on this rank's local tensor.

One function per (op, src kind, dst kind) row of the vocabulary's table; each
follows the design's spec function.  A backward pass runs the kernel of the
backward primitive (see autograd.py), so nothing here knows about gradients.

`sizes` are the explicit split sizes of an uneven S(i) dim (one per rank of
the axis), or None for an even split.  all_to_all takes a pair
(src sizes, dst sizes).  Uneven gathers, scatters and all_to_alls are one
all_to_all_single that moves exactly the sum of the splits (uneven.py).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple, Union, cast

import torch
import torch.distributed as dist
from torch import Tensor

from ..vocab.collectives import Step
from ..vocab.localtype import Shard, kind
from ._local import per_rank
from .mesh import Comm
from .uneven import gather_rows, resplit_rows, scatter_rows, transpose_pieces

__all__ = ["run", "KERNELS", "Sizes", "split_pair", "reduce_values"]

Split = Optional[Sequence[int]]
Sizes = Union[Split, Tuple[Split, Split]]  # a pair for all_to_all


def _flat(sizes: Sizes) -> Split:
    return cast(Split, sizes)


def split_pair(sizes: Sizes) -> Tuple[Split, Split]:
    """(send splits, receive splits): all_to_all's pair of split sizes, or (None, None)."""
    return cast(Tuple[Split, Split], sizes) if sizes is not None else (None, None)


def _dim(t: object) -> int:
    assert isinstance(t, Shard)
    return t.dim


def _even(length: int, n: int) -> list[int]:
    return [length // n] * n


def _offsets(sizes: Sequence[int]) -> list[int]:
    out, acc = [], 0
    for s in sizes:
        out.append(acc)
        acc += s
    return out


# -- rank-dependent local pieces (run once per rank on simulated ranks) --------


@per_rank
def _take(x: Tensor, dim: int, sizes: Sequence[int], c: int) -> Tensor:
    return x.narrow(dim, _offsets(sizes)[c], sizes[c]).clone()


@per_rank
def _place(x: Tensor, dim: int, sizes: Sequence[int], c: int) -> Tensor:
    shape = list(x.shape)
    shape[dim] = sum(sizes)
    out = x.new_zeros(shape)
    out.narrow(dim, _offsets(sizes)[c], sizes[c]).copy_(x)
    return out


@per_rank
def _keep_on_first(x: Tensor, c: int) -> Tensor:
    return x.clone() if c == 0 else torch.zeros_like(x)


# -- collectives -----------------------------------------------------------------


def all_reduce(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    y = x.clone(memory_format=torch.contiguous_format)
    dist.all_reduce(y, group=comm.group)
    return y


_REDUCE_OPS = {"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


def reduce_values(x: Tensor, comm: Comm, op: str) -> Tensor:
    """all_reduce with a reduce op other than sum (no autograd: see api.all_reduce)."""
    y = x.detach().clone(memory_format=torch.contiguous_format)
    dist.all_reduce(y, op=_REDUCE_OPS[op], group=comm.group)
    return y


def _gather_dim0(x: Tensor, comm: Comm) -> Tensor:
    """Concatenate every rank's x along dim 0 (equal shapes)."""
    x = x.contiguous()
    out = x.new_empty((comm.size * x.shape[0],) + tuple(x.shape[1:]))
    dist.all_gather_single(out, x, group=comm.group)
    return out


def all_gather_stack(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    return _gather_dim0(x.unsqueeze(0), comm)


def all_gather_shard(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    i = _dim(step.src)
    sizes = _flat(sizes)
    if sizes is None and i == 0:
        return _gather_dim0(x, comm)  # no movedim: return a plain tensor, not a view
    xt = x.movedim(i, 0)
    if sizes is None:
        return _gather_dim0(xt, comm).movedim(0, i)
    return gather_rows(xt, sizes, comm).movedim(0, i)


def _reduce_scatter_dim0(x: Tensor, comm: Comm) -> Tensor:
    x = x.contiguous()
    out = x.new_empty((x.shape[0] // comm.size,) + tuple(x.shape[1:]))
    dist.reduce_scatter_single(out, x, group=comm.group)
    return out


def reduce_scatter_unbind(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    return _reduce_scatter_dim0(x, comm).squeeze(0)


def reduce_scatter_shard(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    i = _dim(step.dst)
    sizes = _flat(sizes)
    if sizes is None and i == 0:
        return _reduce_scatter_dim0(x, comm)
    xt = x.movedim(i, 0)
    if sizes is None:
        return _reduce_scatter_dim0(xt, comm).movedim(0, i)
    return scatter_rows(xt, sizes, comm).movedim(0, i)


def all_to_all_stack(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    x = x.contiguous()
    if sizes is None:
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x, group=comm.group)
        return out
    in_splits, out_splits = split_pair(sizes)
    assert in_splits is not None and out_splits is not None
    out = x.new_empty((sum(out_splits),) + tuple(x.shape[1:]))
    dist.all_to_all_single(out, x, list(out_splits), list(in_splits), group=comm.group)
    return out


def all_to_all_shard(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    """cat(xs, i).split(dst sizes, j)[me]; uneven sizes move exactly the sum (uneven.py)."""
    i, j = _dim(step.src), _dim(step.dst)
    if sizes is None and i != j:
        return _all_to_all_even(x, comm, i, j)
    src_sizes, dst_sizes = split_pair(sizes)
    n = comm.size
    if i == j:  # re-splitting one dim
        a = list(src_sizes) if src_sizes is not None else [x.shape[i]] * n
        b = list(dst_sizes) if dst_sizes is not None else _even(sum(a), n)
        return resplit_rows(x.movedim(i, 0), a, b, comm).movedim(0, i)
    b = list(dst_sizes) if dst_sizes is not None else _even(x.shape[j], n)
    return transpose_pieces(x, i, j, src_sizes, b, comm)


def _all_to_all_even(x: Tensor, comm: Comm, i: int, j: int) -> Tensor:
    """Even split: piece k of dim j goes to rank k; pieces received are concatenated on dim i."""
    n = comm.size
    if j == 0:  # the pieces are consecutive rows: a view, no copy
        x = x.contiguous()
        send = x.view((n, x.shape[0] // n) + tuple(x.shape[1:]))
    else:
        send = torch.stack(x.chunk(n, j), 0)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=comm.group)
    if i == 0:  # concatenating the received pieces on dim 0 is a view
        return recv.flatten(0, 1)
    return torch.cat(recv.unbind(0), i)


# -- coercions (no communication) ------------------------------------------------


def identity(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    return x.view_as(x)


def convert_pick_stack(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    return _take(x, 0, [1] * comm.size, comm.coord()).squeeze(0)


def convert_pick_shard(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    i = _dim(step.dst)
    flat = _flat(sizes)
    s = list(flat) if flat is not None else _even(x.shape[i], comm.size)
    return _take(x, i, s, comm.coord())


def convert_keep_first(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    return _keep_on_first(x, comm.coord())


def convert_place_stack(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    return _place(x.unsqueeze(0), 0, [1] * comm.size, comm.coord())


def convert_place_shard(x: Tensor, comm: Comm, step: Step, sizes: Sizes) -> Tensor:
    i = _dim(step.src)
    flat = _flat(sizes)
    s = list(flat) if flat is not None else [x.shape[i]] * comm.size
    return _place(x, i, s, comm.coord())


Kernel = Callable[[Tensor, Comm, Step, Sizes], Tensor]

KERNELS: dict[tuple[str, str, str], Kernel] = {
    ("all_reduce", "P", "R"): all_reduce,
    ("all_reduce", "P", "I"): all_reduce,
    ("all_gather", "V", "R"): all_gather_stack,
    ("all_gather", "V", "I"): all_gather_stack,
    ("all_gather", "S", "R"): all_gather_shard,
    ("all_gather", "S", "I"): all_gather_shard,
    ("reduce_scatter", "P", "V"): reduce_scatter_unbind,
    ("reduce_scatter", "P", "S"): reduce_scatter_shard,
    ("all_to_all", "V", "V"): all_to_all_stack,
    ("all_to_all", "S", "S"): all_to_all_shard,
    ("reinterpret", "R", "I"): identity,
    ("reinterpret", "R", "V"): identity,
    ("reinterpret", "R", "P"): identity,
    ("reinterpret", "I", "R"): identity,
    ("reinterpret", "V", "P"): identity,
    ("convert", "R", "V"): convert_pick_stack,
    ("convert", "I", "V"): convert_pick_stack,
    ("convert", "R", "S"): convert_pick_shard,
    ("convert", "I", "S"): convert_pick_shard,
    ("convert", "R", "P"): convert_keep_first,
    ("convert", "I", "P"): convert_keep_first,
    ("convert", "V", "P"): convert_place_stack,
    ("convert", "S", "P"): convert_place_shard,
}


def run(step: Step, x: Tensor, comm: Comm, sizes: Sizes) -> Tensor:
    return KERNELS[(step.op, kind(step.src), kind(step.dst))](x, comm, step, sizes)


def needs_comm(step: Step) -> bool:
    """Whether the kernel of `step` uses its communicator (a collective, the
    axis size or this rank's coordinate); the identity kernel does not."""
    return KERNELS[(step.op, kind(step.src), kind(step.dst))] is not identity
