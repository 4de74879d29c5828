"""A data-parallel loss normalised by the global number of tokens.

Mesh: dp x tp.  Each dp rank holds its own sequences, padded to a common
length, with a loss mask marking the real tokens; ranks have different
numbers of real tokens.  The loss we want is the mean over every real token
of the global batch:

    sum over ranks of (sum of this rank's token losses) / (global token count)

so each rank's loss is its sum divided by the global count: Partial on dp
(the addends of the global mean).  The count is an all_reduce of the ranks'
counts (`reinterpret(V -> P)`, then `all_reduce(P -> R)`), and a Partial
numerator over a Replicate denominator stays Partial.  Dividing by this
rank's own count instead gives a different loss, and the checker flags that
division (a Partial divided by a Varying value).  The loss reported for
logging is `all_reduce(P -> I)` of it.

The tp ranks hold replicas of the whole computation (this example has no
tensor parallelism), so everything is Invariant on tp: the same value and
the same gradient on every tp rank.  The weights are replicated over dp
(declared R there, so their gradients are pending over dp after backward);
`spmd.sync_grads(model, "dp")` sums each pending gradient over dp once, as
DDP does, and the checker holds it to that contract (README "The
gradient-sync contract").

`build_model` makes a rank's model from the full weights; `train_step` runs
forward, the loss, backward and the dp gradient sum.
"""

from __future__ import annotations

from typing import Annotated, Dict, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

TokenIds = Annotated[Tensor, Spmd(dp=S(0), tp=I, nograd=True)]  # [sequences / dp, seq]
LossMask = Annotated[Tensor, Spmd(dp=S(0), tp=I, nograd=True)]  # 1.0 on real tokens, 0.0 on padding
Logits = Annotated[Tensor, Spmd(dp=S(0), tp=I)]  # [sequences / dp, seq, vocab]
Loss = Annotated[Tensor, Spmd(dp=P, tp=I)]


class TinyLM(nn.Module):
    """Embedding, tanh, output projection."""

    embedding: Annotated[Tensor, Spmd(dp=R, tp=I)]  # [vocab, hidden]
    w_out: Annotated[Tensor, Spmd(dp=R, tp=I)]  # [vocab, hidden]

    def __init__(self, embedding: Tensor, w_out: Tensor) -> None:
        super().__init__()
        self.embedding = nn.Parameter(embedding)
        self.w_out = nn.Parameter(w_out)

    def forward(self, ids: TokenIds) -> Logits:
        return F.linear(torch.tanh(F.embedding(ids, self.embedding)), self.w_out)


def masked_token_loss(logits: Logits, targets: TokenIds, loss_mask: LossMask) -> Loss:
    """This dp rank's addend of the mean token loss over the global batch."""
    token_loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
    loss_sum = spmd.reinterpret((token_loss * loss_mask.flatten()).sum(), "dp", src=V, dst=P)
    local_tokens = loss_mask.sum()
    num_tokens = spmd.all_reduce(spmd.reinterpret(local_tokens, "dp", src=V, dst=P), "dp", src=P, dst=R)
    return loss_sum / num_tokens


def build_model(full: Dict[str, Tensor], dp_rank: int, tp_rank: int) -> TinyLM:
    """Every rank holds the full weights."""
    return TinyLM(full["embedding"].clone(), full["w_out"].clone())


def train_step(
    model: TinyLM, ids: TokenIds, targets: TokenIds, loss_mask: LossMask
) -> Tuple[Logits, Annotated[Tensor, Spmd(dp=I, tp=I)]]:
    """Forward, loss, backward and the dp gradient sum; returns the logits and the loss."""
    logits = model(ids)
    loss = masked_token_loss(logits, targets, loss_mask)
    loss.backward()
    spmd.sync_grads(model, "dp")
    return logits, spmd.all_reduce(loss.detach(), "dp", src=P, dst=I)
