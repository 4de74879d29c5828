"""nanotron style decoder: GLU MLP, attention with local heads, RMSNorm, ModuleList of layers.

Every module gets the tp ProcessGroup and the TP mode; the residual stream
is [tokens, hidden], I in ALL_REDUCE mode and S(0) in REDUCE_SCATTER mode.
RMSNorm weights are I on tp; in REDUCE_SCATTER mode they are used through
convert(I -> R) because each rank sees only its tokens.
"""

from __future__ import annotations

from typing import Annotated, Callable, Dict, Optional, TypeVar, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributed import ProcessGroup

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

from .nanotron_tp import (
    TensorParallelColumnLinear,
    TensorParallelEmbedding,
    TensorParallelLinearMode,
    TensorParallelRowLinear,
    TpGroup,
)

# One layout per model, chosen by the TP mode: a type variable with values.
Stream = TypeVar("Stream", Annotated[Tensor, Spmd(tp=I)], Annotated[Tensor, Spmd(tp=S(0))])
AnyStream = Union[Annotated[Tensor, Spmd(tp=I)], Annotated[Tensor, Spmd(tp=S(0))]]
Local = Annotated[Tensor, Spmd(tp=S(-1))]


class TritonRMSNorm(nn.Module):
    """Named after nanotron's fused norm; plain torch here."""

    weight: Annotated[Tensor, Spmd(tp=I)]

    def __init__(self, hidden_size: int, mode: TensorParallelLinearMode, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.mode = mode
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, hidden_states: Stream) -> Stream:
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        normed = hidden_states * torch.rsqrt(variance + self.eps)
        if self.mode is TensorParallelLinearMode.REDUCE_SCATTER:
            spmd.assert_spmd(hidden_states, Spmd(tp=S(0)))
            return normed * spmd.convert(self.weight, "tp", src=I, dst=R)
        spmd.assert_spmd(hidden_states, Spmd(tp=I))
        return normed * self.weight


# nanotron picks the activation by the config's name (its ACT2FN); the value
# is declared an elementwise activation, so its calls are typed as F.silu's.
ACT2FN: Dict[str, Callable[[Tensor], Tensor]] = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu}


class GLUActivation(nn.Module):
    def __init__(self, act_fn_name: str) -> None:
        super().__init__()
        self.act: spmd.Activation = ACT2FN[act_fn_name]

    def forward(self, merged_states: Local) -> Local:
        gate_states, up_states = torch.split(merged_states, merged_states.shape[-1] // 2, dim=-1)
        return self.act(gate_states) * up_states


class MLP(nn.Module):
    def __init__(
        self,
        hidden_size: int,
        intermediate_size: int,
        tp_pg: ProcessGroup,
        tp_mode: TensorParallelLinearMode,
        hidden_act: str = "silu",
    ) -> None:
        super().__init__()
        self.gate_up_proj = TensorParallelColumnLinear(hidden_size, 2 * intermediate_size, pg=tp_pg, mode=tp_mode, bias=False)
        self.down_proj = TensorParallelRowLinear(intermediate_size, hidden_size, pg=tp_pg, mode=tp_mode, bias=False)
        self.split_silu_mul = GLUActivation(hidden_act)

    def forward(self, hidden_states: Stream) -> Stream:
        merged_states = self.gate_up_proj(hidden_states)
        hidden_states = spmd.assert_like(self.down_proj(self.split_silu_mul(merged_states)), hidden_states)
        return hidden_states


class CausalSelfAttention(nn.Module):
    def __init__(
        self, hidden_size: int, num_heads: int, tp_pg: ProcessGroup, tp_mode: TensorParallelLinearMode
    ) -> None:
        super().__init__()
        tp_size = tp_pg.size()
        if num_heads % tp_size != 0:
            raise ValueError(f"{num_heads} heads are not divisible by tp {tp_size}")
        self.local_heads = num_heads // tp_size
        self.head_dim = hidden_size // num_heads
        self.qkv_proj = TensorParallelColumnLinear(hidden_size, 3 * hidden_size, pg=tp_pg, mode=tp_mode, bias=False)
        self.o_proj = TensorParallelRowLinear(hidden_size, hidden_size, pg=tp_pg, mode=tp_mode, bias=False)

    def forward(self, hidden_states: Stream, batch_size: int) -> Stream:
        qkv = self.qkv_proj(hidden_states)  # [batch * seq, 3 * local heads * head_dim]
        seq = qkv.shape[0] // batch_size
        qkv = qkv.view(batch_size, seq, 3, self.local_heads, self.head_dim)
        query, key, value = qkv.unbind(dim=2)
        attn = F.scaled_dot_product_attention(
            query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), is_causal=True
        )
        attn = attn.transpose(1, 2).reshape(batch_size * seq, self.local_heads * self.head_dim)
        return spmd.assert_like(self.o_proj(attn), hidden_states)


