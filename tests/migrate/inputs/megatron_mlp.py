"""A Megatron-core style tensor-parallel MLP with a sequence-parallel path (test input)."""

from __future__ import annotations

from typing import Optional

import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributed import ProcessGroup

from megatron.core import tensor_parallel
from megatron.core.tensor_parallel.mappings import (
    copy_to_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region as reduce_tp,
)

from common import shard, weight

HIDDEN, FFN = 4, 8


def enter_column(x: Tensor) -> Tensor:
    """Identity forward; the input gradient is summed over tp."""
    return copy_to_tensor_model_parallel_region(x)


def leave_row(partial: Tensor) -> Tensor:
    return reduce_tp(partial, group=None)  # sum the partial products


def scale_then_gather(x: Tensor, scale: float) -> Tensor:
    # x is used twice: the codemod must not annotate it
    y = tensor_parallel.gather_from_tensor_model_parallel_region(x * scale)
    return y + x.sum()


class ParallelMLP(nn.Module):
    def __init__(self, tp_rank: int, tp_size: int, tp_group: Optional[ProcessGroup] = None) -> None:
        super().__init__()
        self.tp_group = tp_group  # None: the default tp group
        self.w_in = shard(weight(FFN, HIDDEN, 1), 0, tp_rank, tp_size)  # column parallel
        self.w_out = shard(weight(HIDDEN, FFN, 2), 1, tp_rank, tp_size)  # row parallel

    def forward(self, x: Tensor) -> Tensor:
        # tensor parallel: x is the same on every rank
        h = F.gelu(F.linear(enter_column(x), self.w_in))
        y = leave_row(F.linear(h, self.w_out))
        # sequence parallel: chunk the sequence (dim 0), gather it back before the column linear
        chunk = tensor_parallel.scatter_to_sequence_parallel_region(y)
        full = tensor_parallel.gather_from_sequence_parallel_region(chunk)
        h2 = F.gelu(F.linear(full, self.w_in))
        out = tensor_parallel.reduce_scatter_to_sequence_parallel_region(F.linear(h2, self.w_out))
        back = tensor_parallel.gather_from_sequence_parallel_region(
            out, tensor_parallel_output_grad=False
        )
        split = tensor_parallel.scatter_to_tensor_model_parallel_region(back, group=self.tp_group)
        return scale_then_gather(split, 0.5)


def build(tp_rank: int, tp_size: int) -> nn.Module:
    return ParallelMLP(tp_rank, tp_size)
