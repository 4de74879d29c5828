"""A picotron style MLP: autograd Functions called with .apply on the global tp group (test input)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from common import shard, weight
import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd
from typing import Annotated

HIDDEN, FFN, VOCAB = 4, 8, 6


def reduce_rows(partial: Annotated[Tensor, Spmd(tp=P)]) -> Annotated[Tensor, Spmd(tp=I)]:
    return spmd.all_reduce(partial, "tp", src=P, dst=I)


class ColumnParallelLinear(nn.Module):
    def __init__(self, full: Tensor, tp_rank: int, tp_size: int, gather_output: bool) -> None:
        super().__init__()
        self.weight = shard(full, 0, tp_rank, tp_size)
        self.gather_output = gather_output

    def forward(self, x: Annotated[Tensor, Spmd(tp=I)]) -> Tensor:
        out = F.linear(spmd.convert(x, "tp", src=I, dst=R), self.weight)
        if self.gather_output:  # the whole last dim on every rank
            out = spmd.all_gather(out, "tp", src=S(-1), dst=I)
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
