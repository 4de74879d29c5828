"""A torchtitan-style block annotated for spmd_types (fresh): a StrEnum of axis
names, a group declared as an axis, assert_type with dicts and
PartitionSpecs, a vocab-parallel loss Function with a typecheck_forward, an
spmd_typecheck Function, a local_map kernel and a no_typecheck region."""

from __future__ import annotations

import enum
from typing import Annotated

import torch
import torch.distributed as dist
import torch.nn.functional as F

import spmd_mypy
import spmd_types as spmd

TpGroup = Annotated[dist.ProcessGroup, spmd_mypy.Axis("tp")]


class Axis(enum.StrEnum):
    DP = enum.auto()
    TP = enum.auto()


@spmd.register_autograd_function
class _VocabParallelNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, group: TpGroup) -> torch.Tensor:  # type: ignore[override]
        local_max = logits.amax(dim=-1, keepdim=True)
        dist.all_reduce(local_max, op=dist.ReduceOp.MAX, group=group)
        return (logits - local_max).exp().sum(dim=-1).log()

    @staticmethod
    def typecheck_forward(logits: torch.Tensor, labels: torch.Tensor, group: TpGroup) -> torch.Tensor:
        spmd.assert_type(logits, {Axis.DP: spmd.S(0), group: spmd.S(-1)})
        spmd.assert_type(labels, {Axis.DP: spmd.S(0), group: spmd.I})
        loss = _VocabParallelNLL.apply(logits, labels, group)
        out_type = dict(spmd.get_local_type(logits))
        out_type[group] = spmd.I
        spmd.assert_type(loss, out_type)
        return loss

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        return grad, None, None


class _ColumnLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x @ w.T

    @staticmethod
    def spmd_typecheck(outputs: torch.Tensor, *, x: torch.Tensor, w: torch.Tensor) -> None:
        spmd.assert_type(x, {"tp": spmd.R})
        spmd.assert_type(w, {"tp": spmd.S(0)})
        spmd.assert_type_like(outputs, x, {"tp": spmd.S(-1)})

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        return grad, grad


@spmd.local_map(in_types=({"tp": spmd.S(-1)},), out_types={"tp": spmd.V})
def _rotary(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def block(x: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor, tp: TpGroup) -> torch.Tensor:
    spmd.assert_type(x, {Axis.DP: spmd.S(0), Axis.TP: spmd.I})
    spmd.assert_type(w_up, {Axis.TP: spmd.S(0)})
    spmd.assert_type(w_down, {"tp": spmd.S(1)})
    h = spmd.convert(x, Axis.TP, src=spmd.I, dst=spmd.R)
    h = _ColumnLinear.apply(h, w_up)
    h = F.silu(_rotary(h))
    partial = spmd.reinterpret(h @ w_down.T, tp, src=spmd.V, dst=spmd.P)
    return spmd.all_reduce(partial, tp, src=spmd.P, dst=spmd.I)


def loss(logits: torch.Tensor, labels: torch.LongTensor, tp: TpGroup) -> torch.Tensor:
    spmd.assert_type(logits, spmd.V, spmd.PartitionSpec("dp", "tp"))
    spmd.assert_type(labels, {"dp": spmd.S(0), "tp": spmd.I})
    per_token = _VocabParallelNLL.apply(logits, labels, tp)
    with spmd.no_typecheck():
        total = per_token.sum()
        dist.all_reduce(total)
    spmd.assert_type(total, {"dp": spmd.I, "tp": spmd.I})
    return total / labels.numel()


def scale_grads(g: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(g, {"dp": spmd.P})
    g = spmd.mutate_type(g, "dp", src=spmd.P, dst=spmd.R)
    return g
