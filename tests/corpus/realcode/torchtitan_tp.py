"""torchtitan style TP + SP transformer block on a DeviceMesh with named dims dp and tp.

Activations are [batch, seq, hidden]: the batch is split over dp (S(0));
between the tp regions the sequence is split over tp (S(1), sequence
parallelism).  Inside attention and the feed-forward the full sequence is
gathered (all_gather S(1) -> R, backward reduce-scatter) and the results of
the row-parallel projections are reduce-scattered back (P -> S(1)).
Norm weights are I on tp and R on dp; every parameter is R on dp, its
gradient a pending sum that `sync_dp_grads` reduces after backward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, List, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributed.device_mesh import DeviceMesh

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

SeqShard = Annotated[Tensor, Spmd(dp=S(0), tp=S(1))]  # [batch / dp, seq / tp, hidden]
Gathered = Annotated[Tensor, Spmd(dp=S(0), tp=R)]  # [batch / dp, seq, hidden]
Heads = Annotated[Tensor, Spmd(dp=S(0), tp=S(2))]  # [batch / dp, seq, local heads, head_dim]
ColWeight = Annotated[Tensor, Spmd(dp=R, tp=S(0))]  # [out / tp, in]
RowWeight = Annotated[Tensor, Spmd(dp=R, tp=S(1))]  # [out, in / tp]
NormWeight = Annotated[Tensor, Spmd(dp=R, tp=I)]


@dataclass
class ModelArgs:
    dim: int = 256
    n_layers: int = 2
    n_heads: int = 8
    vocab_size: int = 1024
    multiple_of: int = 64
    norm_eps: float = 1e-5


class RMSNorm(nn.Module):
    weight: NormWeight

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: SeqShard) -> SeqShard:
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        # Each rank sees its tokens only: the weight's gradient is summed over tp by the convert.
        return normed * spmd.convert(self.weight, "tp", src=I, dst=R)


class Attention(nn.Module):
    wq: ColWeight
    wk: ColWeight
    wv: ColWeight
    wo: RowWeight

    def __init__(self, args: ModelArgs, tp_size: int) -> None:
        super().__init__()
        self.n_local_heads = args.n_heads // tp_size
        self.head_dim = args.dim // args.n_heads
        local = self.n_local_heads * self.head_dim
        self.wq = nn.Parameter(torch.empty(local, args.dim))
        self.wk = nn.Parameter(torch.empty(local, args.dim))
        self.wv = nn.Parameter(torch.empty(local, args.dim))
        self.wo = nn.Parameter(torch.empty(args.dim, local))

    def _heads(self, x: Gathered, w: ColWeight) -> Heads:
        bs, seqlen, _ = x.shape
        return F.linear(x, w).view(bs, seqlen, self.n_local_heads, self.head_dim)

    def forward(self, x: SeqShard) -> SeqShard:
        h = spmd.all_gather(x, "tp", src=S(1), dst=R)
        bs, seqlen, _ = h.shape
        xq, xk, xv = self._heads(h, self.wq), self._heads(h, self.wk), self._heads(h, self.wv)
        out = F.scaled_dot_product_attention(xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2), is_causal=True)
        out = out.transpose(1, 2).contiguous().view(bs, seqlen, -1)
        partial = spmd.linear(out, self.wo, out_partial_axes="tp")
        return spmd.reduce_scatter(partial, "tp", src=P, dst=S(1))


class FeedForward(nn.Module):
    """SwiGLU: w1 and w3 column-parallel, w2 row-parallel."""

    w1: ColWeight
    w3: ColWeight
    w2: RowWeight

    def __init__(self, dim: int, hidden_dim: int, tp_size: int) -> None:
        super().__init__()
        local = hidden_dim // tp_size
        self.w1 = nn.Parameter(torch.empty(local, dim))
        self.w3 = nn.Parameter(torch.empty(local, dim))
        self.w2 = nn.Parameter(torch.empty(dim, local))

    def forward(self, x: SeqShard) -> SeqShard:
        gathered = spmd.all_gather(x, "tp", src=S(1), dst=R)
        hidden = F.silu(F.linear(gathered, self.w1)) * F.linear(gathered, self.w3)
        out = spmd.reinterpret(F.linear(hidden, self.w2), "tp", src=V, dst=P)
        return spmd.reduce_scatter(out, "tp", src=P, dst=S(1))


class TransformerBlock(nn.Module):
    def __init__(self, layer_id: int, args: ModelArgs, tp_size: int) -> None:
        super().__init__()
        self.layer_id = layer_id
        self.attention = Attention(args, tp_size)
        self.feed_forward = FeedForward(args.dim, 4 * args.dim, tp_size)
        self.attention_norm = RMSNorm(args.dim, args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, args.norm_eps)

    def forward(self, x: SeqShard) -> SeqShard:
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    tok_embeddings: Annotated[Tensor, Spmd(dp=R, tp=S(1))]  # [vocab, dim / tp]: torchtitan shards dim
    output: ColWeight  # [vocab / tp, dim]

    def __init__(self, args: ModelArgs, tp_size: int) -> None:
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Parameter(torch.empty(args.vocab_size, args.dim // tp_size))
        self.layers = nn.ModuleDict()
        for layer_id in range(args.n_layers):
            self.layers[str(layer_id)] = TransformerBlock(layer_id, args, tp_size)
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.output = nn.Parameter(torch.empty(args.vocab_size // tp_size, args.dim))

    def forward(self, tokens: Annotated[Tensor, Spmd(dp=S(0), tp=R, nograd=True)]) -> Annotated[Tensor, Spmd(dp=S(0), tp=S(2))]:
        # Embedding sharded on dim: each rank looks up its slice of the hidden dim, then
        # the sequence is split over tp for the blocks (an all_to_all moves shard dim 2 -> 1).
        h = F.embedding(tokens, self.tok_embeddings)  # [b, s, dim / tp]
        h = spmd.all_to_all(h, "tp", src=S(2), dst=S(1))
        for block in self.layers.values():
            h = block(h)
        h = self.norm(h)
        full = spmd.all_gather(h, "tp", src=S(1), dst=R)
        return F.linear(full, self.output)  # this rank's vocabulary slice (loss_parallel)


def loss_parallel_cross_entropy(
    logits: Annotated[Tensor, Spmd(dp=S(0), tp=S(2))],
    labels: Annotated[Tensor, Spmd(dp=S(0), tp=R, nograd=True)],
    global_tokens: int,
    tp_size: int,
) -> Annotated[Tensor, Spmd(dp=P, tp=I)]:
    """Sum of token losses over vocabulary-sharded logits, divided by the global token count."""
    vocab_local = logits.shape[-1]
    shift = spmd.all_gather(logits.detach().amax(-1, keepdim=True), "tp", src=S(2), dst=I).amax(-1, keepdim=True)
    shifted = logits - shift
    rank_index = spmd.convert(torch.arange(tp_size), "tp", src=R, dst=S(0))  # [1]: this rank's index
    start = rank_index * vocab_local
    local = labels - start
    valid = (local >= 0) & (local < vocab_local)
    picked = shifted.gather(-1, local.clamp(0, vocab_local - 1).unsqueeze(-1)).squeeze(-1) * valid
    target = spmd.all_reduce(spmd.reinterpret(picked, "tp", src=V, dst=P), "tp", src=P, dst=I)
    sum_exp = spmd.all_reduce(spmd.reinterpret(shifted.exp().sum(-1), "tp", src=V, dst=P), "tp", src=P, dst=I)
    token_loss = sum_exp.log() - target
    return spmd.reinterpret(token_loss.sum() / global_tokens, "dp", src=V, dst=P)


def global_token_count(
    labels: Annotated[Tensor, Spmd(dp=S(0), tp=R, nograd=True)], ignore_index: int = -100
) -> Annotated[Tensor, Spmd(dp=R, tp=R, nograd=True)]:
    local = spmd.reinterpret((labels != ignore_index).sum(), "dp", src=V, dst=P)
    return spmd.all_reduce(local, "dp", src=P, dst=R)


def sync_dp_grads(grads: List[Annotated[Tensor, Spmd(dp=P)]]) -> List[Annotated[Tensor, Spmd(dp=R)]]:
    """DDP: each parameter's gradient is this dp rank's addend; sum once after backward."""
    return [spmd.all_reduce(g, "dp", src=P, dst=R) for g in grads]


def train_step(
    model: Transformer,
    mesh: DeviceMesh,
    tokens: Annotated[Tensor, Spmd(dp=S(0), tp=R, nograd=True)],
    labels: Annotated[Tensor, Spmd(dp=S(0), tp=R, nograd=True)],
) -> Tuple[Annotated[Tensor, Spmd(dp=I, tp=I)], int]:
    with spmd.set_mesh(mesh):
        logits = model(tokens)
        ntokens = int(global_token_count(labels).item())
        loss = loss_parallel_cross_entropy(logits, labels, ntokens, mesh["tp"].size())
        loss.backward()  # P on dp, I on tp
        reported = spmd.all_reduce(loss.detach(), "dp", src=P, dst=I)
    return reported, ntokens
