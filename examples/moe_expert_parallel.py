"""A mixture-of-experts layer with expert parallelism over dp (Megatron / DeepSeek style).

Mesh: dp x tp.  dp is also the expert-parallel axis: dp rank d holds
experts [d * E / dp, (d + 1) * E / dp) (S(0) on dp of the stacked expert
weights) and routes its own tokens (S(0) on dp) to whichever rank holds
their experts.

The layer starts with the attention's output projection, row-parallel over
tp: each tp rank holds some heads of the context, so the projection is a
Partial sum over tp, reduced with `all_reduce(P -> R)` before anything
nonlinear sees it (the router's softmax in particular).  After that every
tp rank routes and computes the same tokens (R on tp); the loss is counted
once over tp with `convert(R -> P)`, so gradients of the weights used
after the reduction are Partial over tp and summed by `finalize_grads`.

Per layer: router (softmax, top-k, renormalised gates) -> sort the token
copies by expert: a partitioned shard PS(0) on dp (partition e: the copies
routed to expert e; sizes known only at runtime) -> `spmd.partitioned.
unaligned_to_aligned`: per-expert sizes, then the rows, exchanged by two
all_to_alls, so each rank holds whole partitions of its own experts (PSA(0))
-> each local expert's MLP on its partition (`map_partitions`) -> back with
`aligned_to_unaligned` -> unsort and combine with the gates.  The
conversions' backward is the all_to_all with the sizes swapped, so the
gradients travel back to the senders.  The checker keeps the layouts apart:
an unaligned value never meets the experts' per-rank weights, and the
partitioned dim is never reshaped, split or joined outside map_partitions.  A
Switch-style load-balancing loss (local to each dp rank) is returned with
the output.

`build_moe` makes a rank's layer from the full weights and the rank's mesh
coordinates; `train_step` runs forward, the loss (mean squared error over the
global batch plus the auxiliary loss), backward and the gradient sums.
"""

from __future__ import annotations

from typing import Annotated, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import PS, I, P, R, S, Spmd, V

Context = Annotated[Tensor, Spmd(dp=S(0), tp=S(1))]  # [tokens / dp, hidden / tp]: this rank's heads
Tokens = Annotated[Tensor, Spmd(dp=S(0), tp=R)]  # [tokens / dp, hidden]
Routed = Annotated[Tensor, Spmd(dp=V, tp=R)]  # token copies, ordered by expert or by sender
Dispatched = Annotated[Tensor, Spmd(dp=PS(0), tp=R)]  # sorted copies: my slice of every expert's tokens
Counts = Annotated[Tensor, Spmd(dp=V, tp=R, nograd=True)]  # tokens per expert
LocalLoss = Annotated[Tensor, Spmd(dp=V, tp=R)]  # a scalar of this dp rank


