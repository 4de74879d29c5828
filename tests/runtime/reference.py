"""Reference semantics of every SPMD primitive, written from the design seed.

Everything here works on one communicator group at a time: a Python list of
per-rank torch tensors, indexed by the rank's coordinate in the group
(c = 0 .. n-1).  For each primitive there is

  forward(op, src, dst, xs)   per-rank inputs      -> per-rank outputs
  backward(op, src, dst, gs)  per-rank output grads -> per-rank input grads

Both give the *physical* per-rank tensors (what each rank holds), so a
Partial value is a list of per-rank addends, not its sum.  The backward of
each row is transcribed from the seed's backward diagram ("grad_input <=
grad_output") for that row, not derived from any table of the package.

Types are spelled as strings: "R", "I", "V", "P" or "S(k)" (k may be
negative; it is resolved against the tensor's rank here).

This module imports torch only: never spmd_mypy.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor

Tensors = List[Tensor]
Sizes = Optional[Sequence[int]]

__all__ = [
    "forward",
    "backward",
    "PRIMITIVES",
    "COMPOSITES",
    "parse",
]


# -- small helpers -------------------------------------------------------------


def parse(t: str) -> Tuple[str, Optional[int]]:
    """"S(-1)" -> ("S", -1); "R" -> ("R", None)."""
    t = t.strip()
    if t in ("R", "I", "V", "P"):
        return t, None
    if t.startswith("S(") and t.endswith(")"):
        return "S", int(t[2:-1])
    raise ValueError(f"not a type: {t!r}")


def _resolve(dim: int, ndim: int) -> int:
    if not -ndim <= dim < ndim:
        raise IndexError(f"dim {dim} out of range for rank {ndim}")
    return dim % ndim if dim < 0 else dim


def _total(ts: Sequence[Tensor]) -> Tensor:
    """The sum of the per-rank addends (the denotation of a Partial value)."""
    acc = torch.zeros_like(ts[0])
    for t in ts:
        acc = acc + t
    return acc


def _pieces(full: Tensor, dim: int, n: int, sizes: Sizes) -> Tensors:
    """full split along dim into n pieces: the given sizes, else equal chunks."""
    if sizes is None:
        if full.shape[dim] % n:
            raise ValueError(f"dim {dim} of size {full.shape[dim]} is not divisible by {n}")
        sizes = [full.shape[dim] // n] * n
    sizes = list(sizes)
    if len(sizes) != n or sum(sizes) != full.shape[dim]:
        raise ValueError(f"sizes {sizes} do not split dim {dim} of size {full.shape[dim]}")
    out, start = [], 0
    for s in sizes:
        out.append(full.narrow(dim, start, s).clone())
        start += s
    return out


def _zeros_but(piece: Tensor, dim: int, c: int, sizes: Sequence[int]) -> Tensor:
    """A tensor of the full size along dim, zero except piece at slot c."""
    shape = list(piece.shape)
    shape[dim] = sum(sizes)
    out = torch.zeros(shape, dtype=piece.dtype)
    start = sum(sizes[:c])
    out.narrow(dim, start, sizes[c]).copy_(piece)
    return out


def _same(t: Tensor, n: int) -> Tensors:
    return [t.clone() for _ in range(n)]


def _copy(ts: Sequence[Tensor]) -> Tensors:
    return [t.clone() for t in ts]


def _first_only(ts: Sequence[Tensor]) -> Tensors:
    """Rank 0 keeps its tensor, every other rank holds zeros (the "+A +0 +0" diagram)."""
    return [t.clone() if c == 0 else torch.zeros_like(t) for c, t in enumerate(ts)]


def _shard_sizes(xs: Sequence[Tensor], dim: int) -> List[int]:
    return [int(x.shape[dim]) for x in xs]


# -- forward spec functions, per rank ------------------------------------------
#
# Each takes (xs, i, j, sizes): the per-rank inputs, the resolved shard dims of
# src and dst (None when not S), and the explicit split sizes (or None).


def _fwd_all_reduce(xs: Tensors, i, j, sizes) -> Tensors:
    # +Ax +Ay +Az => Ax + Ay + Az on every rank
    return _same(_total(xs), len(xs))


def _fwd_all_gather_stack(xs: Tensors, i, j, sizes) -> Tensors:
    # A B C => [A, B, C]: torch.stack(xs)
    return _same(torch.stack(list(xs)), len(xs))


def _fwd_all_gather_cat(xs: Tensors, i, j, sizes) -> Tensors:
    # torch.concat(xs, i); sizes only claims each rank's size along i
    if sizes is not None:
        assert list(sizes) == _shard_sizes(xs, i), (sizes, _shard_sizes(xs, i))
    return _same(torch.cat(list(xs), i), len(xs))


def _fwd_reduce_scatter_unbind(xs: Tensors, i, j, sizes) -> Tensors:
    # +[Ax, Bx, Cx] ... => rank c holds the summed c-th entry: x.unbind()
    total = _total(xs)
    n = len(xs)
    assert total.shape[0] == n
    return [total[c].clone() for c in range(n)]


def _fwd_reduce_scatter_split(xs: Tensors, i, j, sizes) -> Tensors:
    # x.chunk(n, j) of the summed value; sizes = each rank's result size
    return _pieces(_total(xs), j, len(xs), sizes)


def _a2a_rows(xs: Tensors, send: Optional[Sequence[Sequence[int]]]) -> Tensors:
    """out[c] = cat over r of (rank r's c-th block of dim 0)."""
    n = len(xs)
    blocks = []
    for r, x in enumerate(xs):
        if send is None:
            if x.shape[0] % n:
                raise ValueError("dim 0 is not a multiple of the group size")
            k = x.shape[0] // n
            row_sizes = [k] * n
        else:
            row_sizes = list(send[r])
        blocks.append(_pieces(x, 0, n, row_sizes))
    return [torch.cat([blocks[r][c] for r in range(n)], 0) for c in range(n)]


def _fwd_all_to_all_rows(xs: Tensors, i, j, sizes) -> Tensors:
    # [A0, A1, A2]      [A0, B0, C0]
    # [B0, B1, B2]  =>  [A1, B1, C1]
    # [C0, C1, C2]      [A2, B2, C2]
    # sizes: None, or (send, recv) with send[r] = rows rank r sends to each rank
    # and recv[c] = rows rank c receives from each rank (checked here).
    if sizes is None:
        return _a2a_rows(xs, None)
    send, recv = sizes
    out = _a2a_rows(xs, send)
    for c, o in enumerate(out):
        assert o.shape[0] == sum(recv[c]), (o.shape, recv[c])
        assert list(recv[c]) == [send[r][c] for r in range(len(xs))]
    return out


def _fwd_all_to_all_shards(xs: Tensors, i, j, sizes) -> Tensors:
    # x = torch.concat(xs, i); x.chunk(n, j); sizes = (src sizes, dst sizes)
    src_sizes, dst_sizes = sizes if sizes is not None else (None, None)
    if src_sizes is not None:
        assert list(src_sizes) == _shard_sizes(xs, i)
    return _pieces(torch.cat(list(xs), i), j, len(xs), dst_sizes)


def _fwd_identity(xs: Tensors, i, j, sizes) -> Tensors:
    # reinterpret: the local tensor is unchanged on every rank
    return _copy(xs)


def _fwd_pick_row(xs: Tensors, i, j, sizes) -> Tensors:
    # [A, B, C] => A / B / C: x.unbind(), rank c keeps entry c of its own copy
    return [x[c].clone() for c, x in enumerate(xs)]


def _fwd_pick_shard(xs: Tensors, i, j, sizes) -> Tensors:
    # x.chunk(n, j): rank c keeps chunk c of its own copy
    n = len(xs)
    return [_pieces(x, j, n, sizes)[c] for c, x in enumerate(xs)]


def _fwd_first_only(xs: Tensors, i, j, sizes) -> Tensors:
    # [A] => +[A] +[0] +[0]
    return _first_only(xs)


def _fwd_place_row(xs: Tensors, i, j, sizes) -> Tensors:
    # A B C => +[A, 0, 0] +[0, B, 0] +[0, 0, C]
    n = len(xs)
    return [_zeros_but(x.unsqueeze(0), 0, c, [1] * n) for c, x in enumerate(xs)]


def _fwd_place_shard(xs: Tensors, i, j, sizes) -> Tensors:
    # [A0, A1] ... => +[A0, A1, 0, 0, 0, 0] ...: zero-padded concat slot
    s = list(sizes) if sizes is not None else _shard_sizes(xs, i)
    assert s == _shard_sizes(xs, i)
    return [_zeros_but(x, i, c, s) for c, x in enumerate(xs)]


# -- backward diagrams, per rank -----------------------------------------------
#
# Each takes (gs, i, j, sizes) with gs the per-rank gradients of the output and
# returns the per-rank gradients of the input.


def _bwd_all_gather_stack_R(gs: Tensors, i, j, sizes) -> Tensors:
    # Ax + Ay + Az      +[Ax, Bx, Cx]
    # Bx + By + Bz  <=  +[Ay, By, Cy]
    # Cx + Cy + Cz      +[Az, Bz, Cz]
    n = len(gs)
    return [_total([g[c] for g in gs]) for c in range(n)]


def _bwd_all_gather_stack_I(gs: Tensors, i, j, sizes) -> Tensors:
    # A B C  <=  [A, B, C]  (convert(I,V): rank c keeps entry c)
    return [g[c].clone() for c, g in enumerate(gs)]


def _bwd_all_gather_cat_R(gs: Tensors, i, j, sizes) -> Tensors:
    # [A0x + A0y + A0z, ...] <= +[A0x, A1x, B0x, ...]: sum, then rank c's shard
    n = len(gs)
    s = list(sizes) if sizes is not None else None
    out = []
    for c in range(n):
        out.append(_total([_pieces(g, i, n, s)[c] for g in gs]))
    return out


def _bwd_all_gather_cat_I(gs: Tensors, i, j, sizes) -> Tensors:
    # [A0, A1] [B0, B1] [C0, C1]  <=  [A0, A1, B0, B1, C0, C1]
    n = len(gs)
    return [_pieces(g, i, n, sizes)[c] for c, g in enumerate(gs)]


def _bwd_all_reduce_R(gs: Tensors, i, j, sizes) -> Tensors:
    # Ax + Ay + Az  <=  +Ax +Ay +Az
    return _same(_total(gs), len(gs))


def _bwd_all_reduce_I(gs: Tensors, i, j, sizes) -> Tensors:
    # A  <=  A
    return _copy(gs)


def _bwd_reduce_scatter_unbind(gs: Tensors, i, j, sizes) -> Tensors:
    # [A, B, C]  <=  A B C
    return _same(torch.stack(list(gs)), len(gs))


def _bwd_reduce_scatter_split(gs: Tensors, i, j, sizes) -> Tensors:
    # [A0, A1, B0, B1, C0, C1]  <=  [A0, A1] [B0, B1] [C0, C1]
    if sizes is not None:
        assert list(sizes) == _shard_sizes(gs, j)
    return _same(torch.cat(list(gs), j), len(gs))


def _bwd_all_to_all_rows(gs: Tensors, i, j, sizes) -> Tensors:
    # The same transpose, with the send and receive sizes swapped: rank c's
    # output block from rank r goes back to rank r as its c-th block.
    if sizes is None:
        return _a2a_rows(gs, None)
    send, recv = sizes
    return _fwd_all_to_all_rows(gs, None, None, (recv, send))


def _bwd_all_to_all_shards(gs: Tensors, i, j, sizes) -> Tensors:
    # all_to_all(S(j), S(i)): concat the grads along j, re-split along i
    src_sizes, dst_sizes = sizes if sizes is not None else (None, None)
    if dst_sizes is not None:
        assert list(dst_sizes) == _shard_sizes(gs, j)
    return _pieces(torch.cat(list(gs), j), i, len(gs), src_sizes)


def _bwd_R_I(gs: Tensors, i, j, sizes) -> Tensors:
    # +A +0 +0  <=  A
    return _first_only(gs)


def _bwd_unchanged(gs: Tensors, i, j, sizes) -> Tensors:
    # R->V: +A +B +C <= A B C;  R->P: +A +A +A <= A;  V->P: A A A <= A;
    # convert(I,P): [A] <= [A]: the local gradient passes through unchanged.
    return _copy(gs)


def _bwd_sum(gs: Tensors, i, j, sizes) -> Tensors:
    # reinterpret(I,R): Ax + Ay + Az  <=  +Ax +Ay +Az
    return _same(_total(gs), len(gs))


def _bwd_place_row(gs: Tensors, i, j, sizes) -> Tensors:
    # convert(R,V): +[A, 0, 0] +[0, B, 0] +[0, 0, C]  <=  A B C
    n = len(gs)
    return [_zeros_but(g.unsqueeze(0), 0, c, [1] * n) for c, g in enumerate(gs)]


def _bwd_place_shard(gs: Tensors, i, j, sizes) -> Tensors:
    # convert(R,S(j)): +[A0, A1, 0, 0, 0, 0] ...  <=  [A0, A1] [B0, B1] [C0, C1]
    s = list(sizes) if sizes is not None else _shard_sizes(gs, j)
    assert s == _shard_sizes(gs, j)
    return [_zeros_but(g, j, c, s) for c, g in enumerate(gs)]


def _bwd_gather_rows(gs: Tensors, i, j, sizes) -> Tensors:
    # convert(I,V): [A, B, C]  <=  A B C
    return _same(torch.stack(list(gs)), len(gs))


def _bwd_gather_shards(gs: Tensors, i, j, sizes) -> Tensors:
    # convert(I,S(j)): [A0, A1, B0, B1, C0, C1]  <=  [A0, A1] [B0, B1] [C0, C1]
    return _same(torch.cat(list(gs), j), len(gs))


def _bwd_first_only(gs: Tensors, i, j, sizes) -> Tensors:
    # convert(R,P): +[A] +[0] +[0]  <=  [A]
    return _first_only(gs)


def _bwd_pick_row(gs: Tensors, i, j, sizes) -> Tensors:
    # convert(V,P): A B C  <=  [A, B, C]  (rank c keeps entry c)
    return [g[c].clone() for c, g in enumerate(gs)]


def _bwd_pick_shard(gs: Tensors, i, j, sizes) -> Tensors:
    # convert(S(i),P): [A0, A1] [B0, B1] [C0, C1]  <=  [A0, A1, B0, B1, C0, C1]
    n = len(gs)
    return [_pieces(g, i, n, sizes)[c] for c, g in enumerate(gs)]


# (op, src kind, dst kind) -> (forward, backward).  The 23 primitives.
PRIMITIVES: dict = {
    ("all_gather", "V", "R"): (_fwd_all_gather_stack, _bwd_all_gather_stack_R),
    ("all_gather", "V", "I"): (_fwd_all_gather_stack, _bwd_all_gather_stack_I),
    ("all_gather", "S", "R"): (_fwd_all_gather_cat, _bwd_all_gather_cat_R),
    ("all_gather", "S", "I"): (_fwd_all_gather_cat, _bwd_all_gather_cat_I),
    ("all_reduce", "P", "R"): (_fwd_all_reduce, _bwd_all_reduce_R),
    ("all_reduce", "P", "I"): (_fwd_all_reduce, _bwd_all_reduce_I),
    ("reduce_scatter", "P", "V"): (_fwd_reduce_scatter_unbind, _bwd_reduce_scatter_unbind),
    ("reduce_scatter", "P", "S"): (_fwd_reduce_scatter_split, _bwd_reduce_scatter_split),
    ("all_to_all", "V", "V"): (_fwd_all_to_all_rows, _bwd_all_to_all_rows),
    ("all_to_all", "S", "S"): (_fwd_all_to_all_shards, _bwd_all_to_all_shards),
    ("reinterpret", "R", "I"): (_fwd_identity, _bwd_R_I),
    ("reinterpret", "R", "V"): (_fwd_identity, _bwd_unchanged),
    ("reinterpret", "R", "P"): (_fwd_identity, _bwd_unchanged),
    ("reinterpret", "I", "R"): (_fwd_identity, _bwd_sum),
    ("reinterpret", "V", "P"): (_fwd_identity, _bwd_unchanged),
    ("convert", "R", "V"): (_fwd_pick_row, _bwd_place_row),
    ("convert", "R", "S"): (_fwd_pick_shard, _bwd_place_shard),
    ("convert", "I", "V"): (_fwd_pick_row, _bwd_gather_rows),
    ("convert", "I", "S"): (_fwd_pick_shard, _bwd_gather_shards),
    ("convert", "R", "P"): (_fwd_first_only, _bwd_first_only),
    ("convert", "I", "P"): (_fwd_first_only, _bwd_unchanged),
    ("convert", "V", "P"): (_fwd_place_row, _bwd_pick_row),
    ("convert", "S", "P"): (_fwd_place_shard, _bwd_pick_shard),
}

# Coercions the seed defines through others, with their end-to-end semantics:
#   reinterpret(I,V) = I->R->V: no-op forward; backward V->P (unchanged) then
#     P->I all-reduce: the sum.
#   reinterpret(I,P) = I->R->P: no-op forward; backward R->P (unchanged) then
#     the sum.
#   convert(R,I), convert(I,R): "the same meaning as reinterpret(R,I) and
#     reinterpret(I,R)".
COMPOSITES: dict = {
    ("reinterpret", "I", "V"): (_fwd_identity, _bwd_sum),
    ("reinterpret", "I", "P"): (_fwd_identity, _bwd_sum),
    ("convert", "R", "I"): (_fwd_identity, _bwd_R_I),
    ("convert", "I", "R"): (_fwd_identity, _bwd_sum),
}


def _lookup(op: str, src: str, dst: str, ndim_in: int):
    sk, si = parse(src)
    dk, dj = parse(dst)
    key = (op, sk, dk)
    fns = PRIMITIVES.get(key) or COMPOSITES.get(key)
    if fns is None:
        raise KeyError(f"no reference for {op}({src}->{dst})")
    i = None if si is None else _resolve(si, ndim_in)
    # Every primitive with a shard keeps the tensor's rank, so both dims
    # resolve against the forward input.
    j = None if dj is None else _resolve(dj, ndim_in)
    return fns, i, j


def forward(op: str, src: str, dst: str, xs: Sequence[Tensor], sizes: object = None) -> Tensors:
    """Per-rank outputs of op(src -> dst) on the per-rank inputs xs of one group."""
    (fwd, _), i, j = _lookup(op, src, dst, xs[0].ndim)
    return fwd(list(xs), i, j, sizes)


def backward(
    op: str, src: str, dst: str, gs: Sequence[Tensor], ndim_in: int, sizes: object = None
) -> Tensors:
    """Per-rank input gradients of op(src -> dst) given per-rank output gradients gs.

    ndim_in is the rank of the forward input (S dims are resolved against it).
    """
    (_, bwd), i, j = _lookup(op, src, dst, ndim_in)
    return bwd(list(gs), i, j, sizes)
