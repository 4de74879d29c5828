"""Stand-in for megatron-core's tensor_parallel.mappings (same names and signatures)."""

from __future__ import annotations

from typing import Any, List, Optional

from torch import Tensor
from torch.distributed import ProcessGroup

from tp_functions import Copy, Gather, Reduce, ReduceScatter, Split


def copy_to_tensor_model_parallel_region(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor:
    return Copy.apply(input_, group)  # type: ignore[no-any-return]


def reduce_from_tensor_model_parallel_region(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor:
    return Reduce.apply(input_, group)  # type: ignore[no-any-return]


def scatter_to_tensor_model_parallel_region(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor:
    return Split.apply(input_, -1, group)  # type: ignore[no-any-return]


def gather_from_tensor_model_parallel_region(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor:
    return Gather.apply(input_, -1, False, group)  # type: ignore[no-any-return]


def scatter_to_sequence_parallel_region(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor:
    return Split.apply(input_, 0, group)  # type: ignore[no-any-return]


def gather_from_sequence_parallel_region(
    input_: Tensor,
    tensor_parallel_output_grad: bool = True,
    group: Optional[ProcessGroup] = None,
    output_split_sizes: Optional[List[int]] = None,
    use_global_buffer: bool = False,
) -> Tensor:
    return Gather.apply(input_, 0, tensor_parallel_output_grad, group)  # type: ignore[no-any-return]


def reduce_scatter_to_sequence_parallel_region(
    input_: Tensor,
    group: Optional[ProcessGroup] = None,
    input_split_sizes: Optional[List[int]] = None,
    use_global_buffer: bool = False,
) -> Tensor:
    return ReduceScatter.apply(input_, 0, group)  # type: ignore[no-any-return]


def all_to_all(group: ProcessGroup, input_: Tensor, output_split_sizes_: Any = None, input_split_sizes: Any = None) -> Tensor:
    raise NotImplementedError("not needed by the tests")
