"""Programs declared with @spmd.configurations, checked per configuration by
the plugin (test_configurations_static.py) and run on 2 gloo ranks
(test_configurations_gloo.py).  Fresh code in the style of Megatron's
parallel MLP with sequence parallelism and its mappings' one-rank bypass."""

from __future__ import annotations

from typing import Annotated, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

Hidden = Union[Annotated[Tensor, Spmd(tp=I)], Annotated[Tensor, Spmd(tp=S(0))]]  # [tokens, h]


@spmd.configurations(sequence_parallel={True: Spmd(tp=S(0)), False: Spmd(tp=I)})
class ParallelMLP(nn.Module):
    """fc1 column-parallel, fc2 row-parallel; with SP the tokens come and go
    split over tp (gather before fc1, reduce-scatter after fc2)."""

    w1: Annotated[Tensor, Spmd(tp=S(0))]  # [ffn / tp, h]
    w2: Annotated[Tensor, Spmd(tp=S(1))]  # [h, ffn / tp]

    def __init__(self, w1: Tensor, w2: Tensor, sequence_parallel: bool) -> None:
        super().__init__()
        self.w1 = nn.Parameter(w1)
        self.w2 = nn.Parameter(w2)
        self.sequence_parallel = sequence_parallel

    def forward(self, hidden: Hidden) -> Hidden:
        if self.sequence_parallel:
            total = spmd.all_gather(hidden, "tp", src=S(0), dst=R)
        else:
            total = spmd.convert(hidden, "tp", src=I, dst=R)
        inner = torch.tanh(F.linear(total, self.w1))
        partial = spmd.reinterpret(F.linear(inner, self.w2), "tp", src=V, dst=P)
        if self.sequence_parallel:
            return spmd.reduce_scatter(partial, "tp", src=P, dst=S(0))
        return spmd.all_reduce(partial, "tp", src=P, dst=I)


def get_tensor_model_parallel_world_size() -> int:
    mesh = spmd.current_mesh()
    assert mesh is not None
    return mesh["tp"].size()


@spmd.configurations(get_tensor_model_parallel_world_size=spmd.axis_size("tp", 1, 2))
def reduce_from_tensor_model_parallel_region(x: Annotated[Tensor, Spmd(tp=P)]) -> Annotated[Tensor, Spmd(tp=I)]:
    if get_tensor_model_parallel_world_size() == 1:
        return x  # one rank: the sum over tp is x itself, in forward and backward
    return spmd.all_reduce(x, "tp", src=P, dst=I)
