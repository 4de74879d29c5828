# megatron-core 0.16.1's tensor-parallel mapping functions (signatures only).
# The SPMD type of each call comes from the plugin (spmd_mypy/plugin/megatron.py,
# keyed by fullname through spmd_mypy/vocab/megatron.py), not from here.
from typing import Any, List, Literal, Optional, overload

from torch import Tensor
from torch.distributed import ProcessGroup

def copy_to_tensor_model_parallel_region(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor: ...
def reduce_from_tensor_model_parallel_region(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor: ...
def scatter_to_tensor_model_parallel_region(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor: ...
def gather_from_tensor_model_parallel_region(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor: ...
def scatter_to_sequence_parallel_region(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor: ...
@overload
def gather_from_sequence_parallel_region(
    input_: Tensor,
    tensor_parallel_output_grad: Literal[True] = True,
    group: Optional[ProcessGroup] = None,
    output_split_sizes: Optional[List[int]] = None,
    use_global_buffer: bool = False,
) -> Tensor: ...
@overload
def gather_from_sequence_parallel_region(
    input_: Tensor,
    tensor_parallel_output_grad: Literal[False],
    group: Optional[ProcessGroup] = None,
    output_split_sizes: None = None,
    use_global_buffer: bool = False,
) -> Tensor: ...
@overload
def gather_from_sequence_parallel_region(
    input_: Tensor,
    tensor_parallel_output_grad: bool = True,
    group: Optional[ProcessGroup] = None,
    output_split_sizes: Optional[List[int]] = None,
    use_global_buffer: bool = False,
) -> Tensor: ...
def reduce_scatter_to_sequence_parallel_region(
    input_: Tensor,
    group: Optional[ProcessGroup] = None,
    input_split_sizes: Optional[List[int]] = None,
    use_global_buffer: bool = False,
) -> Tensor: ...
def all_gather_last_dim_from_tensor_parallel_region(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor: ...
def reduce_scatter_last_dim_to_tensor_parallel_region(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor: ...
def all_to_all(
    group: ProcessGroup,
    input_: Tensor,
    output_split_sizes_: Optional[List[int]] = None,
    input_split_sizes: Optional[List[int]] = None,
) -> Tensor: ...
def all_to_all_sp2hp(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor: ...
def all_to_all_hp2sp(input_: Tensor, group: Optional[ProcessGroup] = None) -> Tensor: ...
def __getattr__(name: str) -> Any: ...
