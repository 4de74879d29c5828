"""picotron style tensor parallelism: a global process-group manager, simple column/row linears.

Layers read the tp group, rank and size from the manager (parallel_state.pgm());
the Llama model is built unsharded and `apply_tensor_parallel` swaps its
linears and embedding for the parallel ones with setattr.  The residual
stream is [batch, seq, hidden], I on tp.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

from .parallel_state import pgm

Invariant = Annotated[Tensor, Spmd(tp=I)]
Sharded = Annotated[Tensor, Spmd(tp=S(-1))]
RopeTable = Annotated[Tensor, Spmd(tp=R, nograd=True)]  # [1, seq, 1, head_dim]


class CopyToModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tensor:
        if pgm().tp_world_size == 1:
            return grad_output
        dist.all_reduce(grad_output, op=dist.ReduceOp.SUM, group=pgm().tp_group)
        return grad_output


class ReduceFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        if pgm().tp_world_size == 1:
            return x
        dist.all_reduce(x, op=dist.ReduceOp.SUM, group=pgm().tp_group)
        return x

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tensor:
        return grad_output


class GatherFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        world = pgm().tp_world_size
        if world == 1:
            return x
        pieces = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(pieces, x.contiguous(), group=pgm().tp_group)
        return torch.cat(pieces, dim=-1).contiguous()

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tensor:
        world = pgm().tp_world_size
        if world == 1:
            return grad_output
        return torch.chunk(grad_output, world, dim=-1)[pgm().tp_rank].contiguous()


# The Functions as trusted boundaries: the types of what they do, declared once.
copy_to_model_parallel_region = spmd.trusted(
    CopyToModelParallelRegion.apply, in_types=(Spmd(tp=I),), out_types=Spmd(tp=R)
)
reduce_from_model_parallel_region = spmd.trusted(
    ReduceFromModelParallelRegion.apply, in_types=(Spmd(tp=P),), out_types=Spmd(tp=I)
)
gather_from_model_parallel_region = spmd.trusted(
    GatherFromModelParallelRegion.apply, in_types=(Spmd(tp=S(-1)),), out_types=Spmd(tp=I)
)


class ColumnParallelLinear(nn.Module):
    """picotron's column linear: weight [out / tp, in]; gather_output returns the whole last dim."""

    weight: Annotated[Tensor, Spmd(tp=S(0))]
    bias: Annotated[Tensor, Spmd(tp=S(0))]

    def __init__(self, in_features: int, out_features: int, bias: bool = False, gather_output: bool = False) -> None:
        super().__init__()
        self.tp_world_size = pgm().tp_world_size
        self.tp_rank = pgm().tp_rank
        self.in_features = in_features
        self.output_size_per_partition = out_features // self.tp_world_size
        self.gather_output = gather_output
        self.weight = nn.Parameter(torch.empty(self.output_size_per_partition, in_features))
        self.use_bias = bias
        self.bias = nn.Parameter(torch.zeros(self.output_size_per_partition))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features)
        nn.init.uniform_(self.weight, -bound, bound)

    def forward(self, x: Invariant) -> Sharded:
        input_parallel = copy_to_model_parallel_region(x)
        output = F.linear(input_parallel, self.weight, self.bias if self.use_bias else None)
        return output

    def forward_gathered(self, x: Invariant) -> Invariant:
        """gather_output=True: the whole last dim on every rank (I: its gradient is split back)."""
        output = self.forward(x)
        return gather_from_model_parallel_region(output)


class RowParallelLinear(nn.Module):
    """picotron's row linear: weight [out, in / tp]; input already sharded on the last dim."""

    weight: Annotated[Tensor, Spmd(tp=S(1))]
    bias: Invariant

    def __init__(self, in_features: int, out_features: int, bias: bool = False) -> None:
        super().__init__()
        self.tp_world_size = pgm().tp_world_size
        self.input_size_per_partition = in_features // self.tp_world_size
        self.weight = nn.Parameter(torch.empty(out_features, self.input_size_per_partition))
        self.use_bias = bias
        self.bias = nn.Parameter(torch.zeros(out_features))
        nn.init.uniform_(self.weight, -1.0 / math.sqrt(in_features), 1.0 / math.sqrt(in_features))

    def forward(self, x: Sharded) -> Invariant:
        output_parallel = F.linear(x, self.weight)
        output = reduce_from_model_parallel_region(spmd.reinterpret(output_parallel, "tp", src=V, dst=P))
        return output + self.bias if self.use_bias else output


class TypedRowParallelLinear(RowParallelLinear):
    """The same layer as a user migrating to typed collectives writes it."""

    def forward(self, x: Sharded) -> Invariant:
        partial = spmd.reinterpret(F.linear(x, self.weight), "tp", src=V, dst=P)
        output = spmd.all_reduce(partial, "tp", src=P, dst=I)
        return output + self.bias if self.use_bias else output


