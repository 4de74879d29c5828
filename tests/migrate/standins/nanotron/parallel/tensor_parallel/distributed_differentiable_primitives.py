"""Stand-in for nanotron's distributed_differentiable_primitives (same names; dim-0 gathers)."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import Tensor
from torch.distributed import ProcessGroup

from tp_functions import Copy, Gather, Reduce, ReduceScatter, all_reduce, get_group


class DifferentiableIdentity(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Tensor, group: Optional[ProcessGroup]) -> Tensor:
        ctx.group = get_group(group)
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return all_reduce(grad_output, ctx.group), None


class DifferentiableAllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Tensor, group: Optional[ProcessGroup]) -> Tensor:
        return all_reduce(tensor, get_group(group))

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tuple[Tensor, None]:
        return grad_output, None


def differentiable_identity(tensor: Tensor, group: Optional[ProcessGroup] = None) -> Tensor:
    return Copy.apply(tensor, group)  # type: ignore[no-any-return]


def differentiable_all_reduce_sum(tensor: Tensor, group: Optional[ProcessGroup] = None) -> Tensor:
    return Reduce.apply(tensor, group)  # type: ignore[no-any-return]


def differentiable_all_gather(tensor: Tensor, group: Optional[ProcessGroup] = None) -> Tensor:
    return Gather.apply(tensor, 0, True, group)  # type: ignore[no-any-return]


def differentiable_reduce_scatter_sum(tensor: Tensor, group: Optional[ProcessGroup] = None) -> Tensor:
    return ReduceScatter.apply(tensor, 0, group)  # type: ignore[no-any-return]
