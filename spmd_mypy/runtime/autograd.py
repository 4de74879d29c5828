"""One autograd Function for every collective and coercion.

Forward runs the primitive steps' kernels; backward runs the kernels of the
backward steps the vocabulary's table gives (reversed).  Under
create_graph=True the backward is itself applied through this Function, so
double backward follows the same table (the backward of a backward is the
forward); otherwise the kernels run directly, which saves an autograd node.
"""

from __future__ import annotations

import functools
from typing import Any, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..vocab.collectives import Step, backward
from .kernels import Sizes, run, split_pair
from .mesh import Comm

__all__ = ["apply_steps"]

_backward_steps = functools.lru_cache(maxsize=None)(backward)


def _swap_if_all_to_all(steps: Tuple[Step, ...], sizes: Sizes) -> Sizes:
    # all_to_all's sizes are (src sizes, dst sizes); its backward runs dst -> src.
    if sizes is not None and steps[0].op == "all_to_all":
        src_sizes, dst_sizes = split_pair(sizes)
        return (dst_sizes, src_sizes)
    return sizes


class _SpmdFunction(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, x: Tensor, steps: Tuple[Step, ...], comm: Comm, sizes: Sizes
    ) -> Tensor:
        ctx.steps, ctx.comm, ctx.sizes = steps, comm, sizes
        for step in steps:
            x = run(step, x, comm, sizes)
        return x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], None, None, None]:
        if torch.compiler.is_compiling():  # Dynamo traces the table, not the cache
            steps = backward(ctx.steps)
        else:
            steps = _backward_steps(ctx.steps)
        sizes = _swap_if_all_to_all(ctx.steps, ctx.sizes)
        if torch.is_grad_enabled():  # create_graph=True: make the backward differentiable
            return _SpmdFunction.apply(grad, steps, ctx.comm, sizes), None, None, None
        for step in steps:
            grad = run(step, grad, ctx.comm, sizes)
        return grad, None, None, None


def apply_steps(x: Tensor, steps: Sequence[Step], comm: Comm, sizes: Sizes) -> Tensor:
    if not steps:
        return x
    return _SpmdFunction.apply(x, tuple(steps), comm, sizes)
