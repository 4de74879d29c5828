"""A per-sequence mean loss on packed tokens: the reduction runs over a sub-axis of dp.

Mesh: dp, 4 ranks (`mesh = dp:4` in mypy.ini).  The batch holds B = 2
sequences of S = 8 tokens.  The token-level work (embedding, projection,
log-probabilities) runs on the tokens packed into one dim [B*S], split
evenly over dp: each rank holds 4 consecutive tokens, half of a sequence.
The loss is the mean over sequences of each sequence's mean negative
log-likelihood over its real tokens (a loss mask):

    loss = 1/B * sum_b (sum_t mask[b, t] * nll[b, t]) / (sum_t mask[b, t])

(a sequence-level mean, as in sequence-averaged RL and preference losses;
a long sequence weighs no more than a short one).

Viewing the packed tokens as [B, S] splits the axis (seed 002): on dp = 4,
[16@dp] as (2, 8) is [2@dp:(1)2, 8@dp:(2)2].  The sub-axis dp:(1)2 picks
the sequence and dp:(2)2 its half: ranks 0 and 1 hold sequence 0, ranks 2
and 3 sequence 1.  A sequence's sums over its tokens are Partial over
dp:(2)2 only, so they are all-reduced over "dp:(2)2", the group of the two
ranks that hold the sequence; all-reducing them over the whole of dp would
add the other sequence's tokens in, and dividing by this rank's own token
count instead would weigh the halves wrongly.  The mean over sequences is
then Partial over dp:(1)2 and all-reduced there; the two parts, each I,
make the declared `dp=I` loss.  The sizes are written in the annotations
(`shape=`) and the mesh size in mypy.ini: with them the checker reads the
global view [16@dp] -> (2, 8) as the sub-axes above (each rank runs its own
view, `by_sequence` below), and types the sums and both collectives on the
sub-axes.

The weights are replicated over dp; `all_reduce_dp_grads` sums their
gradients over the whole of dp after backward (DDP).  `build_model` makes a
rank's model from the full weights; `train_step` runs forward, the loss,
backward and the gradient sum.
"""

from __future__ import annotations

from typing import Annotated, Dict, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, P, R, Spmd
from spmd_mypy import PartitionSpec as PS

PackedIds = Annotated[Tensor, Spmd(spec=PS("dp"), shape=(16,), nograd=True)]  # [B*S] token ids
PackedMask = Annotated[Tensor, Spmd(spec=PS("dp"), shape=(16,), nograd=True)]  # 1.0 on real tokens
PackedLogits = Annotated[Tensor, Spmd(spec=PS("dp", None), shape=(16, 10))]  # [B*S, vocab]
Weight = Annotated[Tensor, Spmd(spec=PS(None, None))]  # replicated: R on dp
Loss = Annotated[Tensor, Spmd(spec=PS(), dp=I)]  # the whole loss on every rank


class TinyLM(nn.Module):
    """Embedding, tanh, output projection, token by token."""

    embedding: Weight  # [vocab, hidden]
    w_out: Weight  # [vocab, hidden]

    def __init__(self, embedding: Tensor, w_out: Tensor) -> None:
        super().__init__()
        self.embedding = nn.Parameter(embedding)
        self.w_out = nn.Parameter(w_out)

    @spmd.global_spmd
    def forward(self, ids: PackedIds) -> PackedLogits:
        return F.linear(torch.tanh(F.embedding(ids, self.embedding)), self.w_out)


def _my_sequence_rows(x: Tensor) -> Tensor:
    """This rank's packed tokens as one row: with dp a multiple of B, the
    consecutive tokens a rank holds all belong to one sequence."""
    return x.view(1, -1)


# The global view [B*S] -> (B, S), run per rank.  Global code's literal sizes
# are the full tensor's (the checker reads `.view(2, 8)` of [16@dp] as
# [2@dp:(1)2, 8@dp:(2)2] too), but a rank's local tensor is [4], so the view
# a rank runs is its own (1, 4); local_map states the types on both sides.
by_sequence = spmd.local_map(
    _my_sequence_rows,
    in_types=(Spmd(spec=PS("dp"), shape=(16,)),),
    out_types=Spmd(spec=PS("dp:(1)2", "dp:(2)2"), shape=(2, 8)),
)


@spmd.global_spmd
def sequence_mean_loss(logits: PackedLogits, targets: PackedIds, mask: PackedMask) -> Loss:
    """The mean over sequences of each one's mean token loss, on every rank."""
    nll = -torch.log_softmax(logits, dim=-1).gather(1, targets.unsqueeze(1)).squeeze(1)  # [16@dp]
    token_loss = by_sequence(nll * mask)  # [2@dp:(1)2, 8@dp:(2)2]: (sequence, token)
    tokens = by_sequence(mask)
    # Sums over each sequence's tokens: Partial over the two ranks holding it (dp:(2)2).
    my_loss_sum = spmd.sum(token_loss, dim=1, out_partial_axes=("dp:(2)2",))
    my_tokens = spmd.sum(tokens, dim=1, out_partial_axes=("dp:(2)2",))
    loss_sum = spmd.all_reduce(my_loss_sum, "dp:(2)2", src=P, dst=I)
    num_tokens = spmd.all_reduce(my_tokens, "dp:(2)2", src=P, dst=I)
    sequence_loss = loss_sum / num_tokens  # [2@dp:(1)2]: one mean per sequence
    batch_loss = spmd.sum(sequence_loss, dim=0, out_partial_axes=("dp:(1)2",)) / 2
    return spmd.all_reduce(batch_loss, "dp:(1)2", src=P, dst=I)


def build_model(full: Dict[str, Tensor], dp_rank: int, tp_rank: int) -> TinyLM:
    """Every rank holds the full weights."""
    return TinyLM(full["embedding"].clone(), full["w_out"].clone())


def all_reduce_dp_grads(module: nn.Module) -> None:
    """DDP: sum each parameter's gradient (P on dp) over the whole of dp, after backward."""
    for param in module.parameters():
        if param.grad is not None:
            param.grad = spmd.all_reduce(param.grad, "dp", src=P, dst=R)


def train_step(model: TinyLM, ids: PackedIds, targets: PackedIds, mask: PackedMask) -> Tuple[PackedLogits, Loss]:
    """Forward, loss, backward and the dp gradient sum; returns the logits and the loss."""
    logits = model(ids)
    loss = sequence_mean_loss(logits, targets, mask)
    loss.backward()
    all_reduce_dp_grads(model)
    return logits, loss.detach()