class VocabParallelEmbedding(nn.Module):
    weight: Annotated[Tensor, Spmd(tp=S(0))]

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        per_partition = num_embeddings // pgm().tp_world_size
        self.vocab_start_index = pgm().tp_rank * per_partition
        self.vocab_end_index = self.vocab_start_index + per_partition
        self.weight = nn.Parameter(torch.empty(per_partition, embedding_dim))
        nn.init.normal_(self.weight)

    def forward(self, x: Annotated[Tensor, Spmd(tp=I, nograd=True)]) -> Invariant:
        input_mask = (x < self.vocab_start_index) | (x >= self.vocab_end_index)
        masked_input = x.clone() - self.vocab_start_index
        masked_input[input_mask] = 0
        output_parallel = F.embedding(masked_input, self.weight)
        output_parallel[input_mask, :] = 0.0
        partial = spmd.reinterpret(output_parallel, "tp", src=V, dst=P)
        return spmd.all_reduce(partial, "tp", src=P, dst=I)


def apply_rotary_emb(x: Annotated[Tensor, Spmd(tp=V)], cos: RopeTable, sin: RopeTable) -> Annotated[Tensor, Spmd(tp=V)]:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos + rotated * sin


def rotary_tables(seq: int, head_dim: int, base: float = 10000.0) -> Tuple[RopeTable, RopeTable]:
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]


class Attention(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int) -> None:
        super().__init__()
        self.num_local_heads = num_heads // pgm().tp_world_size
        self.head_dim = hidden_size // num_heads
        self.q_proj = ColumnParallelLinear(hidden_size, hidden_size)
        self.k_proj = ColumnParallelLinear(hidden_size, hidden_size)
        self.v_proj = ColumnParallelLinear(hidden_size, hidden_size)
        self.out_proj = TypedRowParallelLinear(hidden_size, hidden_size)

    def forward(self, x: Invariant, cos: RopeTable, sin: RopeTable) -> Invariant:
        batch, seq, _ = x.shape
        q = self.q_proj(x).view(batch, seq, self.num_local_heads, self.head_dim)
        k = self.k_proj(x).view(batch, seq, self.num_local_heads, self.head_dim)
        v = self.v_proj(x).view(batch, seq, self.num_local_heads, self.head_dim)
        q, k = apply_rotary_emb(q, cos, sin), apply_rotary_emb(k, cos, sin)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        out = out.transpose(1, 2).reshape(batch, seq, self.num_local_heads * self.head_dim)
        return self.out_proj(out)


class MLP(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        super().__init__()
        self.up_proj = ColumnParallelLinear(hidden_size, intermediate_size)
        self.gate_proj = ColumnParallelLinear(hidden_size, intermediate_size)
        self.down_proj = TypedRowParallelLinear(intermediate_size, hidden_size)

    def forward(self, x: Invariant) -> Invariant:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class RMSNorm(nn.Module):
    weight: Invariant

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x: Invariant) -> Invariant:
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class DecoderLayer(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(hidden_size)
        self.attention = Attention(hidden_size, num_heads)
        self.post_attention_layernorm = RMSNorm(hidden_size)
        self.mlp = MLP(hidden_size, intermediate_size)

    def forward(self, x: Invariant, cos: RopeTable, sin: RopeTable) -> Invariant:
        x = x + self.attention(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, vocab_size: int, hidden_size: int, num_layers: int, num_heads: int, max_seq: int) -> None:
        super().__init__()
        self.embedding = VocabParallelEmbedding(vocab_size, hidden_size)
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(hidden_size, num_heads, 4 * hidden_size) for _ in range(num_layers)]
        )
        self.final_norm = RMSNorm(hidden_size)
        self.final_proj = ColumnParallelLinear(hidden_size, vocab_size, gather_output=True)
        self.max_seq = max_seq
        self.head_dim = hidden_size // num_heads

    def forward(self, input_ids: Annotated[Tensor, Spmd(tp=I, nograd=True)]) -> Invariant:
        cos, sin = rotary_tables(input_ids.shape[1], self.head_dim)
        x = self.embedding(input_ids)
        for layer in self.decoder_layers:
            x = layer(x, cos, sin)
        return self.final_proj.forward_gathered(self.final_norm(x))


def train_step(model: Llama, input_ids: Annotated[Tensor, Spmd(tp=I, nograd=True)],
               target_ids: Annotated[Tensor, Spmd(tp=I, nograd=True)]) -> float:
    """Logits gathered on every tp rank (I), loss I: backward is right on every rank."""
    logits = model(input_ids)
    loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), target_ids.view(-1))
    loss.backward()
    return loss.item()


def apply_tensor_parallel(model: nn.Module, hidden_size: int) -> nn.Module:
    """Swap the attention and MLP linears of an unsharded model for the parallel ones."""
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.Linear) and name.endswith(("q_proj", "k_proj", "v_proj", "up_proj", "gate_proj")):
            parent_name, _, attr = name.rpartition(".")
            setattr(model.get_submodule(parent_name), attr, ColumnParallelLinear(module.in_features, module.out_features))
        elif isinstance(module, nn.Linear) and name.endswith(("out_proj", "down_proj")):
            parent_name, _, attr = name.rpartition(".")
            setattr(model.get_submodule(parent_name), attr, RowParallelLinear(module.in_features, module.out_features))
    return model
