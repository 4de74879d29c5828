"""A gpt-neox style tensor-parallel MLP: megatron.mpu helpers, [batch, seq, hidden] (test input)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from megatron import mpu

from common import shard, weight

HIDDEN, FFN = 4, 8


class ParallelMLP(nn.Module):
    def __init__(self, tp_rank: int, tp_size: int) -> None:
        super().__init__()
        self.w_in = shard(weight(FFN, HIDDEN, 3), 0, tp_rank, tp_size)
        self.w_out = shard(weight(HIDDEN, FFN, 4), 1, tp_rank, tp_size)

    def block(self, x: torch.Tensor) -> torch.Tensor:
        x = mpu.copy_to_model_parallel_region(x)
        h = F.gelu(F.linear(x, self.w_in))
        y = mpu.reduce_from_model_parallel_region(F.linear(h, self.w_out))
        return mpu.gather_from_model_parallel_region(mpu.scatter_to_model_parallel_region(y) * 2.0)

    def forward(self, x):  # an unannotated method: mypy skips it, the codemod annotates nothing
        y = self.block(x)
        chunk = mpu.scatter_to_sequence_parallel_region(y)  # seq_dim defaults to 1 here
        full = mpu.gather_from_sequence_parallel_region(chunk, seq_dim=1)
        h = F.gelu(F.linear(full, self.w_in))
        out = mpu.reduce_scatter_to_sequence_parallel_region(F.linear(h, self.w_out), 1)
        return mpu.gather_from_sequence_parallel_region(out, 1)


def build(tp_rank: int, tp_size: int) -> nn.Module:
    return ParallelMLP(tp_rank, tp_size)
