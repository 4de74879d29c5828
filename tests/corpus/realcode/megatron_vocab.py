"""Megatron-core style vocab-parallel embedding, LM head and cross-entropy.

The vocabulary is split over tp: rank t holds rows [t * V / tp, (t+1) * V / tp)
of the embedding table (S(0)).  A lookup masks the ids outside this rank's
range, so each rank's output is its addend of the full lookup, summed by
reduce-from-region.  The LM head multiplies by the same sharded table and
gives this rank's vocabulary slice of the logits (S(-1)); the cross-entropy
then needs the max, the sum of exponentials and the target logit over tp.
The max is a reduce with op MAX on a tensor without gradient, written with
the raw torch.distributed call (typed collectives have no MAX yet).
"""

from __future__ import annotations

from typing import Annotated, Any, Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributed import ProcessGroup

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V

from .megatron_mappings import copy_to_tensor_model_parallel_region, reduce_from_tensor_model_parallel_region
from .parallel_state import get_tensor_model_parallel_group

TokenIds = Annotated[Tensor, Spmd(tp=I, nograd=True)]  # [seq, batch]
Hidden = Annotated[Tensor, Spmd(tp=I)]  # [seq, batch, hidden]
VocabShard = Annotated[Tensor, Spmd(tp=S(-1))]  # [seq, batch, vocab / tp]
TokenLoss = Annotated[Tensor, Spmd(tp=I)]  # [seq, batch]
TpGroup = Annotated[ProcessGroup, spmd.Axis("tp")]


def vocab_range(global_vocab_size: int, rank: int, world_size: int) -> Tuple[int, int]:
    per_partition = global_vocab_size // world_size
    first = rank * per_partition
    return first, first + per_partition


class VocabParallelEmbedding(nn.Module):
    """Embedding table split over the vocabulary dim."""

    weight: Annotated[Tensor, Spmd(tp=S(0))]

    def __init__(self, num_embeddings: int, embedding_dim: int, tp_group: Optional[ProcessGroup] = None) -> None:
        super().__init__()
        self.tp_group = tp_group
        group = get_tensor_model_parallel_group() if tp_group is None else tp_group
        self.vocab_start_index, self.vocab_end_index = vocab_range(
            num_embeddings, dist.get_rank(group=group), dist.get_world_size(group=group)
        )
        self.num_embeddings_per_partition = self.vocab_end_index - self.vocab_start_index
        self.weight = nn.Parameter(torch.empty(self.num_embeddings_per_partition, embedding_dim))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, input_: TokenIds) -> Hidden:
        input_mask = (input_ < self.vocab_start_index) | (input_ >= self.vocab_end_index)
        masked_input = input_.clone() - self.vocab_start_index
        masked_input[input_mask] = 0
        output_parallel = F.embedding(masked_input, self.weight)
        output_parallel[input_mask, :] = 0.0
        output_partial = spmd.reinterpret(output_parallel, "tp", src=V, dst=P)
        return reduce_from_tensor_model_parallel_region(output_partial, self.tp_group)


def parallel_lm_logits(hidden: Hidden, word_embeddings_weight: Annotated[Tensor, Spmd(tp=S(0))]) -> VocabShard:
    """The LM head tied to the embedding: copy-to-region, then this rank's vocabulary slice."""
    input_parallel = copy_to_tensor_model_parallel_region(hidden)
    return F.linear(input_parallel, word_embeddings_weight)


