"""Megatron-core style mapping helpers: autograd Functions over the tp group.

Each helper is a torch.autograd.Function whose forward and backward call raw
torch.distributed collectives on plain tensors, called through `.apply` by a
thin public function.  Each Function's `.apply` is declared once as a trusted
boundary (`spmd.trusted`: the SPMD types in and out of what its code does,
shared notes real-code.md; its body is not checked), and the public functions
are annotated with the same types.
"""

from __future__ import annotations

from typing import Annotated, Any, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed import ProcessGroup

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd

from .parallel_state import get_tensor_model_parallel_group


TpGroup = Annotated[ProcessGroup, spmd.Axis("tp")]
# What the raw helpers receive (from the Functions' bodies, where nothing
# carries a gradient); they return plain tensors: the one-rank shortcut
# returns the input as it came.
PendingSum = Annotated[Tensor, Spmd(tp=P, nograd=True)]
Whole = Annotated[Tensor, Spmd(tp=I, nograd=True)]


def _group(group: Optional[ProcessGroup]) -> ProcessGroup:
    return get_tensor_model_parallel_group() if group is None else group


def _reduce(input_: PendingSum, group: TpGroup) -> Tensor:
    """Sum over the group (in place on a fresh tensor); a no-op on one rank."""
    if dist.get_world_size(group=group) == 1:
        return input_
    output = input_.clone()
    dist.all_reduce(output, group=group)
    return output


