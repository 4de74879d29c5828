"""Run a spec-level redistribute plan (vocab/redistribute_plan.py) on this rank's tensor.

    spmd.redistribute(x, src=Spmd(spec=...), dst=Spmd(spec=...))

plans for the current mesh (cached) and runs the plan.  Every step runs on one
communicator, the flattened group of its axes, and most steps are one
per-axis primitive of the vocabulary's table run through the autograd
Function of autograd.py, so the backward pass is each step's backward row, in
reverse: the plan of the gradient types (RedistPlan.backward()).  Two forms
are not a single primitive:

* a gather or scatter over axes of several dims (or out of mesh order): the
  primitive on V over the flattened group (all_gather(V), reduce_scatter(P, V))
  plus a local reshape/permute, which torch differentiates;
* a permute/exchange: one all_to_all_single with per-rank split sizes (the
  functional form, which also runs on simulated ranks), in its own autograd
  Function whose backward is the same exchange reversed (pieces arriving for
  one element are summed, as the gradient of a replicated value is Partial).

All validation (types, axes, shapes, divisibility) happens in the planner,
before any communication.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed._functional_collectives as funcol
from torch import Tensor

from ..vocab.collectives import CollectiveError, Step
from ..vocab.collectives import plan as primitive_plan
from ..vocab.localtype import AxisType, P, V
from ..vocab.redistribute_plan import (
    Box,
    Piece,
    RedistPlan,
    RedistStep,
    exchange_pieces,
    global_shape,
    local_shape,
    plan_redistribute,
)
from ..vocab.spec import Spmd
from ._local import per_rank
from .autograd import apply_steps
from .mesh import Comm, current_mesh, resolve_axis

__all__ = ["redistribute_spec", "run_plan"]

MeshItems = Tuple[Tuple[str, int], ...]


def _mesh_items() -> MeshItems:
    mesh = current_mesh()
    if mesh is None:
        raise CollectiveError(
            "spmd.redistribute(x, src=Spmd(...), dst=Spmd(...)) plans for the current mesh; "
            "wrap the code in `with spmd.set_mesh(mesh):`"
        )
    names = tuple(mesh.mesh_dim_names or ())
    return tuple((a, mesh.size(i)) for i, a in enumerate(names))


def redistribute_spec(x: Tensor, src: Spmd, dst: Spmd) -> Tensor:
    """Redistribute x from global type src to dst on the current mesh (value preserved)."""
    if not isinstance(src, Spmd) or not isinstance(dst, Spmd):
        raise CollectiveError(
            f"spmd.redistribute without an axis takes src=Spmd(...) and dst=Spmd(...); "
            f"got src={src!r}, dst={dst!r}"
        )
    mesh = _mesh_items()
    shape = global_shape(src, tuple(int(n) for n in x.shape), dict(mesh))
    return run_plan(x, plan_redistribute(src, dst, shape, dict(mesh)))


def run_plan(x: Tensor, plan: RedistPlan) -> Tensor:
    """Run a plan made for the current mesh on this rank's local tensor x."""
    mesh = _mesh_items()
    if mesh != plan.base_mesh:
        raise CollectiveError(
            f"spmd.redistribute: the plan is for mesh {dict(plan.base_mesh)}, the current mesh is {dict(mesh)}"
        )
    want = local_shape(plan.src, plan.shape, dict(plan.mesh))
    if tuple(x.shape) != want:
        raise CollectiveError(
            f"spmd.redistribute from {plan.src}: the local tensor has shape {tuple(x.shape)}, "
            f"but a tensor of global shape {plan.shape} has local shape {want} there"
        )
    for step in plan.steps:
        x = _RUNNERS[step.op](x, step, plan)
    return x


# -- steps that are per-axis primitives ------------------------------------------------


@functools.lru_cache(maxsize=256)
def _primitive(op: str, src: AxisType, dst: AxisType) -> Tuple[Step, ...]:
    return primitive_plan(op, src, dst)


