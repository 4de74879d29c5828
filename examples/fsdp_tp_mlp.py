"""FSDP over dp combined with tensor parallelism over tp (torchtitan's 2-D layout).

Each weight is first split for tensor parallelism (column-parallel w_in and
b_in on dim 0, row-parallel w_out on dim 1), then each tp shard is split
again over dp along dim 0 for storage: S(0) on dp.  The optimizer sees only
the dp shards.

For compute, every weight is gathered over dp with
`all_gather(S(0) -> R)`.  R is JAX's "Reduced" state (`dst=Reduced` is the
same call; `vocabulary = jax` in [spmd_mypy] writes messages in those words):
the same value on every dp rank, whose gradient is Partial (JAX's
"Unreduced"), because each dp rank computes with its own part of the batch.  So the backward of this gather is
`reduce_scatter(P -> S(0))`: each rank receives the sum over dp of its own
shard's gradient, the communication FSDP does, and no separate gradient
all-reduce is needed.  (dst=I would give a backward that only splits the
local gradient: the other dp ranks' contributions would be lost; the checker
reports the I weight mixed with the batch-sharded activation.)  Measured in
bench/bench_fsdp.py: this backward sends half the bytes of the naive
all_gather(S(0) -> I) + convert(I -> R), whose backward all-reduces the whole
weight gradient and then slices it.

`build_mlp` makes a rank's module from the full weights and the rank's mesh
coordinates; `train_step` runs forward, a mean-squared loss over the global
batch and backward.
"""

from __future__ import annotations

from typing import Annotated, Dict, Tuple

import torch.nn.functional as F
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

Activation = Annotated[Tensor, Spmd(dp=S(0), tp=I)]  # [batch / dp, seq, hidden]


class FullyShardedParallelMLP(nn.Module):
    w_in: Annotated[Tensor, Spmd(dp=S(0), tp=S(0))]  # [ffn / tp / dp, hidden]
    b_in: Annotated[Tensor, Spmd(dp=S(0), tp=S(0))]  # [ffn / tp / dp]
    w_out: Annotated[Tensor, Spmd(dp=S(0), tp=S(1))]  # [hidden / dp, ffn / tp]
    b_out: Annotated[Tensor, Spmd(dp=S(0), tp=I)]  # [hidden / dp]

    def __init__(self, w_in: Tensor, b_in: Tensor, w_out: Tensor, b_out: Tensor, dp_rank: int, dp: int) -> None:
        super().__init__()
        self.w_in = nn.Parameter(w_in)
        self.b_in = nn.Parameter(b_in)
        self.w_out = nn.Parameter(w_out)
        self.b_out = nn.Parameter(b_out)
        self.dp_rank = dp_rank  # which dp shard this rank stores
        self.dp = dp

    def forward(self, x: Activation) -> Activation:
        # Unshard for compute; each backward is a reduce-scatter over dp.
        w_in = spmd.all_gather(self.w_in, "dp", src=S(0), dst=R)
        b_in = spmd.all_gather(self.b_in, "dp", src=S(0), dst=R)
        w_out = spmd.all_gather(self.w_out, "dp", src=S(0), dst=R)
        b_out = spmd.all_gather(self.b_out, "dp", src=S(0), dst=R)

        h = spmd.convert(x, "tp", src=I, dst=R)  # copy-to-region
        h = F.gelu(F.linear(h, w_in, b_in))
        out = spmd.reinterpret(F.linear(h, w_out), "tp", src=V, dst=P)
        out = spmd.all_reduce(out, "tp", src=P, dst=I)  # reduce-from-region
        return out + b_out


def build_mlp(full: Dict[str, Tensor], dp_rank: int, tp_rank: int, dp: int, tp: int) -> FullyShardedParallelMLP:
    """This rank's module from the full weights (nn.Linear layout: [out, in]).

    w_in, b_in: tp chunk `tp_rank` of dim 0, then dp chunk `dp_rank` of dim 0
    of that.  w_out: tp chunk of dim 1, dp chunk of dim 0.  b_out: dp chunk.
    """

    def shard(t: Tensor, tp_dim: int) -> Tensor:
        if tp_dim >= 0:
            t = t.chunk(tp, dim=tp_dim)[tp_rank]
        return t.chunk(dp, dim=0)[dp_rank].clone()

    return FullyShardedParallelMLP(
        shard(full["w_in"], 0), shard(full["b_in"], 0), shard(full["w_out"], 1), shard(full["b_out"], -1),
        dp_rank, dp,
    )


def mse_loss(out: Activation, target: Activation, global_numel: int) -> Annotated[Tensor, Spmd(dp=P, tp=I)]:
    """Mean squared error over the global batch: this dp rank's addend of it."""
    local = ((out - target) ** 2).sum() / global_numel
    return spmd.reinterpret(local, "dp", src=V, dst=P)


def train_step(
    mlp: FullyShardedParallelMLP, x: Activation, target: Activation, global_numel: int
) -> Tuple[Activation, Annotated[Tensor, Spmd(dp=I, tp=I)]]:
    """Forward, loss and backward: the gradients arrive as summed dp shards."""
    out = mlp(x)
    loss = mse_loss(out, target, global_numel)
    loss.backward()
    return out, spmd.all_reduce(loss.detach(), "dp", src=P, dst=I)
