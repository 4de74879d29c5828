"""Megatron-core style ColumnParallelLinear and RowParallelLinear.

Activations are [sequence, batch, hidden].  On tp:

  - A column-parallel weight holds rows [out / tp, in] (S(0)), and so does
    its bias; the output holds the last dim's shard (S(-1)), or, with
    `gather_output=True`, the whole last dim (I).
  - A row-parallel weight holds columns [out, in / tp] (S(1)); its input is
    already sharded on the last dim (`input_is_parallel=True`) or is
    scattered here; the product is a pending sum, reduced to I, or with
    `sequence_parallel=True` reduce-scattered to this rank's sequence chunk
    (S(0)).  Its bias is added after the reduction.
  - With `sequence_parallel=True` a column-parallel input is the sequence
    chunk (S(0)) and is gathered first; otherwise it is I and goes through
    copy-to-region.

Both layers return (output, bias) so that the caller can fuse the bias add.
"""

from __future__ import annotations

from typing import Annotated, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributed import ProcessGroup

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

from .megatron_mappings import (
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
)
from .parallel_state import get_tensor_model_parallel_group, get_tensor_model_parallel_world_size

Invariant = Annotated[Tensor, Spmd(tp=I)]
SeqChunk = Annotated[Tensor, Spmd(tp=S(0))]
LastShard = Annotated[Tensor, Spmd(tp=S(-1))]
RowShardedWeight = Annotated[Tensor, Spmd(tp=S(0))]
ColShardedWeight = Annotated[Tensor, Spmd(tp=S(1))]

ColumnInput = Union[Invariant, SeqChunk]  # I, or S(0) with sequence_parallel
ColumnOutput = Union[Invariant, LastShard]  # I with gather_output, else S(-1)
RowInput = Union[Invariant, LastShard]  # S(-1) with input_is_parallel, else I
RowOutput = Union[Invariant, SeqChunk]  # S(0) with sequence_parallel, else I


def divide(numerator: int, denominator: int) -> int:
    if numerator % denominator != 0:
        raise ValueError(f"{numerator} is not divisible by {denominator}")
    return numerator // denominator


def _init_weight(weight: Tensor, stride: int = 1) -> None:
    with torch.no_grad():
        nn.init.normal_(weight, mean=0.0, std=0.02)


class ColumnParallelLinear(nn.Module):
    """Y = X A + b with A split by columns (the rows of the stored weight) over tp."""

    weight: RowShardedWeight
    bias: Optional[Annotated[Tensor, Spmd(tp=S(0))]]

    def __init__(
        self,
        input_size: int,
        output_size: int,
        *,
        bias: bool = True,
        gather_output: bool = False,
        skip_bias_add: bool = False,
        sequence_parallel: bool = False,
        tp_group: Optional[ProcessGroup] = None,
    ) -> None:
        super().__init__()
        self.tp_group = tp_group
        world_size = get_tensor_model_parallel_world_size() if tp_group is None else tp_group.size()
        self.output_size_per_partition = divide(output_size, world_size)
        self.gather_output = gather_output
        self.skip_bias_add = skip_bias_add
        self.sequence_parallel = sequence_parallel
        if sequence_parallel and gather_output:
            raise ValueError("gather_output is incompatible with sequence_parallel")
        self.weight = nn.Parameter(torch.empty(self.output_size_per_partition, input_size))
        _init_weight(self.weight)
        if bias:
            self.bias = nn.Parameter(torch.zeros(self.output_size_per_partition))
        else:
            self.bias = None

    def forward(self, input_: ColumnInput) -> Tuple[ColumnOutput, Optional[Annotated[Tensor, Spmd(tp=S(0))]]]:
        bias = self.bias if not self.skip_bias_add else None
        if self.sequence_parallel:
            input_ = spmd.assert_spmd(input_, Spmd(tp=S(0)))
            input_parallel = gather_from_sequence_parallel_region(input_, self.tp_group)
        else:
            input_ = spmd.assert_spmd(input_, Spmd(tp=I))
            input_parallel = copy_to_tensor_model_parallel_region(input_, self.tp_group)
        output_parallel = F.linear(input_parallel, self.weight, bias)
        if self.gather_output:
            output = gather_from_tensor_model_parallel_region(output_parallel, self.tp_group)
        else:
            output = output_parallel
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias


