"""A tensor-parallel transformer block written against megatron-core's API
(fresh, in Megatron's style): column-parallel QKV and up projections,
row-parallel output projections, the sequence-parallel variant declared on
its layers, and the mapping functions around a hand-written attention core."""

from __future__ import annotations

from typing import Annotated, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

import spmd_mypy as spmd
from spmd_mypy import I, P, S, Spmd, V
from megatron.core import tensor_parallel
from megatron.core.tensor_parallel import (
    ColumnParallelLinear,
    RowParallelLinear,
    copy_to_tensor_model_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
)
from megatron.core.transformer import TransformerConfig

Hidden = Annotated[Tensor, Spmd(tp=I)]
SeqShard = Annotated[Tensor, Spmd(tp=S(0))]


def _init(weight: Tensor) -> None:
    torch.nn.init.normal_(weight, std=0.02)


class CoreAttention(torch.nn.Module):
    """Attention over this rank's heads: q, k, v are V (split by head)."""

    def forward(
        self, q: Annotated[Tensor, Spmd(tp=V)], k: Annotated[Tensor, Spmd(tp=V)], v: Annotated[Tensor, Spmd(tp=V)]
    ) -> Annotated[Tensor, Spmd(tp=V)]:
        scores = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        return scores @ v


class ParallelAttention(torch.nn.Module):
    def __init__(self, hidden: int, config: object) -> None:
        super().__init__()
        self.qkv = ColumnParallelLinear(hidden, 3 * hidden, config=config, init_method=_init, gather_output=False)
        self.proj: RowParallelLinear[Literal[True], Literal[False]] = RowParallelLinear(
            hidden, hidden, config=config, init_method=_init, bias=True, input_is_parallel=True, skip_bias_add=False
        )
        self.core = CoreAttention()

    def forward(self, x: Hidden) -> Hidden:
        qkv, _ = self.qkv(x)
        q, k, v = qkv.chunk(3, dim=-1)
        context = self.core(q, k, v)
        out, _ = self.proj(context)
        return out


class ParallelMLP(torch.nn.Module):
    """The MLP with explicit weights and Megatron's mapping functions."""

    def __init__(self, w_in: Annotated[Tensor, Spmd(tp=S(0))], w_out: Annotated[Tensor, Spmd(tp=S(1))]) -> None:
        super().__init__()
        self.w_in = w_in
        self.w_out = w_out

    def forward(self, x: Hidden) -> Hidden:
        h = copy_to_tensor_model_parallel_region(x)
        h = F.gelu(F.linear(h, self.w_in))
        partial = spmd.reinterpret(F.linear(h, self.w_out), "tp", src=V, dst=P)
        return reduce_from_tensor_model_parallel_region(partial)


class SequenceParallelMLP(torch.nn.Module):
    def __init__(self, hidden: int, config: TransformerConfig) -> None:
        super().__init__()
        self.activation_func = config.activation_func  # megatron's MLP: the config's activation
        self.fc1 = ColumnParallelLinear(hidden, 4 * hidden, config=config, init_method=_init, gather_output=False)
        self.w_out: Annotated[Tensor, Spmd(tp=S(1))] = torch.nn.Parameter(torch.empty(hidden, 4 * hidden))

    def forward(self, x: SeqShard) -> SeqShard:
        full = tensor_parallel.gather_from_sequence_parallel_region(x)
        h = full.detach()
        h = spmd.assert_spmd(h, Spmd(tp=I))
        inner, _ = self.fc1(h)
        partial = spmd.reinterpret(F.linear(self.activation_func(inner), self.w_out), "tp", src=V, dst=P)
        return tensor_parallel.reduce_scatter_to_sequence_parallel_region(partial)


def logits_for_loss(h: Hidden, w_vocab: Annotated[Tensor, Spmd(tp=S(0))]) -> Hidden:
    """An output layer gathering the vocab-parallel logits (Megatron's gather_output)."""
    local = F.linear(copy_to_tensor_model_parallel_region(h), w_vocab)
    return gather_from_tensor_model_parallel_region(local)
