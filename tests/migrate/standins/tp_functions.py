"""Stand-in tensor-parallel autograd Functions shared by the stand-in packages.

Written the way Megatron-style codebases write them: raw torch.distributed
collectives on plain tensors inside torch.autograd.Function forward/backward,
on a process group (None: the group set by `set_group`, else the default
group).  Test inputs only: the migration tests run programs on these and on
their migrated, typed versions and compare the gradients.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

_GROUP: List[Optional[dist.ProcessGroup]] = [None]


def set_group(group: Optional[dist.ProcessGroup]) -> None:
    _GROUP[0] = group


def get_group(group: Optional[dist.ProcessGroup] = None) -> Optional[dist.ProcessGroup]:
    return _GROUP[0] if group is None else group


def _size(group: Optional[dist.ProcessGroup]) -> int:
    return dist.get_world_size(group=group)


def all_reduce(x: Tensor, group: Optional[dist.ProcessGroup]) -> Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out


def split(x: Tensor, dim: int, group: Optional[dist.ProcessGroup]) -> Tensor:
    n = _size(group)
    return torch.chunk(x, n, dim=dim)[dist.get_rank(group=group)].contiguous()


def gather(x: Tensor, dim: int, group: Optional[dist.ProcessGroup]) -> Tensor:
    pieces = [torch.empty_like(x) for _ in range(_size(group))]
    dist.all_gather(pieces, x.contiguous(), group=group)
    return torch.cat(pieces, dim=dim)


def reduce_scatter(x: Tensor, dim: int, group: Optional[dist.ProcessGroup]) -> Tensor:
    return split(all_reduce(x, group), dim, group)


class Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, group: Optional[dist.ProcessGroup] = None) -> Tensor:
        ctx.group = get_group(group)
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, None]:
        return all_reduce(grad, ctx.group), None


class Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, group: Optional[dist.ProcessGroup] = None) -> Tensor:
        return all_reduce(x, get_group(group))

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, None]:
        return grad, None


class Split(torch.autograd.Function):
    """Keep this rank's chunk of `dim`; the gradient is gathered back."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, dim: int, group: Optional[dist.ProcessGroup] = None) -> Tensor:
        ctx.dim, ctx.group = dim, get_group(group)
        return split(x, dim, ctx.group)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, None, None]:
        return gather(grad, ctx.dim, ctx.group), None, None


class Gather(torch.autograd.Function):
    """Gather `dim`; the gradient is reduce-scattered (reduce=True) or split back."""

    @staticmethod
    def forward(
        ctx: Any, x: Tensor, dim: int, reduce: bool, group: Optional[dist.ProcessGroup] = None
    ) -> Tensor:
        ctx.dim, ctx.reduce, ctx.group = dim, reduce, get_group(group)
        return gather(x, dim, ctx.group)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, None, None, None]:
        if ctx.reduce:
            return reduce_scatter(grad, ctx.dim, ctx.group), None, None, None
        return split(grad, ctx.dim, ctx.group), None, None, None


class ReduceScatter(torch.autograd.Function):
    """Sum and keep this rank's chunk of `dim`; the gradient is gathered."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, dim: int, group: Optional[dist.ProcessGroup] = None) -> Tensor:
        ctx.dim, ctx.group = dim, get_group(group)
        return reduce_scatter(x, dim, ctx.group)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, None, None]:
        return gather(grad, ctx.dim, ctx.group), None, None
