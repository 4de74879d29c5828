"""Megatron-core style transformer layer on the parallel linears.

The residual stream is I on tp, or with sequence parallelism this rank's
chunk of the sequence (S(0)).  Layer norms under SP see only this rank's
tokens, so their weights' gradients are partial over tp: Megatron marks them
`sequence_parallel` and sums them after backward; typed code converts the
weight I -> R where it is used, whose backward is that sum.
"""

from __future__ import annotations

import math
from typing import Annotated, List, Optional, TypeVar, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, R, S, Spmd, V

from .megatron_layers import ColumnParallelLinear, RowParallelLinear, divide
from .megatron_mappings import scatter_to_sequence_parallel_region
from .megatron_vocab import VocabParallelEmbedding, parallel_lm_logits
from .parallel_state import get_tensor_model_parallel_world_size

# One layout per model, S(0) with sequence_parallel: a type variable with values.
Residual = TypeVar("Residual", Annotated[Tensor, Spmd(tp=I)], Annotated[Tensor, Spmd(tp=S(0))])
AnyResidual = Union[Annotated[Tensor, Spmd(tp=I)], Annotated[Tensor, Spmd(tp=S(0))]]
NormWeight = Annotated[Tensor, Spmd(tp=I)]


class SequenceParallelLayerNorm(nn.Module):
    """LayerNorm whose weights are I on tp; under SP they are used through convert(I -> R)."""

    weight: NormWeight
    bias: NormWeight

    def __init__(self, hidden_size: int, eps: float = 1e-5, sequence_parallel: bool = False) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.eps = eps
        self.sequence_parallel = sequence_parallel
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))

    def forward(self, x: Residual) -> Residual:
        if self.sequence_parallel:
            spmd.assert_spmd(x, Spmd(tp=S(0)))
            weight = spmd.convert(self.weight, "tp", src=I, dst=R)
            bias = spmd.convert(self.bias, "tp", src=I, dst=R)
            return F.layer_norm(x, (self.hidden_size,), weight, bias, self.eps)
        spmd.assert_spmd(x, Spmd(tp=I))
        return F.layer_norm(x, (self.hidden_size,), self.weight, self.bias, self.eps)


def add_row_bias(output: Residual, bias: Optional[NormWeight], sequence_parallel: bool) -> Residual:
    """The bias add a row-parallel layer left to its caller (skip_bias_add); under SP
    each rank holds only its tokens, so the bias is used through convert(I -> R)."""
    if bias is None:
        return output
    if sequence_parallel:
        spmd.assert_spmd(output, Spmd(tp=S(0)))
        return output + spmd.convert(bias, "tp", src=I, dst=R)
    spmd.assert_spmd(output, Spmd(tp=I))
    return output + bias


class ParallelMLP(nn.Module):
    """h -> 4h column-parallel, gelu, 4h -> h row-parallel; the biases fused by the caller."""

    def __init__(self, hidden_size: int, ffn_hidden_size: int, sequence_parallel: bool = False) -> None:
        super().__init__()
        self.sequence_parallel = sequence_parallel
        self.linear_fc1 = ColumnParallelLinear(
            hidden_size, ffn_hidden_size, gather_output=False, skip_bias_add=True,
            sequence_parallel=sequence_parallel,
        )
        self.linear_fc2 = RowParallelLinear(
            ffn_hidden_size, hidden_size, input_is_parallel=True, skip_bias_add=True,
            sequence_parallel=sequence_parallel,
        )

    def forward(self, hidden_states: Residual) -> Residual:
        intermediate, bias_parallel = self.linear_fc1(hidden_states)
        intermediate = spmd.assert_spmd(intermediate, Spmd(tp=S(-1)))  # gather_output=False
        if bias_parallel is not None:
            intermediate = intermediate + bias_parallel
        intermediate = F.gelu(intermediate)
        output, output_bias = self.linear_fc2(intermediate)
        output = spmd.assert_like(output, hidden_states)
        return add_row_bias(output, output_bias, self.sequence_parallel)


