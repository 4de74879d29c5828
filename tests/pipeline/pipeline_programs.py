"""A two-stage tensor- and pipeline-parallel MLP (mesh pp=2 x tp=2), written
the way Megatron's schedules drive a model: each rank builds its stage,
receives its input from the previous stage, sends its output to the next,
and runs backward in the same order.

Both stages are Megatron-style parallel MLPs (column-parallel fc1, row-
parallel fc2, the row-parallel output all-reduced over tp); what crosses the
pp boundary is the hidden state, the same on every tp rank: the boundary
type Hidden (tp=I), named by the stage functions' annotations and by the
send and the receive alike, so each stage is checked on its own.

  train_step_fixed   stage 0 all-reduces its row-parallel output over tp, then
                     sends it (tp=I, as Hidden declares)
  train_step_buggy   stage 0 sends the row-parallel output before the tp
                     all-reduce (tp=P): stage 1 computes on each tp rank's
                     addend; the checker reports the send

The stages' weights are sharded over pp (V: each stage its own), so their
gradients are complete on pp; `finish` sums nothing over pp, and the
checker agrees (a sum over pp would be reported).  tests/pipeline runs both
steps on 4 gloo ranks against the gradients of one process.
"""

from __future__ import annotations

from typing import Annotated, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

Hidden = Annotated[Tensor, Spmd(tp=I)]  # the boundary type: [tokens, hidden], the same on every tp rank


class ParallelMLP(nn.Module):
    """One stage: fc1 column-parallel, fc2 row-parallel (Megatron's ParallelMLP)."""

    fc1_weight: Annotated[Tensor, Spmd(pp=V, tp=S(0))]  # [ffn / tp, hidden]
    fc2_weight: Annotated[Tensor, Spmd(pp=V, tp=S(1))]  # [hidden, ffn / tp]

    def __init__(self, fc1: Tensor, fc2: Tensor) -> None:
        super().__init__()
        self.fc1_weight = nn.Parameter(fc1)
        self.fc2_weight = nn.Parameter(fc2)

    def partial_forward(self, x: Hidden) -> Annotated[Tensor, Spmd(tp=P)]:
        h = spmd.convert(x, "tp", src=I, dst=R)  # copy to the tp region
        h = F.gelu(F.linear(h, self.fc1_weight))
        return spmd.reinterpret(F.linear(h, self.fc2_weight), "tp", src=V, dst=P)

    def forward(self, x: Hidden) -> Hidden:
        return spmd.all_reduce(self.partial_forward(x), "tp", src=P, dst=I)


def finish(stage: ParallelMLP) -> None:
    spmd.sync_grads(stage, "pp")  # sums nothing: every weight is the stage's own (V on pp)


# -- the schedule, one microbatch (Megatron's forward_backward_no_pipelining on
#    two stages): stage 0 runs its forward, sends, and runs backward on the
#    handle the send returns; stage 1 receives, runs forward and the loss.


def first_stage_fixed(stage: ParallelMLP, x: Hidden) -> Annotated[Tensor, Spmd(pp=P)]:
    y = stage(x)
    return spmd.send_next(y, "pp", spmd=Hidden)  # backward: y's gradient from stage 1


def first_stage_buggy(stage: ParallelMLP, x: Hidden) -> Annotated[Tensor, Spmd(pp=P)]:
    y = stage.partial_forward(x)  # the tp all-reduce left to the next stage
    return spmd.send_next(y, "pp", spmd=Hidden)  # expect: spmd-arg


def last_stage(stage: ParallelMLP, target: Hidden, shape: Tuple[int, int]) -> Annotated[Tensor, Spmd(pp=P, tp=I)]:
    h = spmd.recv_prev(shape, "pp", spmd=Hidden, dtype=torch.float64)  # backward: h's gradient to stage 0
    loss = ((stage(h) - target) ** 2).sum()
    # The pipeline's loss is the sum of the stages' addends: this loss here, the
    # send's zero handle on stage 0.
    return spmd.reinterpret(loss, "pp", src=V, dst=P)
