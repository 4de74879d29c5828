"""A gpt-neox style tensor-parallel MLP: megatron.mpu helpers, [batch, seq, hidden] (test input)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from common import shard, weight
import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd
from typing import Annotated

HIDDEN, FFN = 4, 8


class ParallelMLP(nn.Module):
    def __init__(self, tp_rank: int, tp_size: int) -> None:
        super().__init__()
        self.w_in = shard(weight(FFN, HIDDEN, 3), 0, tp_rank, tp_size)
        self.w_out = shard(weight(HIDDEN, FFN, 4), 1, tp_rank, tp_size)

    def block(self, x: torch.Tensor) -> Annotated[torch.Tensor, Spmd(tp=I)]:
        x = spmd.convert(x, "tp", src=I, dst=R)
        h = F.gelu(F.linear(x, self.w_in))
        y = spmd.all_reduce(F.linear(h, self.w_out), "tp", src=P, dst=I)
        return spmd.all_gather(spmd.convert(y, "tp", src=I, dst=S(-1)) * 2.0, "tp", src=S(-1), dst=I)

    def forward(self, x):  # an unannotated method: mypy skips it, the codemod annotates nothing
        y = self.block(x)
        chunk = spmd.convert(y, "tp", src=I, dst=S(1))  # seq_dim defaults to 1 here
        full = spmd.all_gather(chunk, "tp", src=S(1), dst=R)
        h = F.gelu(F.linear(full, self.w_in))
        out = spmd.reduce_scatter(F.linear(h, self.w_out), "tp", src=P, dst=S(1))
        return spmd.all_gather(out, "tp", src=S(1), dst=R)


def build(tp_rank: int, tp_size: int) -> nn.Module:
    return ParallelMLP(tp_rank, tp_size)
