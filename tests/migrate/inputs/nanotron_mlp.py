"""A nanotron style MLP: differentiable primitives on an explicit ProcessGroup (test input)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributed import ProcessGroup

from nanotron.parallel.tensor_parallel import distributed_differentiable_primitives as ddp
from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    DifferentiableAllReduceSum,
    DifferentiableIdentity,
    differentiable_all_gather,
)

from common import shard, weight

HIDDEN, FFN = 4, 8


def column(x: Tensor, w: Tensor, group: ProcessGroup) -> Tensor:
    return F.linear(DifferentiableIdentity.apply(x, group), w)


class TensorParallelMLP(nn.Module):
    def __init__(self, tp_rank: int, tp_size: int, pg: ProcessGroup) -> None:
        super().__init__()
        self.pg = pg
        self.w_in = shard(weight(FFN, HIDDEN, 5), 0, tp_rank, tp_size)
        self.w_out = shard(weight(HIDDEN, FFN, 6), 1, tp_rank, tp_size)

    def forward(self, x: Tensor) -> Tensor:
        h = F.gelu(column(x, self.w_in, self.pg))
        y = DifferentiableAllReduceSum.apply(F.linear(h, self.w_out), self.pg)
        # REDUCE_SCATTER mode: the residual stream is sharded on dim 0 between the blocks
        chunk = ddp.differentiable_reduce_scatter_sum(y, group=self.pg)
        full = differentiable_all_gather(chunk, self.pg)
        h2 = F.gelu(F.linear(ddp.differentiable_identity(full, self.pg), self.w_in))
        return ddp.differentiable_all_reduce_sum(F.linear(h2, self.w_out), group=self.pg)


def build(tp_rank: int, tp_size: int, pg: ProcessGroup) -> nn.Module:
    return TensorParallelMLP(tp_rank, tp_size, pg)