class LlamaDecoderLayer(nn.Module):
    def __init__(
        self, hidden_size: int, num_heads: int, intermediate_size: int, tp_pg: ProcessGroup,
        tp_mode: TensorParallelLinearMode,
    ) -> None:
        super().__init__()
        self.input_layernorm = TritonRMSNorm(hidden_size, tp_mode)
        self.attn = CausalSelfAttention(hidden_size, num_heads, tp_pg, tp_mode)
        self.post_attention_layernorm = TritonRMSNorm(hidden_size, tp_mode)
        self.mlp = MLP(hidden_size, intermediate_size, tp_pg, tp_mode)

    def forward(self, hidden_states: Stream, batch_size: int) -> Stream:
        residual = hidden_states
        hidden_states = self.attn(self.input_layernorm(hidden_states), batch_size)
        hidden_states = hidden_states + residual
        residual = hidden_states
        hidden_states = self.mlp(self.post_attention_layernorm(hidden_states))
        return hidden_states + residual


class LlamaModel(nn.Module):
    def __init__(
        self, vocab_size: int, hidden_size: int, num_layers: int, num_heads: int, tp_pg: TpGroup,
        tp_mode: TensorParallelLinearMode = TensorParallelLinearMode.ALL_REDUCE,
    ) -> None:
        super().__init__()
        self.tp_pg = tp_pg
        self.tp_mode = tp_mode
        self.token_embedding = TensorParallelEmbedding(vocab_size, hidden_size, pg=tp_pg)
        self.decoder = nn.ModuleList(
            [LlamaDecoderLayer(hidden_size, num_heads, 4 * hidden_size, tp_pg, tp_mode) for _ in range(num_layers)]
        )
        self.final_layer_norm = TritonRMSNorm(hidden_size, tp_mode)
        self.lm_head = TensorParallelColumnLinear(hidden_size, vocab_size, pg=tp_pg, mode=tp_mode, bias=False)

    def forward(self, input_ids: Annotated[Tensor, Spmd(tp=I, nograd=True)]) -> Local:
        batch_size, seq = input_ids.shape
        embeds = self.token_embedding(input_ids.view(-1))  # [batch * seq, hidden]
        hidden_states: AnyStream = embeds
        if self.tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
            hidden_states = spmd.convert(embeds, self.tp_pg, src=I, dst=S(0))
        for layer in self.decoder:
            hidden_states = layer(hidden_states, batch_size)
        return self.lm_head(self.final_layer_norm(hidden_states))


def sharded_cross_entropy(
    sharded_logits: Local, target: Annotated[Tensor, Spmd(tp=I, nograd=True)], tp_pg: TpGroup
) -> Annotated[Tensor, Spmd(tp=I)]:
    """Cross-entropy over vocabulary-sharded logits; returns the mean token loss."""
    logits_max = spmd.all_gather(sharded_logits.detach().amax(dim=-1, keepdim=True), tp_pg, src=S(-1), dst=I)
    shifted = sharded_logits - logits_max.amax(dim=-1, keepdim=True)
    local_vocab = shifted.shape[-1]
    start = torch.distributed.get_rank(tp_pg) * local_vocab
    in_range = (target >= start) & (target < start + local_vocab)
    local_target = torch.where(in_range, target - start, torch.zeros_like(target))
    picked = shifted.gather(-1, local_target.unsqueeze(-1)).squeeze(-1) * in_range
    target_logit = spmd.all_reduce(spmd.reinterpret(picked, tp_pg, src=V, dst=P), tp_pg, src=P, dst=I)
    local_sum = shifted.exp().sum(dim=-1)
    sum_exp = spmd.all_reduce(spmd.reinterpret(local_sum, tp_pg, src=V, dst=P), tp_pg, src=P, dst=I)
    return (sum_exp.log() - target_logit).mean()


def tied_embedding_grad_sync(model: LlamaModel, pg: Optional[ProcessGroup]) -> None:
    """Raw sync of a tied weight's gradient (no tie declared: outside the types)."""
    grad = model.token_embedding.weight.grad
    if grad is not None and pg is not None:
        torch.distributed.all_reduce(grad, group=pg)
