"""Megatron-core style training-step utilities around the TP layers.

  - `finalize_model_grads`: the raw form, after backward, over parameter
    lists (untyped: the parameters come from `model.parameters()`).
  - `tp_aware_grad_norm`: the global gradient norm for clipping.  A tp-sharded
    parameter's squared norm is this rank's addend (V, read as P), summed over
    tp; a tp-replicated one is the same on every rank (I) and is counted once.
  - `average_losses_across_data_parallel_group` and `pretrain_step`: the loss
    reported to the logger, averaged over dp, and one step of a GPT model.
"""

from __future__ import annotations

from typing import Annotated, Iterable, List, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

from .megatron_transformer import GPTModel
from .megatron_vocab import masked_mean_loss, vocab_parallel_cross_entropy
from .parallel_state import get_data_parallel_group, get_tensor_model_parallel_group

ShardedGrad = Annotated[Tensor, Spmd(dp=R, tp=V)]
ReplicatedGrad = Annotated[Tensor, Spmd(dp=R, tp=I)]
Scalar = Annotated[Tensor, Spmd(dp=R, tp=I)]


def finalize_model_grads(model: nn.Module, sequence_parallel: bool) -> None:
    """Sum the SP norm weights' gradients over tp, then average every gradient over dp (raw)."""
    if sequence_parallel:
        grads: List[Tensor] = []
        for param in model.parameters():
            if getattr(param, "sequence_parallel", False) and param.grad is not None:
                grads.append(param.grad.data)
        if grads:
            coalesced = torch._utils._flatten_dense_tensors(grads)
            dist.all_reduce(coalesced, group=get_tensor_model_parallel_group())
            for buf, synced in zip(grads, torch._utils._unflatten_dense_tensors(coalesced, grads)):
                buf.copy_(synced)
    dp_group = get_data_parallel_group()
    dp_size = dist.get_world_size(group=dp_group)
    for param in model.parameters():
        if param.grad is not None:
            param.grad.data.div_(dp_size)
            dist.all_reduce(param.grad.data, group=dp_group)


def tp_aware_grad_norm(
    sharded_grads: Sequence[ShardedGrad],
    replicated_grads: Sequence[ReplicatedGrad],
    norm_type: float = 2.0,
) -> Scalar:
    """The 2-norm of all gradients: sharded parts summed over tp, replicated parts once."""
    device = sharded_grads[0].device if sharded_grads else torch.device("cpu")
    sharded_sq = torch.zeros((), device=device)
    for g in sharded_grads:
        sharded_sq = sharded_sq + g.detach().float().pow(norm_type).sum()
    total_sharded = spmd.all_reduce(spmd.reinterpret(sharded_sq, "tp", src=V, dst=P), "tp", src=P, dst=I)
    replicated_sq = torch.zeros((), device=device)
    for r in replicated_grads:
        replicated_sq = replicated_sq + r.detach().float().pow(norm_type).sum()
    return (total_sharded + replicated_sq).pow(1.0 / norm_type)


def clip_coefficient(total_norm: Scalar, max_norm: float) -> Scalar:
    return (max_norm / (total_norm + 1e-6)).clamp(max=1.0)


def clip_grads_(grads: Iterable[Tensor], coefficient: Scalar) -> None:
    for g in grads:
        g.mul_(coefficient)


def average_losses_across_data_parallel_group(
    losses: Sequence[Annotated[Tensor, Spmd(dp=V, tp=I)]],
) -> Annotated[Tensor, Spmd(dp=I, tp=I)]:
    """The mean over dp ranks of each loss, for logging (no gradient is taken from it)."""
    stacked = torch.cat([loss.clone().detach().view(1) for loss in losses])
    summed = spmd.all_reduce(spmd.reinterpret(stacked, "dp", src=V, dst=P), "dp", src=P, dst=I)
    return summed / dist.get_world_size(group=get_data_parallel_group())


def loss_func(
    loss_mask: Annotated[Tensor, Spmd(dp=V, tp=I, nograd=True)],
    output_tensor: Annotated[Tensor, Spmd(dp=V, tp=I)],
) -> Tuple[Annotated[Tensor, Spmd(dp=V, tp=I)], Annotated[Tensor, Spmd(dp=I, tp=I)]]:
    """Megatron's loss_func: the micro-batch loss for backward and the dp average for the logger."""
    loss = masked_mean_loss(output_tensor, loss_mask)
    averaged = average_losses_across_data_parallel_group([loss])
    return loss, averaged


def pretrain_step(
    model: GPTModel,
    tokens: Annotated[Tensor, Spmd(dp=V, tp=I, nograd=True)],
    labels: Annotated[Tensor, Spmd(dp=V, tp=I, nograd=True)],
    loss_mask: Annotated[Tensor, Spmd(dp=V, tp=I, nograd=True)],
    optimizer: torch.optim.Optimizer,
) -> Annotated[Tensor, Spmd(dp=I, tp=I)]:
    """Forward, loss, backward, gradient sync and the optimizer step of one micro-batch."""
    optimizer.zero_grad(set_to_none=True)
    logits = model(tokens)
    token_loss = vocab_parallel_cross_entropy(logits, labels)
    loss, averaged = loss_func(loss_mask, token_loss)
    # Each dp rank backpropagates its own micro-batch mean (dp=V): the dp sum of the
    # gradients is taken by finalize_model_grads, which also divides by the dp size.
    loss.backward(torch.ones_like(loss))
    finalize_model_grads(model, model.sequence_parallel)
    optimizer.step()
    return averaged


def split_params_by_tp_layout(model: nn.Module) -> Tuple[List[nn.Parameter], List[nn.Parameter]]:
    """Raw helper: tp-sharded parameters are the ones Megatron marks tensor_model_parallel."""
    sharded: List[nn.Parameter] = []
    replicated: List[nn.Parameter] = []
    for param in model.parameters():
        (sharded if getattr(param, "tensor_model_parallel", False) else replicated).append(param)
    return sharded, replicated


def scatter_batch_over_sequence(
    batch: Annotated[Tensor, Spmd(dp=V, tp=I)], tp_size: int, tp_rank: int
) -> Annotated[Tensor, Spmd(dp=V, tp=S(0))]:
    """Under SP the embedding output is split on the sequence (dim 0 of [s, b, h])."""
    return spmd.convert(batch, "tp", src=I, dst=S(0))


def replicate_for_logging(value: Annotated[Tensor, Spmd(dp=I, tp=I)]) -> float:
    return float(value.mean().item())


def seed_tp_ranks_differently(base_seed: int, tp_rank: int) -> torch.Generator:
    """Dropout inside tp regions must differ per tp rank; outside it must match."""
    gen = torch.Generator()
    gen.manual_seed(base_seed + 2718 + tp_rank)
    return gen


def broadcast_replicated_init(param: Annotated[Tensor, Spmd(tp=R)]) -> Annotated[Tensor, Spmd(tp=R)]:
    """Raw: make an initialisation equal on every tp rank (rank 0's values)."""
    with torch.no_grad():
        dist.broadcast(param, src=0, group=get_tensor_model_parallel_group())
    return param
