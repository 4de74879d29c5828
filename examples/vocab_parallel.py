"""Vocab-parallel embedding, LM head and cross-entropy (Megatron's layout).

Mesh: dp x tp.  The batch is split over dp; the vocabulary is split over
tp: tp rank t holds rows [t * vocab / tp, (t + 1) * vocab / tp) of the
embedding and of the LM head, so the logits are split over tp along the
vocab dim (S(-1)) and never gathered.

  - Embedding: each tp rank looks up the tokens that fall in its rows and
    writes zeros for the others, so the full embedding is the sum over tp:
    `reinterpret(V -> P)` then `all_reduce(P -> I)`.
  - LM head: column-parallel over the vocab, entered through
    `convert(I -> R)` (copy-to-region).
  - Cross-entropy without gathering the logits: the maximum over the vocab
    (for a stable exp) is the maximum of the ranks' maxima, gathered with
    `all_gather(V -> R)`; it carries no gradient.  The sum of exp over the
    vocab and the target's logit (held by exactly one rank) are sums over
    tp: `all_reduce(P -> I)`.  The per-token loss is then the same on every
    tp rank, and Invariant: its gradient reaches each rank's logits without
    another reduction.
  - The parameters are replicated over dp (R); `all_reduce_dp_grads` sums
    their gradients over dp after backward (DDP).

Token ids are typed R on tp although each rank shifts them by its own
vocab offset (a Python int the types do not see); they carry no gradient,
so only the vocab-sharded weights decide the types.

`build_lm` makes a rank's model from the full weights and the rank's mesh
coordinates; `train_step` runs forward, the mean token loss over the global
batch, backward and the dp gradient sum.
"""

from __future__ import annotations

from typing import Annotated, Dict, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

TokenIds = Annotated[Tensor, Spmd(dp=S(0), tp=R, nograd=True)]  # [batch / dp, seq]
Hidden = Annotated[Tensor, Spmd(dp=S(0), tp=I)]  # [batch / dp, seq, hidden]
VocabShard = Annotated[Tensor, Spmd(dp=S(0), tp=S(-1))]  # [batch / dp, seq, vocab / tp]
TokenLoss = Annotated[Tensor, Spmd(dp=S(0), tp=I)]  # [batch / dp, seq]


class VocabParallelEmbedding(nn.Module):
    weight: Annotated[Tensor, Spmd(dp=R, tp=S(0))]  # [vocab / tp, hidden]

    def __init__(self, weight: Tensor, vocab_start: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.vocab_start = vocab_start

    def forward(self, ids: TokenIds) -> Hidden:
        local = ids - self.vocab_start
        outside = (local < 0) | (local >= self.weight.shape[0])
        emb = F.embedding(local.masked_fill(outside, 0), self.weight)
        emb = emb.masked_fill(outside.unsqueeze(-1), 0.0)  # rows another rank holds
        return spmd.all_reduce(spmd.reinterpret(emb, "tp", src=V, dst=P), "tp", src=P, dst=I)


def vocab_parallel_cross_entropy(logits: VocabShard, targets: TokenIds, vocab_start: int) -> TokenLoss:
    """-log softmax(logits)[target] per token, from vocab-sharded logits."""
    local_max = logits.detach().amax(dim=-1)  # [batch, seq]: this rank's maximum
    global_max = spmd.all_gather(local_max, "tp", src=V, dst=R).amax(dim=0)
    shifted = logits - global_max.unsqueeze(-1)

    sum_exp = spmd.reinterpret(shifted.exp().sum(dim=-1), "tp", src=V, dst=P)
    sum_exp = spmd.all_reduce(sum_exp, "tp", src=P, dst=I)

    local = targets - vocab_start
    outside = (local < 0) | (local >= logits.shape[-1])
    target_logit = shifted.gather(-1, local.masked_fill(outside, 0).unsqueeze(-1)).squeeze(-1)
    target_logit = target_logit.masked_fill(outside, 0.0)  # only the owner's value counts
    target_logit = spmd.reinterpret(target_logit, "tp", src=V, dst=P)
    target_logit = spmd.all_reduce(target_logit, "tp", src=P, dst=I)
    return torch.log(sum_exp) - target_logit


class VocabParallelLM(nn.Module):
    """Embedding, layer norm, tanh, LM head: the vocab-parallel ends of a language model."""

    ln_w: Annotated[Tensor, Spmd(dp=R, tp=I)]
    ln_b: Annotated[Tensor, Spmd(dp=R, tp=I)]
    head: Annotated[Tensor, Spmd(dp=R, tp=S(0))]  # [vocab / tp, hidden]

    def __init__(self, embedding: Tensor, ln_w: Tensor, ln_b: Tensor, head: Tensor, vocab_start: int) -> None:
        super().__init__()
        self.embed = VocabParallelEmbedding(embedding, vocab_start)
        self.ln_w = nn.Parameter(ln_w)
        self.ln_b = nn.Parameter(ln_b)
        self.head = nn.Parameter(head)
        self.vocab_start = vocab_start

    def forward(self, ids: TokenIds) -> VocabShard:
        h = self.embed(ids)
        h = torch.tanh(F.layer_norm(h, (h.shape[-1],), self.ln_w, self.ln_b))
        h = spmd.convert(h, "tp", src=I, dst=R)  # copy-to-region
        return F.linear(h, self.head)


def build_lm(full: Dict[str, Tensor], dp_rank: int, tp_rank: int, tp: int) -> VocabParallelLM:
    """This rank's model: chunk `tp_rank` of dim 0 (the vocab) of both vocab matrices."""
    vocab = full["embedding"].shape[0]
    return VocabParallelLM(
        full["embedding"].chunk(tp, dim=0)[tp_rank].clone(),
        full["ln_w"].clone(),
        full["ln_b"].clone(),
        full["head"].chunk(tp, dim=0)[tp_rank].clone(),
        vocab_start=tp_rank * (vocab // tp),
    )


def all_reduce_dp_grads(module: nn.Module) -> None:
    """DDP: sum each parameter's gradient (P on dp) over dp, once, after backward."""
    for param in module.parameters():
        if param.grad is not None:
            param.grad = spmd.all_reduce(param.grad, "dp", src=P, dst=R)


def train_step(
    lm: VocabParallelLM, ids: TokenIds, targets: TokenIds, global_tokens: int
) -> Tuple[VocabShard, Annotated[Tensor, Spmd(dp=I, tp=I)]]:
    """Forward, mean token loss, backward, dp gradient sum; returns the logits and the loss."""
    logits = lm(ids)
    token_loss = vocab_parallel_cross_entropy(logits, targets, lm.vocab_start)
    loss = spmd.reinterpret(token_loss.sum() / global_tokens, "dp", src=V, dst=P)
    loss.backward()
    all_reduce_dp_grads(lm)
    return logits, spmd.all_reduce(loss.detach(), "dp", src=P, dst=I)
