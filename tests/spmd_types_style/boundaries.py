"""Programs written for spmd_types with its regions and boundaries, in the style
of its real users: a registered autograd Function with a typecheck_forward
(the reduce of a row-parallel layer), one with the keyword spmd_typecheck
built from rules.* (a row-parallel GEMM and its all-reduce), a local_map kernel, a no_typecheck
region followed by an assert, an is_type_checking() block, and integer
labels that meet a replicated value.  test_agreement.py checks them with
spmd-mypy (no message) and runs them under spmd_types' runtime checker on
simulated ranks (the values of one process)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
import spmd_types as spmd
from spmd_types import rules


@spmd.register_autograd_function
class _SumOverTP(torch.autograd.Function):
    """Forward: the sum of each rank's pending partial product; backward: identity."""

    @staticmethod
    def forward(ctx, partial: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        out = partial.clone()
        dist.all_reduce(out, group=dist.group.WORLD)
        return out

    @staticmethod
    def typecheck_forward(partial: torch.Tensor) -> torch.Tensor:
        spmd.assert_type(partial, {"tp": spmd.P})
        summed = _SumOverTP.apply(partial)
        spmd.assert_type(summed, {"tp": spmd.I})
        return summed

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return grad


@spmd.local_map(in_types=({"tp": spmd.S(1)}, {"tp": spmd.S(1)}), out_types={"tp": spmd.P})
def _partial_scores(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Each rank's product over its slice of the hidden dim (a local kernel):
    a pending sum, declared where the local products are made."""
    return spmd.reinterpret(h @ w.T, "tp", src=spmd.V, dst=spmd.P)


def row_parallel(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(h, {"tp": spmd.S(1)})
    spmd.assert_type(w, {"tp": spmd.S(1)})
    return _SumOverTP.apply(_partial_scores(h, w))


def gathered_rows(x: torch.Tensor) -> torch.Tensor:
    """A ragged-looking gather done by hand in an unchecked region, typed after it."""
    spmd.assert_type(x, {"tp": spmd.S(0)})
    with spmd.no_typecheck():
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x)
        full = torch.cat(parts, dim=0)
    spmd.assert_type(full, {"tp": spmd.R})
    return full * 2


def masked_nll(logits: torch.Tensor, labels: torch.LongTensor) -> torch.Tensor:
    """Mean NLL of replicated logits at integer labels (no gradient: I mixes with R)."""
    if spmd.is_type_checking():
        spmd.assert_type(logits, {"tp": spmd.R})
        spmd.assert_type(labels, {"tp": spmd.I})
    keep = labels >= 0
    picked = F.log_softmax(logits, dim=-1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(picked * keep).sum() / keep.sum()


@spmd.register_autograd_function
class _LinearAllReduce(torch.autograd.Function):
    """Row-parallel GEMM finished by an all-reduce over tp, its rule in
    spmd_types' keyword form: the einsum over the sharded label is the
    declared pending sum, the all_reduce makes it whole."""

    @staticmethod
    def spmd_typecheck(*, h, w):  # type: ignore[no-untyped-def]
        y = rules.einsum("mk,nk->mn", h, w)
        return rules.all_reduce(y, "tp", src=spmd.P, dst=spmd.I)

    @staticmethod
    def forward(ctx, h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        y = h @ w.T
        dist.all_reduce(y, group=dist.group.WORLD)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple:  # type: ignore[override]
        return grad, grad


def linear_all_reduce(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(h, {"tp": spmd.S(1)})
    spmd.assert_type(w, {"tp": spmd.S(1)})
    return _LinearAllReduce.apply(h, w)