class _VocabParallelCrossEntropy(torch.autograd.Function):
    """Raw Megatron form: the three reductions and a hand-written backward.

    The body runs with gradients off: its raw collectives are right there and
    type the tensors they write; forward and backward are annotated with the
    types the Function has as a whole (its .apply is checked against them)."""

    @staticmethod
    def forward(ctx: Any, vocab_parallel_logits: VocabShard, target: TokenIds, group: TpGroup) -> TokenLoss:
        logits_max = torch.max(vocab_parallel_logits, dim=-1)[0]
        dist.all_reduce(logits_max, op=dist.ReduceOp.MAX, group=group)
        logits = vocab_parallel_logits - logits_max.unsqueeze(dim=-1)
        start, end = vocab_range(
            logits.size(-1) * dist.get_world_size(group=group), dist.get_rank(group=group),
            dist.get_world_size(group=group),
        )
        target_mask = (target < start) | (target >= end)
        masked_target = target.clone() - start
        masked_target[target_mask] = 0
        logits_2d = logits.view(-1, logits.size(-1))
        arange_1d = torch.arange(0, logits_2d.size(0), device=logits_2d.device)
        predicted = logits_2d[arange_1d, masked_target.view(-1)].clone().view_as(target)
        predicted[target_mask] = 0.0
        dist.all_reduce(predicted, group=group)
        exp_logits = torch.exp(logits)
        sum_exp = exp_logits.sum(dim=-1)
        dist.all_reduce(sum_exp, group=group)
        loss = torch.log(sum_exp) - predicted
        softmax = exp_logits.div_(sum_exp.unsqueeze(dim=-1))
        ctx.save_for_backward(softmax, target_mask, masked_target.view(-1))
        return loss

    @staticmethod
    def backward(ctx: Any, grad_output: TokenLoss) -> Tuple[VocabShard, None, None]:
        softmax, target_mask, masked_target_1d = ctx.saved_tensors
        grad_input = softmax.clone()
        grad_2d = grad_input.view(-1, grad_input.size(-1))
        arange_1d = torch.arange(0, grad_2d.size(0), device=grad_2d.device)
        grad_2d[arange_1d, masked_target_1d] -= 1.0 - target_mask.view(-1).float()
        grad_input.mul_(grad_output.unsqueeze(dim=-1))
        return grad_input, None, None


def vocab_parallel_cross_entropy(vocab_parallel_logits: VocabShard, target: TokenIds) -> TokenLoss:
    """The Function behind a typed boundary (trusted: its body is not checked)."""
    return _VocabParallelCrossEntropy.apply(vocab_parallel_logits, target, get_tensor_model_parallel_group())


def vocab_parallel_cross_entropy_typed(
    vocab_parallel_logits: VocabShard,
    target: TokenIds,
    vocab_start_index: int,
    vocab_end_index: int,
) -> TokenLoss:
    """The same loss with typed collectives; autograd derives the backward.

    The max only shifts the logits for stability: it carries no gradient, and
    each rank must subtract the same value, so it is reduced with MAX.
    """
    logits_max = vocab_parallel_logits.detach().max(dim=-1).values
    dist.all_reduce(logits_max, op=dist.ReduceOp.MAX, group=get_tensor_model_parallel_group())
    logits = vocab_parallel_logits - logits_max.unsqueeze(-1)
    target_mask = (target < vocab_start_index) | (target >= vocab_end_index)
    masked_target = (target - vocab_start_index).masked_fill(target_mask, 0)
    predicted_local = torch.gather(logits, -1, masked_target.unsqueeze(-1)).squeeze(-1)
    predicted_local = predicted_local.masked_fill(target_mask, 0.0)
    predicted = spmd.all_reduce(spmd.reinterpret(predicted_local, "tp", src=V, dst=P), "tp", src=P, dst=I)
    sum_exp_local = torch.exp(logits).sum(dim=-1)
    sum_exp = spmd.all_reduce(spmd.reinterpret(sum_exp_local, "tp", src=V, dst=P), "tp", src=P, dst=I)
    return torch.log(sum_exp) - predicted


def masked_mean_loss(
    token_loss: TokenLoss, loss_mask: Annotated[Tensor, Spmd(tp=I, nograd=True)]
) -> Annotated[Tensor, Spmd(tp=I)]:
    """Mean over the unmasked tokens of this rank's micro-batch (the same on every tp rank)."""
    return (token_loss * loss_mask).sum() / loss_mask.sum().clamp(min=1.0)


def lm_loss_step(
    embedding: VocabParallelEmbedding,
    hidden: Hidden,
    target: TokenIds,
    loss_mask: Annotated[Tensor, Spmd(tp=I, nograd=True)],
) -> Annotated[Tensor, Spmd(tp=I)]:
    """Tied LM head, vocab-parallel loss and its mean; backward from an I loss is right on every rank."""
    logits = parallel_lm_logits(hidden, embedding.weight)
    loss = masked_mean_loss(vocab_parallel_cross_entropy_typed(
        logits, target, embedding.vocab_start_index, embedding.vocab_end_index
    ), loss_mask)
    loss.backward()
    return loss.detach()