def _comm(step: RedistStep) -> Comm:
    return resolve_axis(step.axes[0] if len(step.axes) == 1 else step.axes)


def _group_letter(spmd: Spmd, axes: Sequence[str]) -> AxisType:
    (t,) = {spmd.axis_type(a) for a in axes}
    assert t is not None
    return t


def _run_primitive(x: Tensor, step: RedistStep, plan: RedistPlan) -> Tensor:
    flat = step.flat_types()
    comm = _comm(step)
    if flat is not None:
        return apply_steps(x, _primitive(step.op, *flat), comm, None)
    if step.op == "all_gather":
        return _gather_stacked(x, step, comm, plan)
    if step.op == "reduce_scatter":
        return _scatter_stacked(x, step, comm, plan)
    raise AssertionError(f"no runner for {step!r}")  # the planner makes no other form


def _sizes(plan: RedistPlan) -> Dict[str, int]:
    return dict(plan.mesh)


def _gather_stacked(x: Tensor, step: RedistStep, comm: Comm, plan: RedistPlan) -> Tensor:
    """all_gather(V) over the flattened group, then put each axis's block in its dim."""
    sizes = _sizes(plan)
    dst = _group_letter(step.dst, step.axes)
    y = apply_steps(x, _primitive("all_gather", V, dst), comm, None)  # (g, *tile)
    tile = list(x.shape)
    y = y.reshape([sizes[a] for a in step.axes] + tile)
    assert step.src.spec is not None
    order: List[int] = []
    final: List[int] = []
    for j, dim in enumerate(step.src.spec.dims):
        gathered = [a for a in dim if a in step.axes]  # the minor end of dim j
        order += [step.axes.index(a) for a in gathered] + [len(step.axes) + j]
        n = 1
        for a in gathered:
            n *= sizes[a]
        final.append(tile[j] * n)
    return y.permute(order).reshape(final)


