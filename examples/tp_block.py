"""A Megatron-style tensor-parallel transformer block (no sequence parallelism).

Mesh: dp x tp.  The batch is split over dp (dim 0 of the activations); the
parameters are replicated over dp (R: each dp rank's gradient is its addend
of the full gradient, summed after backward by `all_reduce_dp_grads`, the
DDP step).  On tp:

  - The residual stream is Invariant: the same on every tp rank, with a
    gradient that is the same on every rank too.  Layer-norm weights and the
    biases added to the residual stream are Invariant as well.
  - Attention: q, k, v are column-parallel (each tp rank holds whole heads:
    rows of the weights, S(0)), the output projection is row-parallel
    (columns, S(1)).
  - MLP: column-parallel first linear with its bias (S(0)), row-parallel
    second linear, bias Invariant.
  - Entering a tp region, `convert(I -> R)` is Megatron's copy-to-region
    (its backward all-reduces the input gradient over tp); leaving it,
    `reinterpret(V -> P)` says that the rank's row-parallel product is an
    addend of the full product and `all_reduce(P -> I)` is
    reduce-from-region.

`build_block` makes a rank's module from the full (single-process) weights
and the rank's mesh coordinates; `train_step` runs forward, a mean-squared
loss over the global batch, backward and the dp gradient reduction.
"""

from __future__ import annotations

from typing import Annotated, Dict, Tuple

import torch.nn.functional as F
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

Activation = Annotated[Tensor, Spmd(dp=S(0), tp=I)]  # [batch / dp, seq, hidden]


class ParallelAttention(nn.Module):
    w_q: Annotated[Tensor, Spmd(dp=R, tp=S(0))]  # [hidden / tp, hidden]: this rank's heads
    w_k: Annotated[Tensor, Spmd(dp=R, tp=S(0))]
    w_v: Annotated[Tensor, Spmd(dp=R, tp=S(0))]
    w_o: Annotated[Tensor, Spmd(dp=R, tp=S(1))]  # [hidden, hidden / tp]
    b_o: Annotated[Tensor, Spmd(dp=R, tp=I)]  # [hidden]

    def __init__(self, w_q: Tensor, w_k: Tensor, w_v: Tensor, w_o: Tensor, b_o: Tensor, head_dim: int) -> None:
        super().__init__()
        self.w_q = nn.Parameter(w_q)
        self.w_k = nn.Parameter(w_k)
        self.w_v = nn.Parameter(w_v)
        self.w_o = nn.Parameter(w_o)
        self.b_o = nn.Parameter(b_o)
        self.head_dim = head_dim

    def forward(self, x: Activation) -> Activation:
        batch, seq, _ = x.shape
        h = spmd.convert(x, "tp", src=I, dst=R)  # copy-to-region

        def heads(w: Annotated[Tensor, Spmd(dp=R, tp=S(0))]) -> Annotated[Tensor, Spmd(dp=V, tp=V)]:
            # [batch, seq, local heads * head_dim] -> [batch, local heads, seq, head_dim]
            return F.linear(h, w).view(batch, seq, -1, self.head_dim).transpose(1, 2)

        ctx = F.scaled_dot_product_attention(heads(self.w_q), heads(self.w_k), heads(self.w_v), is_causal=True)
        ctx = ctx.transpose(1, 2).reshape(batch, seq, -1)  # this rank's heads, concatenated
        out = spmd.reinterpret(F.linear(ctx, self.w_o), "tp", src=V, dst=P)
        out = spmd.all_reduce(out, "tp", src=P, dst=I)  # reduce-from-region
        return out + self.b_o


class ParallelMLP(nn.Module):
    w_in: Annotated[Tensor, Spmd(dp=R, tp=S(0))]  # [ffn / tp, hidden]
    b_in: Annotated[Tensor, Spmd(dp=R, tp=S(0))]  # [ffn / tp]
    w_out: Annotated[Tensor, Spmd(dp=R, tp=S(1))]  # [hidden, ffn / tp]
    b_out: Annotated[Tensor, Spmd(dp=R, tp=I)]  # [hidden]

    def __init__(self, w_in: Tensor, b_in: Tensor, w_out: Tensor, b_out: Tensor) -> None:
        super().__init__()
        self.w_in = nn.Parameter(w_in)
        self.b_in = nn.Parameter(b_in)
        self.w_out = nn.Parameter(w_out)
        self.b_out = nn.Parameter(b_out)

    def forward(self, x: Activation) -> Activation:
        h = spmd.convert(x, "tp", src=I, dst=R)  # copy-to-region
        h = F.gelu(F.linear(h, self.w_in, self.b_in))
        out = spmd.reinterpret(F.linear(h, self.w_out), "tp", src=V, dst=P)
        out = spmd.all_reduce(out, "tp", src=P, dst=I)  # reduce-from-region
        return out + self.b_out


