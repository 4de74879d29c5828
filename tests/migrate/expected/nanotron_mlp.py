"""A nanotron style MLP: differentiable primitives on an explicit ProcessGroup (test input)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributed import ProcessGroup

from common import shard, weight
import spmd_mypy as spmd
from spmd_mypy import I, P, R, S

HIDDEN, FFN = 4, 8


def column(x: Tensor, w: Tensor, group: ProcessGroup) -> Tensor:
    return F.linear(spmd.convert(x, group, src=I, dst=R), w)


class TensorParallelMLP(nn.Module):
    def __init__(self, tp_rank: int, tp_size: int, pg: ProcessGroup) -> None:
        super().__init__()
        self.pg = pg
        self.w_in = shard(weight(FFN, HIDDEN, 5), 0, tp_rank, tp_size)
        self.w_out = shard(weight(HIDDEN, FFN, 6), 1, tp_rank, tp_size)

    def forward(self, x: Tensor) -> Tensor:
        h = F.gelu(column(x, self.w_in, self.pg))
        y = spmd.all_reduce(F.linear(h, self.w_out), self.pg, src=P, dst=I)
        # REDUCE_SCATTER mode: the residual stream is sharded on dim 0 between the blocks
        chunk = spmd.reduce_scatter(y, self.pg, src=P, dst=S(0))
        full = spmd.all_gather(chunk, self.pg, src=S(0), dst=R)
        h2 = F.gelu(F.linear(spmd.convert(full, self.pg, src=I, dst=R), self.w_in))
        return spmd.all_reduce(F.linear(h2, self.w_out), self.pg, src=P, dst=I)


def build(tp_rank: int, tp_size: int, pg: ProcessGroup) -> nn.Module:
    return TensorParallelMLP(tp_rank, tp_size, pg)