def _scatter_stacked(x: Tensor, step: RedistStep, comm: Comm, plan: RedistPlan) -> Tensor:
    """Stack each rank's future block by group coordinate, then reduce_scatter(P, V)."""
    sizes = _sizes(plan)
    assert step.dst.spec is not None
    split: List[int] = []
    axis_pos: Dict[str, int] = {}
    tile_pos: List[int] = []
    tile: List[int] = []
    for j, dim in enumerate(step.dst.spec.dims):
        scattered = [a for a in dim if a in step.axes]  # appended as the minor end of dim j
        n = 1
        for a in scattered:
            axis_pos[a] = len(split)
            split.append(sizes[a])
            n *= sizes[a]
        tile_pos.append(len(split))
        tile.append(x.shape[j] // n)
        split.append(x.shape[j] // n)
    g = 1
    for a in step.axes:
        g *= sizes[a]
    stacked = x.reshape(split).permute([axis_pos[a] for a in step.axes] + tile_pos).reshape([g] + tile)
    return apply_steps(stacked, _primitive("reduce_scatter", P, V), comm, None)


# -- permute / exchange -------------------------------------------------------------------


def _slices(box: Box) -> Tuple[slice, ...]:
    return tuple(slice(s, s + n) for s, n in box)


def _box_shape(box: Box) -> Tuple[int, ...]:
    return tuple(n for _, n in box)


def _box_numel(box: Box) -> int:
    out = 1
    for _, n in box:
        out *= n
    return out


class _Table:
    """An exchange's pieces by rank: what each sends, receives and keeps.

    A plain object (not a tuple), so the simulated-rank helpers pass it whole.
    """

    __slots__ = ("g", "sends", "recvs", "keeps", "_pieces", "_reversed")

    def __init__(self, pieces: Sequence[Piece], g: int) -> None:
        self.g = g
        self.sends: Dict[int, List[Tuple[int, Box]]] = {c: [] for c in range(g)}
        self.recvs: Dict[int, List[Tuple[int, Box]]] = {c: [] for c in range(g)}
        self.keeps: Dict[int, List[Tuple[Box, Box]]] = {c: [] for c in range(g)}
        self._reversed: Optional[_Table] = None
        for p in sorted(pieces, key=lambda q: (q.sender, q.receiver)):
            if p.sender == p.receiver:
                self.keeps[p.sender].append((p.src_box, p.dst_box))
            else:
                self.sends[p.sender].append((p.receiver, p.src_box))
        for p in sorted(pieces, key=lambda q: (q.receiver, q.sender)):
            if p.sender != p.receiver:
                self.recvs[p.receiver].append((p.sender, p.dst_box))
        self._pieces = tuple(pieces)

    def reversed(self) -> "_Table":
        if self._reversed is None:
            back = [Piece(p.receiver, p.sender, p.dst_box, p.src_box) for p in self._pieces]
            self._reversed = _Table(back, self.g)
            self._reversed._reversed = self
        return self._reversed



@functools.lru_cache(maxsize=256)
def _table(step: RedistStep, shape: Tuple[int, ...], mesh: MeshItems) -> _Table:
    sizes = dict(mesh)
    g = 1
    for a in step.axes:
        g *= sizes[a]
    return _Table(exchange_pieces(step.src, step.dst, step.axes, shape, mesh), g)


def _pack(x: Tensor, c: int, table: _Table) -> Tuple[Any, ...]:
    ins = [0] * table.g
    outs = [0] * table.g
    parts = []
    for r, box in table.sends[c]:
        piece = x[_slices(box)].reshape(-1)
        parts.append(piece)
        ins[r] = piece.numel()
    for s, box in table.recvs[c]:
        outs[s] = _box_numel(box)
    buf = torch.cat(parts) if parts else x.new_empty((0,))
    return (buf, *ins, *outs)


def _unpack(recv: Tensor, x: Tensor, c: int, table: _Table, out_shape: Tuple[int, ...]) -> Tensor:
    out = x.new_zeros(out_shape)
    for sbox, dbox in table.keeps[c]:
        out[_slices(dbox)].add_(x[_slices(sbox)])
    off = 0
    for _, box in table.recvs[c]:
        n = _box_numel(box)
        out[_slices(box)].add_(recv[off : off + n].view(_box_shape(box)))
        off += n
    return out


_pack_per_rank = per_rank(_pack)
_unpack_per_rank = per_rank(_unpack)


def _exchange(x: Tensor, table: _Table, comm: Comm, out_shape: Tuple[int, ...]) -> Tensor:
    x = x.contiguous()
    c = comm.coord()
    packed = _pack_per_rank(x, c, table)
    g = table.g
    buf, ins, outs = packed[0], list(packed[1 : 1 + g]), list(packed[1 + g :])
    recv = funcol.wait_tensor(funcol.all_to_all_single(buf, outs, ins, comm.group))
    return _unpack_per_rank(recv, x, c, table, out_shape)


class _ExchangeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, table: _Table, comm: Comm, out_shape: Tuple[int, ...]) -> Tensor:
        ctx.table, ctx.comm, ctx.in_shape = table, comm, tuple(x.shape)
        return _exchange(x, table, comm, out_shape)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], None, None, None]:
        back = ctx.table.reversed()
        if torch.is_grad_enabled():  # create_graph=True: the backward is differentiable too
            return _ExchangeFunction.apply(grad, back, ctx.comm, ctx.in_shape), None, None, None
        return _exchange(grad, back, ctx.comm, ctx.in_shape), None, None, None


def _run_exchange(x: Tensor, step: RedistStep, plan: RedistPlan) -> Tensor:
    table = _table(step, plan.shape, plan.mesh)
    out_shape = local_shape(step.dst, plan.shape, dict(plan.mesh))
    return _ExchangeFunction.apply(x, table, _comm(step), out_shape)


_RUNNERS = {
    "convert": _run_primitive,
    "all_reduce": _run_primitive,
    "all_gather": _run_primitive,
    "reduce_scatter": _run_primitive,
    "all_to_all": _run_primitive,
    "permute": _run_exchange,
    "exchange": _run_exchange,
}
