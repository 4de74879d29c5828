"""nanotron style tensor parallelism: a TP mode, differentiable wrappers, nn.Linear subclasses.

The axis is the ProcessGroup `pg` handed to every module (no mesh names).
The mode decides the layout of the residual stream on tp:

  ALL_REDUCE      the stream is I; a column-parallel input goes through
                  differentiable_identity (convert I -> R), a row-parallel
                  output through differentiable_all_reduce_sum (P -> I).
  REDUCE_SCATTER  the stream is this rank's chunk of the flattened tokens
                  (S(0)); differentiable_all_gather (S(0) -> R) in,
                  differentiable_reduce_scatter_sum (P -> S(0)) out.

The functional cores are overloaded on the mode, so that a call with a
literal mode gets the layout of that mode.
"""

from __future__ import annotations

from enum import Enum, auto
from typing import Annotated, Any, Literal, Optional, Tuple, Union, overload

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributed import ProcessGroup

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

Invariant = Annotated[Tensor, Spmd(tp=I)]
TokenChunk = Annotated[Tensor, Spmd(tp=S(0))]  # [tokens / tp, hidden]
Sharded = Annotated[Tensor, Spmd(tp=S(-1))]  # [tokens, out / tp]
Stream = Union[Invariant, TokenChunk]
TpGroup = Annotated[ProcessGroup, spmd.Axis("tp")]  # the tp ProcessGroup `pg`


class TensorParallelLinearMode(Enum):
    ALL_REDUCE = auto()
    REDUCE_SCATTER = auto()


# -- raw autograd Functions over a ProcessGroup -------------------------------------


class DifferentiableIdentity(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Tensor, group: TpGroup) -> Tensor:
        ctx.group = group
        return tensor

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return DifferentiableAllReduceSum.apply(grad_output, ctx.group), None


class DifferentiableAllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Tensor, group: TpGroup) -> Tensor:
        if dist.get_world_size(group) == 1:
            return tensor
        tensor = tensor.clone()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
        return tensor

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return grad_output, None


class DifferentiableAllGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Tensor, group: TpGroup) -> Tensor:
        ctx.group = group
        world_size = dist.get_world_size(group)
        if world_size == 1:
            return tensor
        out = torch.empty((tensor.shape[0] * world_size, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
        dist.all_gather_into_tensor(out, tensor.contiguous(), group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return DifferentiableReduceScatterSum.apply(grad_output, ctx.group), None


class DifferentiableReduceScatterSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Tensor, group: TpGroup) -> Tensor:
        ctx.group = group
        world_size = dist.get_world_size(group)
        if world_size == 1:
            return tensor
        out = torch.empty((tensor.shape[0] // world_size, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
        dist.reduce_scatter_tensor(out, tensor.contiguous(), op=dist.ReduceOp.SUM, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return DifferentiableAllGather.apply(grad_output, ctx.group), None


# The Functions as trusted boundaries: the types of what each one's forward and
# backward do, declared once (their bodies are not checked).
_identity = spmd.trusted(DifferentiableIdentity.apply, in_types=(Spmd(tp=I), None), out_types=Spmd(tp=R))
_all_reduce_sum = spmd.trusted(DifferentiableAllReduceSum.apply, in_types=(Spmd(tp=P), None), out_types=Spmd(tp=I))
_all_gather = spmd.trusted(DifferentiableAllGather.apply, in_types=(Spmd(tp=S(0)), None), out_types=Spmd(tp=R))
_reduce_scatter_sum = spmd.trusted(
    DifferentiableReduceScatterSum.apply, in_types=(Spmd(tp=P), None), out_types=Spmd(tp=S(0))
)


def differentiable_identity(tensor: Invariant, group: Optional[ProcessGroup] = None) -> Annotated[Tensor, Spmd(tp=R)]:
    return _identity(tensor, group)


def differentiable_all_reduce_sum(tensor: Annotated[Tensor, Spmd(tp=P)], group: Optional[ProcessGroup] = None) -> Invariant:
    return _all_reduce_sum(tensor, group)


def differentiable_all_gather(tensor: TokenChunk, group: Optional[ProcessGroup] = None) -> Annotated[Tensor, Spmd(tp=R)]:
    return _all_gather(tensor, group)


def differentiable_reduce_scatter_sum(tensor: Annotated[Tensor, Spmd(tp=P)], group: Optional[ProcessGroup] = None) -> TokenChunk:
    return _reduce_scatter_sum(tensor, group)


# -- functional cores, overloaded on the mode --------------------------------------------


@overload
def column_linear(
    input: Invariant, weight: Annotated[Tensor, Spmd(tp=S(0))], bias: Optional[Annotated[Tensor, Spmd(tp=S(0))]],
    group: TpGroup, tp_mode: Literal[TensorParallelLinearMode.ALL_REDUCE],
) -> Sharded: ...
@overload
def column_linear(
    input: TokenChunk, weight: Annotated[Tensor, Spmd(tp=S(0))], bias: Optional[Annotated[Tensor, Spmd(tp=S(0))]],
    group: TpGroup, tp_mode: Literal[TensorParallelLinearMode.REDUCE_SCATTER],
) -> Sharded: ...
@overload
def column_linear(
    input: Stream, weight: Annotated[Tensor, Spmd(tp=S(0))], bias: Optional[Annotated[Tensor, Spmd(tp=S(0))]],
    group: TpGroup, tp_mode: TensorParallelLinearMode,
) -> Sharded: ...
def column_linear(
    input: Stream, weight: Annotated[Tensor, Spmd(tp=S(0))], bias: Optional[Annotated[Tensor, Spmd(tp=S(0))]],
    group: TpGroup, tp_mode: TensorParallelLinearMode,
) -> Sharded:
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        full = spmd.convert(spmd.assert_spmd(input, Spmd(tp=I)), group, src=I, dst=R)  # this mode's stream
    else:
        full = spmd.all_gather(spmd.assert_spmd(input, Spmd(tp=S(0))), group, src=S(0), dst=R)
    return F.linear(full, weight, bias)


@overload
def row_linear(
    input: Sharded, weight: Annotated[Tensor, Spmd(tp=S(1))], bias: Optional[Invariant],
    group: TpGroup, tp_mode: Literal[TensorParallelLinearMode.ALL_REDUCE],
) -> Invariant: ...
@overload
def row_linear(
    input: Sharded, weight: Annotated[Tensor, Spmd(tp=S(1))], bias: Optional[Invariant],
    group: TpGroup, tp_mode: Literal[TensorParallelLinearMode.REDUCE_SCATTER],
) -> TokenChunk: ...
@overload
def row_linear(
    input: Sharded, weight: Annotated[Tensor, Spmd(tp=S(1))], bias: Optional[Invariant],
    group: TpGroup, tp_mode: TensorParallelLinearMode,
) -> Stream: ...
def row_linear(
    input: Sharded, weight: Annotated[Tensor, Spmd(tp=S(1))], bias: Optional[Invariant],
    group: TpGroup, tp_mode: TensorParallelLinearMode,
) -> Stream:
    out = spmd.linear(input, weight, out_partial_axes="tp")
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        reduced = spmd.all_reduce(out, group, src=P, dst=I)
        return reduced if bias is None else reduced + bias
    scattered = spmd.reduce_scatter(out, group, src=P, dst=S(0))
    return scattered if bias is None else scattered + spmd.convert(bias, group, src=I, dst=R)


# -- modules -----------------------------------------------------------------------------


class TensorParallelColumnLinear(nn.Linear):
    weight: Annotated[Tensor, Spmd(tp=S(0))]
    bias: Optional[Annotated[Tensor, Spmd(tp=S(0))]]

    def __init__(
        self, in_features: int, out_features: int, pg: ProcessGroup, mode: TensorParallelLinearMode,
        bias: bool = True,
    ) -> None:
        self.pg = pg
        self.world_size = pg.size()
        if out_features % self.world_size != 0:
            raise ValueError(f"out_features {out_features} is not divisible by tp {self.world_size}")
        super().__init__(in_features, out_features // self.world_size, bias=bias)
        self.mode = mode

    def forward(self, input: Stream) -> Sharded:
        return column_linear(input, self.weight, self.bias, group=self.pg, tp_mode=self.mode)


class TensorParallelRowLinear(nn.Linear):
    weight: Annotated[Tensor, Spmd(tp=S(1))]
    bias: Optional[Invariant]

    def __init__(
        self, in_features: int, out_features: int, pg: ProcessGroup, mode: TensorParallelLinearMode,
        bias: bool = True,
    ) -> None:
        self.pg = pg
        self.world_size = pg.size()
        if in_features % self.world_size != 0:
            raise ValueError(f"in_features {in_features} is not divisible by tp {self.world_size}")
        super().__init__(in_features // self.world_size, out_features, bias=bias)
        self.mode = mode

    def forward(self, input: Sharded) -> Stream:
        return row_linear(input, self.weight, self.bias, group=self.pg, tp_mode=self.mode)


class ReplicatedInputColumnLinear(nn.Linear):
    """A column-parallel linear that relies on nn.Linear's own forward for the product."""

    weight: Annotated[Tensor, Spmd(tp=S(0))]
    bias: Optional[Annotated[Tensor, Spmd(tp=S(0))]]

    def __init__(self, in_features: int, out_features: int, pg: ProcessGroup) -> None:
        self.pg = pg
        super().__init__(in_features, out_features // pg.size(), bias=True)

    def forward(self, input: Invariant) -> Sharded:
        return super().forward(differentiable_identity(input, self.pg))


class TensorParallelEmbedding(nn.Embedding):
    """Vocabulary-sharded table: masked local lookup, then the sum over tp."""

    weight: Annotated[Tensor, Spmd(tp=S(0))]

    def __init__(self, num_embeddings: int, embedding_dim: int, pg: TpGroup) -> None:
        self.pg = pg
        self.rank = dist.get_rank(pg)
        self.world_size = pg.size()
        block = num_embeddings // self.world_size
        self.min_id = self.rank * block
        self.max_id = self.min_id + block
        super().__init__(block, embedding_dim)

    def forward(self, input_ids: Annotated[Tensor, Spmd(tp=I, nograd=True)]) -> Invariant:
        if self.world_size > 1:
            input_mask = (input_ids < self.min_id) | (input_ids >= self.max_id)
            input_ids = input_ids - self.min_id
            input_ids[input_mask] = 0
        else:
            input_mask = torch.zeros_like(input_ids, dtype=torch.bool)
        out = super().forward(input_ids)
        out = out * (~input_mask[..., None])
        return differentiable_all_reduce_sum(spmd.reinterpret(out, self.pg, src=V, dst=P), self.pg)