class ExpertParallelMoE(nn.Module):
    w_proj: Annotated[Tensor, Spmd(dp=R, tp=S(1))]  # [hidden, hidden / tp]
    w_router: Annotated[Tensor, Spmd(dp=R, tp=R)]  # [experts, hidden]
    w1: Annotated[Tensor, Spmd(dp=S(0), tp=R)]  # [experts / dp, ffn, hidden]
    w2: Annotated[Tensor, Spmd(dp=S(0), tp=R)]  # [experts / dp, hidden, ffn]

    def __init__(self, w_proj: Tensor, w_router: Tensor, w1: Tensor, w2: Tensor, top_k: int, ep: int) -> None:
        super().__init__()
        self.w_proj = nn.Parameter(w_proj)
        self.w_router = nn.Parameter(w_router)
        self.w1 = nn.Parameter(w1)
        self.w2 = nn.Parameter(w2)
        self.top_k = top_k
        self.ep = ep  # size of the expert-parallel axis (dp)
        self.num_experts = w_router.shape[0]
        self.tokens_per_expert: Optional[Tensor] = None  # global counts of the last step, for monitoring

    def expert(self, x: Routed, e: int) -> Routed:
        """Local expert e's MLP on its rows."""
        return F.linear(F.gelu(F.linear(x, self.w1[e])), self.w2[e])

    def forward(self, ctx: Context) -> Tuple[Tokens, LocalLoss]:
        partial = spmd.reinterpret(F.linear(ctx, self.w_proj), "tp", src=V, dst=P)
        h = spmd.all_reduce(partial, "tp", src=P, dst=R)

        # Router: top-k experts per token, gates renormalised over the chosen k.
        logits = F.linear(h, self.w_router)
        probs = torch.softmax(logits, dim=-1)
        gates, chosen = torch.topk(probs, self.top_k, dim=-1)
        gates = gates / gates.sum(dim=-1, keepdim=True)

        # Token copies sorted by expert; experts are numbered rank-major, so also by rank.
        flat_expert = chosen.flatten()
        order = torch.argsort(flat_expert, stable=True)
        routed = h[order // self.top_k]
        counts: Counts = torch.bincount(flat_expert, minlength=self.num_experts).detach()

        # Dispatch with partitioned shards (seed 004): the sorted copies are this
        # rank's slice of every expert's tokens, an unaligned PS(0) with splits
        # `counts`; the aligned PSA(0) layout gives each rank whole experts (its
        # own, every sender's rows of expert 0, then of expert 1, ...).  The
        # conversion exchanges the sizes, then the rows (two all_to_alls); its
        # backward sends the gradients back to the senders.
        dispatched: Dispatched = routed
        splits: List[int] = counts.tolist()
        grouped, grouped_splits = spmd.partitioned.unaligned_to_aligned(dispatched, "dp", splits)
        expert_out = spmd.partitioned.map_partitions(self.expert, grouped, "dp", grouped_splits)
        returned, _ = spmd.partitioned.aligned_to_unaligned(expert_out, "dp", grouped_splits)
        per_copy = returned[torch.argsort(order)].view(-1, self.top_k, h.shape[-1])
        out = h + (per_copy * gates.unsqueeze(-1)).sum(dim=1)

        # Load monitoring: tokens per expert over the whole dp batch.
        self.tokens_per_expert = spmd.all_reduce(spmd.reinterpret(counts, "dp", src=V, dst=P), "dp", src=P, dst=R)

        # Switch load-balancing loss on this rank's tokens.
        fraction = counts.to(probs.dtype) / flat_expert.numel()
        aux = self.num_experts * (fraction * probs.mean(dim=0)).sum()
        return out, aux

    def finalize_grads(self) -> None:
        """Sum each gradient over the axes where its parameter is R (its gradient P)."""
        assert self.w_proj.grad is not None and self.w_router.grad is not None
        assert self.w1.grad is not None and self.w2.grad is not None
        self.w_proj.grad = spmd.all_reduce(self.w_proj.grad, "dp", src=P, dst=R)
        self.w_router.grad = spmd.all_reduce(self.w_router.grad, ("dp", "tp"), src=P, dst=R)
        self.w1.grad = spmd.all_reduce(self.w1.grad, "tp", src=P, dst=R)
        self.w2.grad = spmd.all_reduce(self.w2.grad, "tp", src=P, dst=R)


def build_moe(full: Dict[str, Tensor], dp_rank: int, tp_rank: int, dp: int, tp: int, top_k: int) -> ExpertParallelMoE:
    """This rank's layer: w_proj's tp chunk of dim 1, the experts' dp chunk of dim 0."""
    return ExpertParallelMoE(
        full["w_proj"].chunk(tp, dim=1)[tp_rank].clone(),
        full["w_router"].clone(),
        full["w1"].chunk(dp, dim=0)[dp_rank].clone(),
        full["w2"].chunk(dp, dim=0)[dp_rank].clone(),
        top_k,
        ep=dp,
    )


def train_step(
    moe: ExpertParallelMoE, ctx: Context, target: Tokens, global_numel: int, aux_coef: float
) -> Tuple[Tokens, Annotated[Tensor, Spmd(dp=I, tp=I)]]:
    """Forward, loss, backward and gradient sums; returns the output and the loss."""
    out, aux = moe(ctx)
    mse = ((out - target) ** 2).sum() / global_numel
    loss = mse + aux_coef * aux  # R on tp: every tp rank computed the same loss
    loss = spmd.convert(loss, "tp", src=R, dst=P)  # count it once over tp
    loss = spmd.reinterpret(loss, "dp", src=V, dst=P)  # the global loss sums the dp ranks'
    loss.backward()
    moe.finalize_grads()
    return out, spmd.all_reduce(loss.detach(), ("dp", "tp"), src=P, dst=I)