def _split_along_last_dim(input_: Whole, group: TpGroup) -> Tensor:
    world_size = dist.get_world_size(group=group)
    if world_size == 1:
        return input_
    rank = dist.get_rank(group=group)
    last = input_.size(-1)
    if last % world_size != 0:
        raise ValueError(f"last dim {last} is not divisible by {world_size}")
    return torch.split(input_, last // world_size, dim=-1)[rank].contiguous()


def _split_along_first_dim(input_: Whole, group: TpGroup) -> Tensor:
    world_size = dist.get_world_size(group=group)
    if world_size == 1:
        return input_
    rank = dist.get_rank(group=group)
    local = input_.size(0) // world_size
    return input_[rank * local:(rank + 1) * local].contiguous()


def _gather_along_last_dim(input_: Annotated[Tensor, Spmd(tp=S(-1), nograd=True)], group: TpGroup) -> Tensor:
    world_size = dist.get_world_size(group=group)
    if world_size == 1:
        return input_
    pieces: List[Tensor] = [torch.empty_like(input_) for _ in range(world_size)]
    dist.all_gather(pieces, input_.contiguous(), group=group)
    return torch.cat(pieces, dim=-1).contiguous()


def _gather_along_first_dim(input_: Annotated[Tensor, Spmd(tp=S(0), nograd=True)], group: TpGroup) -> Tensor:
    world_size = dist.get_world_size(group=group)
    if world_size == 1:
        return input_
    shape = list(input_.size())
    shape[0] = shape[0] * world_size
    output = torch.empty(shape, dtype=input_.dtype, device=input_.device)
    dist.all_gather_into_tensor(output, input_.contiguous(), group=group)
    return output


def _reduce_scatter_along_first_dim(input_: PendingSum, group: TpGroup) -> Tensor:
    world_size = dist.get_world_size(group=group)
    if world_size == 1:
        return input_
    shape = list(input_.size())
    if shape[0] % world_size != 0:
        raise ValueError(f"first dim {shape[0]} is not divisible by {world_size}")
    shape[0] = shape[0] // world_size
    output = torch.empty(shape, dtype=input_.dtype, device=input_.device)
    dist.reduce_scatter_tensor(output, input_.contiguous(), group=group)
    return output


class _CopyToModelParallelRegion(torch.autograd.Function):
    """Identity forward; the input gradient is summed over the group."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor, group: ProcessGroup) -> Tensor:
        ctx.group = group
        return input_

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return _reduce(grad_output, ctx.group), None


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    """Sum over the group forward; the gradient passes through."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor, group: ProcessGroup) -> Tensor:
        return _reduce(input_, group)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return grad_output, None


class _ScatterToModelParallelRegion(torch.autograd.Function):
    """Keep this rank's chunk of the last dim; the gradient is gathered back."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor, group: ProcessGroup) -> Tensor:
        ctx.group = group
        return _split_along_last_dim(input_, group)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return _gather_along_last_dim(grad_output, ctx.group), None


class _GatherFromModelParallelRegion(torch.autograd.Function):
    """Gather the last dim; the gradient is split back."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor, group: ProcessGroup) -> Tensor:
        ctx.group = group
        return _gather_along_last_dim(input_, group)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return _split_along_last_dim(grad_output, ctx.group), None


class _ScatterToSequenceParallelRegion(torch.autograd.Function):
    """Keep this rank's chunk of the sequence (dim 0); the gradient is gathered."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor, group: ProcessGroup) -> Tensor:
        ctx.group = group
        return _split_along_first_dim(input_, group)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return _gather_along_first_dim(grad_output, ctx.group), None


class _GatherFromSequenceParallelRegion(torch.autograd.Function):
    """Gather the sequence; the gradient is reduce-scattered (the consumer is tp-parallel)."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor, group: ProcessGroup) -> Tensor:
        ctx.group = group
        return _gather_along_first_dim(input_, group)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return _reduce_scatter_along_first_dim(grad_output, ctx.group), None


class _ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    """Sum and keep this rank's chunk of the sequence; the gradient is gathered."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor, group: ProcessGroup) -> Tensor:
        ctx.group = group
        return _reduce_scatter_along_first_dim(input_, group)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return _gather_along_first_dim(grad_output, ctx.group), None


# -- the typed boundary: each Function declared once, and the public helpers ----------

_copy_to = spmd.trusted(_CopyToModelParallelRegion.apply, in_types=(Spmd(tp=I), None), out_types=Spmd(tp=R))
_reduce_from = spmd.trusted(_ReduceFromModelParallelRegion.apply, in_types=(Spmd(tp=P), None), out_types=Spmd(tp=I))
_scatter_to = spmd.trusted(_ScatterToModelParallelRegion.apply, in_types=(Spmd(tp=I), None), out_types=Spmd(tp=S(-1)))
_gather_from = spmd.trusted(_GatherFromModelParallelRegion.apply, in_types=(Spmd(tp=S(-1)), None), out_types=Spmd(tp=I))
_scatter_to_sp = spmd.trusted(
    _ScatterToSequenceParallelRegion.apply, in_types=(Spmd(tp=I), None), out_types=Spmd(tp=S(0))
)
_gather_from_sp = spmd.trusted(
    _GatherFromSequenceParallelRegion.apply, in_types=(Spmd(tp=S(0)), None), out_types=Spmd(tp=R)
)
_reduce_scatter_to_sp = spmd.trusted(
    _ReduceScatterToSequenceParallelRegion.apply, in_types=(Spmd(tp=P), None), out_types=Spmd(tp=S(0))
)


def copy_to_tensor_model_parallel_region(
    input_: Annotated[Tensor, Spmd(tp=I)], group: Optional[ProcessGroup] = None
) -> Annotated[Tensor, Spmd(tp=R)]:
    return _copy_to(input_, _group(group))


def reduce_from_tensor_model_parallel_region(
    input_: Annotated[Tensor, Spmd(tp=P)], group: Optional[ProcessGroup] = None
) -> Annotated[Tensor, Spmd(tp=I)]:
    return _reduce_from(input_, _group(group))


def scatter_to_tensor_model_parallel_region(
    input_: Annotated[Tensor, Spmd(tp=I)], group: Optional[ProcessGroup] = None
) -> Annotated[Tensor, Spmd(tp=S(-1))]:
    return _scatter_to(input_, _group(group))


def gather_from_tensor_model_parallel_region(
    input_: Annotated[Tensor, Spmd(tp=S(-1))], group: Optional[ProcessGroup] = None
) -> Annotated[Tensor, Spmd(tp=I)]:
    return _gather_from(input_, _group(group))


def scatter_to_sequence_parallel_region(
    input_: Annotated[Tensor, Spmd(tp=I)], group: Optional[ProcessGroup] = None
) -> Annotated[Tensor, Spmd(tp=S(0))]:
    return _scatter_to_sp(input_, _group(group))


def gather_from_sequence_parallel_region(
    input_: Annotated[Tensor, Spmd(tp=S(0))], group: Optional[ProcessGroup] = None
) -> Annotated[Tensor, Spmd(tp=R)]:
    return _gather_from_sp(input_, _group(group))


def reduce_scatter_to_sequence_parallel_region(
    input_: Annotated[Tensor, Spmd(tp=P)], group: Optional[ProcessGroup] = None
) -> Annotated[Tensor, Spmd(tp=S(0))]:
    return _reduce_scatter_to_sp(input_, _group(group))
