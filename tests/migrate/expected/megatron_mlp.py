"""A Megatron-core style tensor-parallel MLP with a sequence-parallel path (test input)."""

from __future__ import annotations

from typing import Annotated, Optional

import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributed import ProcessGroup

from common import shard, weight
import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd

HIDDEN, FFN = 4, 8


def enter_column(x: Annotated[Tensor, Spmd(tp=I)]) -> Annotated[Tensor, Spmd(tp=R)]:
    """Identity forward; the input gradient is summed over tp."""
    return spmd.convert(x, "tp", src=I, dst=R)


def leave_row(partial: Annotated[Tensor, Spmd(tp=P)]) -> Annotated[Tensor, Spmd(tp=I)]:
    return spmd.all_reduce(partial, "tp", src=P, dst=I)  # sum the partial products


def scale_then_gather(x: Tensor, scale: float) -> Tensor:
    # x is used twice: the codemod must not annotate it
    y = spmd.all_gather(x * scale, "tp", src=S(-1), dst=I)
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
        chunk = spmd.convert(y, "tp", src=I, dst=S(0))
        full = spmd.all_gather(chunk, "tp", src=S(0), dst=R)
        h2 = F.gelu(F.linear(full, self.w_in))
        out = spmd.reduce_scatter(F.linear(h2, self.w_out), "tp", src=P, dst=S(0))
        back = spmd.all_gather(out, "tp", src=S(0), dst=I)
        split = spmd.convert(back, self.tp_group if self.tp_group is not None else "tp", src=I, dst=S(-1))
        return scale_then_gather(split, 0.5)


def build(tp_rank: int, tp_size: int) -> nn.Module:
    return ParallelMLP(tp_rank, tp_size)
