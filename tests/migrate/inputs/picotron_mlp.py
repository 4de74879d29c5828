"""A picotron style MLP: autograd Functions called with .apply on the global tp group (test input)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from picotron.tensor_parallel import tp_communications as tpc
from picotron.tensor_parallel.tp_communications import (
    CopyToModelParallelRegion,
    ReduceFromModelParallelRegion,
)

from common import shard, weight

HIDDEN, FFN, VOCAB = 4, 8, 6


def reduce_rows(partial: Tensor) -> Tensor:
    return ReduceFromModelParallelRegion.apply(partial)


class ColumnParallelLinear(nn.Module):
    def __init__(self, full: Tensor, tp_rank: int, tp_size: int, gather_output: bool) -> None:
        super().__init__()
        self.weight = shard(full, 0, tp_rank, tp_size)
        self.gather_output = gather_output

    def forward(self, x: Tensor) -> Tensor:
        out = F.linear(CopyToModelParallelRegion.apply(x), self.weight)
        if self.gather_output:  # the whole last dim on every rank
            out = tpc.GatherFromModelParallelRegion.apply(out)
        return out


class MLP(nn.Module):
    def __init__(self, tp_rank: int, tp_size: int) -> None:
        super().__init__()
        self.up = ColumnParallelLinear(weight(FFN, HIDDEN, 7), tp_rank, tp_size, gather_output=False)
        self.w_down = shard(weight(HIDDEN, FFN, 8), 1, tp_rank, tp_size)
        self.head = ColumnParallelLinear(weight(VOCAB, HIDDEN, 9), tp_rank, tp_size, gather_output=True)

    def forward(self, x: Tensor) -> Tensor:
        h = F.silu(self.up(x))
        y = reduce_rows(F.linear(h, self.w_down))
        return self.head(y)


def build(tp_rank: int, tp_size: int) -> nn.Module:
    return MLP(tp_rank, tp_size)
