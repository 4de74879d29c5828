"""Stand-in for picotron's tp_communications: autograd Functions on the global tp group."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from tp_functions import all_reduce, gather, get_group, split


class CopyToModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tensor:
        return all_reduce(grad_output, get_group())


class ReduceFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return all_reduce(x, get_group())

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tensor:
        return grad_output


class GatherFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return gather(x, x.dim() - 1, get_group())

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tensor:
        return split(grad_output, grad_output.dim() - 1, get_group())


class LinearWithAsyncAllReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor) -> Tensor:
        raise NotImplementedError("not needed by the tests")