class ParallelTransformerBlock(nn.Module):
    ln1_w: Annotated[Tensor, Spmd(dp=R, tp=I)]
    ln1_b: Annotated[Tensor, Spmd(dp=R, tp=I)]
    ln2_w: Annotated[Tensor, Spmd(dp=R, tp=I)]
    ln2_b: Annotated[Tensor, Spmd(dp=R, tp=I)]

    def __init__(self, p: Dict[str, Tensor], tp_rank: int, tp: int, head_dim: int) -> None:
        super().__init__()

        def rows(t: Tensor) -> Tensor:
            return t.chunk(tp, dim=0)[tp_rank].clone()

        def cols(t: Tensor) -> Tensor:
            return t.chunk(tp, dim=1)[tp_rank].clone()

        self.ln1_w = nn.Parameter(p["ln1_w"].clone())
        self.ln1_b = nn.Parameter(p["ln1_b"].clone())
        self.ln2_w = nn.Parameter(p["ln2_w"].clone())
        self.ln2_b = nn.Parameter(p["ln2_b"].clone())
        self.attn = ParallelAttention(
            rows(p["w_q"]), rows(p["w_k"]), rows(p["w_v"]), cols(p["w_o"]), p["b_o"].clone(), head_dim
        )
        self.mlp = ParallelMLP(rows(p["w_in"]), rows(p["b_in"]), cols(p["w_out"]), p["b_out"].clone())
        self.hidden = p["ln1_w"].shape[0]

    def forward(self, x: Activation) -> Activation:
        x = x + self.attn(F.layer_norm(x, (self.hidden,), self.ln1_w, self.ln1_b))
        return x + self.mlp(F.layer_norm(x, (self.hidden,), self.ln2_w, self.ln2_b))


def build_block(
    full: Dict[str, Tensor], dp_rank: int, tp_rank: int, tp: int, head_dim: int
) -> ParallelTransformerBlock:
    """This rank's block from the full weights (nn.Linear layout: [out, in]).

    Column-parallel weights and biases keep tp rank t's t-th chunk of dim 0,
    row-parallel weights the t-th chunk of dim 1; everything else is copied.
    Heads are contiguous in dim 0 of w_q, w_k, w_v, so a chunk holds whole
    heads.  Every dp rank holds the same weights (dp_rank is unused).
    """
    return ParallelTransformerBlock(full, tp_rank, tp, head_dim)


def all_reduce_dp_grads(module: nn.Module) -> None:
    """DDP: sum each parameter's gradient (P on dp) over dp, once, after backward."""
    for param in module.parameters():
        if param.grad is not None:
            param.grad = spmd.all_reduce(param.grad, "dp", src=P, dst=R)


def mse_loss(
    out: Activation, target: Activation, global_numel: int
) -> Annotated[Tensor, Spmd(dp=P, tp=I)]:
    """Mean squared error over the global batch: this dp rank's addend of it."""
    local = ((out - target) ** 2).sum() / global_numel
    return spmd.reinterpret(local, "dp", src=V, dst=P)


def train_step(
    block: ParallelTransformerBlock, x: Activation, target: Activation, global_numel: int
) -> Tuple[Activation, Annotated[Tensor, Spmd(dp=I, tp=I)]]:
    """Forward, loss, backward and the dp gradient sum; returns the output and the loss."""
    out = block(x)
    loss = mse_loss(out, target, global_numel)
    loss.backward()  # P on dp, I on tp: the implicit gradient 1.0 on every rank is right
    all_reduce_dp_grads(block)
    return out, spmd.all_reduce(loss.detach(), "dp", src=P, dst=I)
