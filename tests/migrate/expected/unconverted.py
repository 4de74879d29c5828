"""Calls the codemod must report and leave alone (test input; never run)."""

from __future__ import annotations

from typing import Any, List

import torch
from torch import Tensor

from megatron.core import tensor_parallel as tp
from megatron.mpu import gather_from_sequence_parallel_region as neox_gather
from picotron.tensor_parallel.tp_communications import LinearWithAsyncAllReduce
import spmd_mypy as spmd
from spmd_mypy import I, P


class MyAllReduce(torch.autograd.Function):
    """A local Function: not in the table."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        return grad


def cases(x: Tensor, args: List[Any], flag: bool, dim: int, w: Tensor) -> List[Tensor]:
    return [
        tp.copy_to_tensor_model_parallel_region(*args),
        tp.gather_from_sequence_parallel_region(x, tensor_parallel_output_grad=flag),
        tp.gather_from_sequence_parallel_region(x, use_global_buffer=True),
        neox_gather(x, seq_dim=dim),
        MyAllReduce.apply(x),
        LinearWithAsyncAllReduce.apply(x, w),
        tp.all_to_all(None, x),
        tp.reduce_from_tensor_model_parallel_region(
            x,  # the partial sums
            group=None,  # the tp group
        ),
        tp.scatter_to_tensor_model_parallel_region(x, bogus=1),
        spmd.all_reduce(x, "tp", src=P, dst=I),  # converted
    ]


HELPER = tp.copy_to_tensor_model_parallel_region
