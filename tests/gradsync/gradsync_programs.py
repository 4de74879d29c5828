"""The three gradient-sync bug classes as small training programs.

Each program is a model whose parameters declare their types, a loss, and
finishing functions: the buggy ones (`finish_*_buggy`, `finish_dp_twice`,
`finish_dp_alias`) and the fixed ones.  test_gradsync_static.py checks that
mypy reports exactly the buggy ones (and the declarations they leave
unsummed); test_gradsync_gloo.py runs every finishing function on 2 gloo
ranks and compares the gradients with one process on the full tensors.

  sp  sequence parallelism over tp (mesh dp=1 x tp=2): a LayerNorm whose
      weight and bias are replicated over tp (R) and meet only this rank's
      tokens, so their gradients are pending on tp (Megatron sums them in
      finalize_model_grads); the buggy finish sums over dp only.  The same
      with the sums installed in backward (`install_sp_*`, DDP-style), also
      with two accumulated micro-batches under `spmd.no_sync`.
  dp  data parallelism (mesh dp=2): the weight is R on dp; the buggy
      finishes sum its gradient twice, by a loop over module.parameters()
      after the DDP-style call, or in place through a name bound to .grad.
  pp  two pipeline stages (mesh pp=2 x dp=1) holding one tied parameter, the
      embedding on stage 0 and the LM head on stage 1; the buggy finish
      never sums it over pp.
"""

from __future__ import annotations

from typing import Annotated

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributed import ProcessGroup

import spmd_mypy as spmd
from spmd_mypy import P, R, S, Spmd, V

Tokens = Annotated[Tensor, Spmd(dp=S(0), tp=S(0))]  # [tokens / tp, hidden]
DpGroup = Annotated[ProcessGroup, spmd.Axis("dp")]


class SequenceParallelNorm(nn.Module):
    weight: Annotated[Tensor, Spmd(dp=R, tp=R)]  # expect: spmd-gradsync (left unsummed by finish_sp_buggy)
    bias: Annotated[Tensor, Spmd(dp=R, tp=R)]  # expect: spmd-gradsync

    def __init__(self, weight: Tensor, bias: Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight.clone())
        self.bias = nn.Parameter(bias.clone())

    def forward(self, x: Tokens) -> Tokens:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias)


def sp_loss(norm: SequenceParallelNorm, x: Tokens, target: Tokens) -> Annotated[Tensor, Spmd(dp=P, tp=P)]:
    """This rank's tokens' addend of the loss."""
    return spmd.reinterpret((norm(x) * target).sum(), ("dp", "tp"), src=V, dst=P)


def finish_sp_buggy(norm: SequenceParallelNorm) -> None:
    spmd.sync_grads(norm, "dp")  # expect: spmd-gradsync (never over tp)


def finish_sp_fixed(norm: SequenceParallelNorm) -> None:
    spmd.sync_grads(norm, "dp")
    for param in (norm.weight, norm.bias):
        spmd.sync_grad(param, "tp")


def install_sp_buggy(norm: SequenceParallelNorm) -> SequenceParallelNorm:
    """DDP-style, the sums at the end of every backward: over dp only."""
    return spmd.sync_grads_in_backward(norm, "dp")  # expect: spmd-gradsync (never over tp)


def install_sp_fixed(norm: SequenceParallelNorm) -> SequenceParallelNorm:
    return spmd.sync_grads_in_backward(norm, "dp", "tp")


class DataParallelMLP(nn.Module):
    w: Annotated[Tensor, Spmd(dp=R)]

    def __init__(self, w: Tensor) -> None:
        super().__init__()
        self.w = nn.Parameter(w.clone())

    def forward(self, x: Annotated[Tensor, Spmd(dp=S(0))]) -> Annotated[Tensor, Spmd(dp=V)]:
        return torch.tanh(x @ self.w)


def dp_loss(model: DataParallelMLP, x: Annotated[Tensor, Spmd(dp=S(0))], n: int) -> Annotated[Tensor, Spmd(dp=P)]:
    """This rank's batch's addend of the mean over the global batch."""
    return spmd.reinterpret((model(x) ** 2).sum() / n, "dp", src=V, dst=P)


def finish_dp_twice(model: DataParallelMLP, dp_group: DpGroup) -> None:
    spmd.sync_grads(model, "dp")
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, group=dp_group)  # expect: spmd-gradsync (twice)


def finish_dp_alias(model: DataParallelMLP, dp_group: DpGroup) -> None:
    grad = model.w.grad
    dist.all_reduce(grad, group=dp_group)
    spmd.sync_grads(model, "dp")  # expect: spmd-gradsync (twice, through grad)


def finish_dp_fixed(model: DataParallelMLP, dp_group: DpGroup) -> None:
    spmd.sync_grads(model, "dp")


class PipelineStage(nn.Module):
    """One stage's copy of the tied word embeddings (embedding on the first
    stage, LM head on the last)."""

    word_embeddings: Annotated[Tensor, Spmd(dp=R)]  # expect: spmd-gradsync (left unsummed by finish_pp_buggy)

    def __init__(self, emb: Tensor) -> None:
        super().__init__()
        self.word_embeddings = spmd.tie(nn.Parameter(emb.clone()), "pp")

    def embed(self, ids: Tensor) -> Tensor:
        return F.embedding(ids, self.word_embeddings)

    def lm_head(self, h: Tensor) -> Tensor:
        return h @ self.word_embeddings.T


def finish_pp_buggy(stage: PipelineStage) -> None:
    spmd.sync_grads(stage, "dp")  # expect: spmd-gradsync (never over pp)


def finish_pp_fixed(stage: PipelineStage) -> None:
    spmd.sync_grads(stage, "dp", "pp")