class CoreAttention(nn.Module):
    """Softmax attention over this rank's heads: [s, b, np, hn] in, [s, b, np * hn] out."""

    def __init__(self, head_dim: int, attention_dropout: float = 0.0) -> None:
        super().__init__()
        self.norm_factor = math.sqrt(head_dim)
        self.dropout = nn.Dropout(attention_dropout)

    def forward(
        self,
        query: Annotated[Tensor, Spmd(tp=V)],
        key: Annotated[Tensor, Spmd(tp=V)],
        value: Annotated[Tensor, Spmd(tp=V)],
    ) -> Annotated[Tensor, Spmd(tp=S(-1))]:
        seq, batch, heads, head_dim = query.shape
        q = query.permute(1, 2, 0, 3)  # [b, np, s, hn]
        k = key.permute(1, 2, 3, 0)  # [b, np, hn, s]
        v = value.permute(1, 2, 0, 3)
        scores = torch.matmul(q, k) / self.norm_factor
        causal = torch.ones(seq, seq, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        probs = self.dropout(F.softmax(scores, dim=-1))
        context = torch.matmul(probs, v)  # [b, np, s, hn]
        return context.permute(2, 0, 1, 3).reshape(seq, batch, heads * head_dim)


class ParallelAttention(nn.Module):
    """Fused QKV column-parallel (whole heads per rank), output row-parallel."""

    def __init__(self, hidden_size: int, num_heads: int, sequence_parallel: bool = False) -> None:
        super().__init__()
        world_size = get_tensor_model_parallel_world_size()
        self.head_dim = divide(hidden_size, num_heads)
        self.num_heads_per_partition = divide(num_heads, world_size)
        self.sequence_parallel = sequence_parallel
        self.linear_qkv = ColumnParallelLinear(
            hidden_size, 3 * hidden_size, gather_output=False, sequence_parallel=sequence_parallel
        )
        self.core_attention = CoreAttention(self.head_dim)
        self.linear_proj = RowParallelLinear(
            hidden_size, hidden_size, input_is_parallel=True, skip_bias_add=True,
            sequence_parallel=sequence_parallel,
        )

    def forward(self, hidden_states: Residual) -> Residual:
        mixed_qkv, _ = self.linear_qkv(hidden_states)
        mixed_qkv = spmd.assert_spmd(mixed_qkv, Spmd(tp=S(-1)))  # gather_output=False
        seq, batch, _ = mixed_qkv.shape
        mixed_qkv = mixed_qkv.view(seq, batch, self.num_heads_per_partition, 3 * self.head_dim)
        query, key, value = torch.split(mixed_qkv, self.head_dim, dim=3)
        context = self.core_attention(query, key, value)
        output, bias = self.linear_proj(context)
        output = spmd.assert_like(output, hidden_states)
        return add_row_bias(output, bias, self.sequence_parallel)


class TransformerLayer(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, ffn_hidden_size: int, sequence_parallel: bool) -> None:
        super().__init__()
        self.input_layernorm = SequenceParallelLayerNorm(hidden_size, sequence_parallel=sequence_parallel)
        self.self_attention = ParallelAttention(hidden_size, num_heads, sequence_parallel)
        self.pre_mlp_layernorm = SequenceParallelLayerNorm(hidden_size, sequence_parallel=sequence_parallel)
        self.mlp = ParallelMLP(hidden_size, ffn_hidden_size, sequence_parallel)
        self.hidden_dropout = 0.0

    def forward(self, hidden_states: Residual) -> Residual:
        residual = hidden_states
        attention_output = self.self_attention(self.input_layernorm(hidden_states))
        hidden_states = residual + F.dropout(attention_output, p=self.hidden_dropout, training=self.training)
        residual = hidden_states
        mlp_output = self.mlp(self.pre_mlp_layernorm(hidden_states))
        return residual + mlp_output


class GPTModel(nn.Module):
    def __init__(
        self, vocab_size: int, hidden_size: int, num_layers: int, num_heads: int, sequence_parallel: bool = False
    ) -> None:
        super().__init__()
        self.sequence_parallel = sequence_parallel
        self.embedding = VocabParallelEmbedding(vocab_size, hidden_size)
        self.layers = nn.ModuleList(
            [TransformerLayer(hidden_size, num_heads, 4 * hidden_size, sequence_parallel) for _ in range(num_layers)]
        )
        self.final_layernorm = SequenceParallelLayerNorm(hidden_size, sequence_parallel=sequence_parallel)

    def forward(
        self, input_ids: Annotated[Tensor, Spmd(tp=I, nograd=True)]
    ) -> Annotated[Tensor, Spmd(tp=S(-1))]:
        embeddings = self.embedding(input_ids)  # [s, b, h]
        hidden: AnyResidual = embeddings
        if self.sequence_parallel:
            hidden = scatter_to_sequence_parallel_region(embeddings)
        for layer in self.layers:
            hidden = layer(hidden)
        hidden = self.final_layernorm(hidden)
        if self.sequence_parallel:
            hidden = spmd.assert_spmd(hidden, Spmd(tp=S(0)))
            hidden = spmd.all_gather(hidden, "tp", src=S(0), dst=I)
        else:
            hidden = spmd.assert_spmd(hidden, Spmd(tp=I))
        return parallel_lm_logits(hidden, self.embedding.weight)


def sequence_parallel_grad_params(model: nn.Module) -> List[nn.Parameter]:
    """The parameters whose gradients Megatron sums over tp after backward (raw form)."""
    return [p for p in model.parameters() if getattr(p, "sequence_parallel", False)]


def shared_embedding_or_none(model: GPTModel) -> Optional[Tensor]:
    return model.embedding.weight if model.embedding is not None else None
