"""Stand-in for gpt-neox's megatron.mpu.mappings (same names and signatures; the model-parallel group)."""

from __future__ import annotations

from torch import Tensor

from tp_functions import Copy, Gather, Reduce, ReduceScatter, Split


def copy_to_model_parallel_region(input_: Tensor) -> Tensor:
    return Copy.apply(input_)  # type: ignore[no-any-return]


def reduce_from_model_parallel_region(input_: Tensor) -> Tensor:
    return Reduce.apply(input_)  # type: ignore[no-any-return]


def scatter_to_model_parallel_region(input_: Tensor) -> Tensor:
    return Split.apply(input_, input_.dim() - 1)  # type: ignore[no-any-return]


def gather_from_model_parallel_region(input_: Tensor) -> Tensor:
    return Gather.apply(input_, input_.dim() - 1, False)  # type: ignore[no-any-return]


def reduce_scatter_to_sequence_parallel_region(input_: Tensor, seq_dim: int = 0) -> Tensor:
    return ReduceScatter.apply(input_, seq_dim)  # type: ignore[no-any-return]


def gather_from_sequence_parallel_region(input_: Tensor, seq_dim: int = 0) -> Tensor:
    return Gather.apply(input_, seq_dim, True)  # type: ignore[no-any-return]


def scatter_to_sequence_parallel_region(input_: Tensor, seq_dim: int = 1) -> Tensor:
    return Split.apply(input_, seq_dim)  # type: ignore[no-any-return]
