"""A tensor-parallel MLP that keeps its weights as DTensors and computes on
their local tensors (fresh, in the style of DTensor-based TP code): each
crossing of the DTensor boundary states its gradient placement, so every
local tensor has an SPMD type."""

from __future__ import annotations

from typing import Annotated

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V


class DTensorMLP(torch.nn.Module):
    def __init__(self, w_in: Tensor, w_out: Tensor, norm: Tensor, mesh: DeviceMesh) -> None:
        super().__init__()
        tp = mesh["tp"]
        self.w_in = distribute_tensor(w_in, tp, [Shard(0)])
        self.w_out = distribute_tensor(w_out, tp, [Shard(1)])
        self.norm = distribute_tensor(norm, tp, [Replicate()])
        self.mesh = mesh

    def forward(self, x: Annotated[Tensor, Spmd(tp=I)]) -> Annotated[Tensor, Spmd(tp=I)]:
        # the replicated norm weight meets per-rank values: its gradient is Partial
        scale = self.norm.to_local(grad_placements=[Partial()])
        h = spmd.convert(x, "tp", src=I, dst=R) * scale
        up = F.gelu(F.linear(h, self.w_in.to_local()))
        down = spmd.reinterpret(F.linear(up, self.w_out.to_local()), "tp", src=V, dst=P)
        summed = DTensor.from_local(down, self.mesh["tp"], [Partial()])
        out = summed.redistribute(self.mesh["tp"], [Replicate()]).to_local()
        return out