class RowParallelLinear(nn.Module):
    """Y = X A + b with A split by rows (the columns of the stored weight) over tp."""

    weight: ColShardedWeight
    bias: Optional[Invariant]

    def __init__(
        self,
        input_size: int,
        output_size: int,
        *,
        bias: bool = True,
        input_is_parallel: bool = True,
        skip_bias_add: bool = False,
        sequence_parallel: bool = False,
        tp_group: Optional[ProcessGroup] = None,
    ) -> None:
        super().__init__()
        self.tp_group = tp_group
        world_size = get_tensor_model_parallel_world_size() if tp_group is None else tp_group.size()
        self.input_size_per_partition = divide(input_size, world_size)
        self.input_is_parallel = input_is_parallel
        self.skip_bias_add = skip_bias_add
        self.sequence_parallel = sequence_parallel
        if sequence_parallel and not input_is_parallel:
            raise ValueError("sequence_parallel needs input_is_parallel")
        self.weight = nn.Parameter(torch.empty(output_size, self.input_size_per_partition))
        _init_weight(self.weight)
        if bias:
            self.bias = nn.Parameter(torch.zeros(output_size))
            # Megatron marks it so that finalize-grads sums its gradient over tp under SP.
            setattr(self.bias, "sequence_parallel", sequence_parallel)
        else:
            self.bias = None

    def forward(self, input_: RowInput) -> Tuple[RowOutput, Optional[Invariant]]:
        if self.input_is_parallel:
            input_parallel = spmd.assert_spmd(input_, Spmd(tp=S(-1)))
        else:
            input_ = spmd.assert_spmd(input_, Spmd(tp=I))
            input_parallel = scatter_to_tensor_model_parallel_region(input_, self.tp_group)
        output_parallel = spmd.linear(input_parallel, self.weight, out_partial_axes="tp")
        if self.sequence_parallel:
            output_ = reduce_scatter_to_sequence_parallel_region(output_parallel, self.tp_group)
        else:
            output_ = reduce_from_tensor_model_parallel_region(output_parallel, self.tp_group)
        if self.skip_bias_add or self.bias is None:
            return output_, self.bias
        if self.sequence_parallel:
            output_ = spmd.assert_spmd(output_, Spmd(tp=S(0)))
            return output_ + spmd.convert(self.bias, "tp", src=I, dst=R), None
        output_ = spmd.assert_spmd(output_, Spmd(tp=I))
        return output_ + self.bias, None


def linear_with_sequence_parallel(
    input_: SeqChunk,
    weight: RowShardedWeight,
    bias: Optional[Annotated[Tensor, Spmd(tp=S(0))]],
) -> Annotated[Tensor, Spmd(tp=V)]:
    """The functional core of a column-parallel linear under SP, written with typed collectives."""
    total_input = spmd.all_gather(input_, "tp", src=S(0), dst=R)
    return F.linear(total_input, weight, bias)


def row_linear_reduce(
    input_parallel: LastShard,
    weight: ColShardedWeight,
    bias: Invariant,
) -> Invariant:
    """The functional core of a row-parallel linear without SP, typed: the sum written where it happens."""
    partial = spmd.reinterpret(F.linear(input_parallel, weight), "tp", src=V, dst=P)
    return spmd.all_reduce(partial, "tp", src=P, dst=I) + bias


def row_linear_reduce_scatter(
    input_parallel: LastShard,
    weight: ColShardedWeight,
    bias: Invariant,
) -> SeqChunk:
    """The same under SP: sum and keep this rank's sequence chunk; the bias meets a chunk only."""
    partial = spmd.linear(input_parallel, weight, out_partial_axes="tp")
    output = spmd.reduce_scatter(partial, "tp", src=P, dst=S(0))
    return output + spmd.convert(bias, "tp", src=I, dst=R)


def tp_group_or_default(group: Optional[ProcessGroup]) -> ProcessGroup:
    return get_tensor_model_parallel_group() if group is None else group
