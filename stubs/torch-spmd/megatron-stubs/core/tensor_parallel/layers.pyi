# megatron-core 0.16.1's tensor-parallel layers (signatures only).
#
# Each layer is generic over the flags that change its output layout, so that
# the flags chosen at construction reach the call: ColumnParallelLinear over
# (gather_output, sequence_parallel), RowParallelLinear over
# (input_is_parallel, sequence_parallel), VocabParallelEmbedding over
# reduce_scatter_embeddings.  The constructor's overloads set the first from
# the literal flag (bool when it is not a literal); sequence_parallel comes from
# config.sequence_parallel, which no constructor argument shows, so it stays
# `bool` unless the attribute is declared, e.g.
#     self.proj: RowParallelLinear[Literal[True], Literal[False]] = RowParallelLinear(...)
# The SPMD types of a call come from the plugin (spmd_mypy/plugin/megatron.py).
from typing import Any, Callable, Generic, List, Literal, Optional, Tuple, overload

from torch import Tensor
from torch.distributed import ProcessGroup
from torch.nn import Module
from typing_extensions import TypeVar

_Flag = TypeVar("_Flag", bound=bool, default=bool)
_SequenceParallel = TypeVar("_SequenceParallel", bound=bool, default=bool)

class ColumnParallelLinear(Module, Generic[_Flag, _SequenceParallel]):
    input_size: int
    output_size: int
    gather_output: bool
    skip_bias_add: bool
    sequence_parallel: bool
    weight: Optional[Tensor]
    bias: Optional[Tensor]
    @overload
    def __init__(
        self: ColumnParallelLinear[Literal[False], _SequenceParallel],
        input_size: int,
        output_size: int,
        *,
        config: Any,
        init_method: Callable[..., Any],
        bias: bool = True,
        gather_output: Literal[False] = False,
        stride: int = 1,
        keep_master_weight_for_test: bool = False,
        skip_bias_add: bool = False,
        skip_weight_param_allocation: bool = False,
        embedding_activation_buffer: Optional[List[Tensor]] = None,
        grad_output_buffer: Optional[List[Tensor]] = None,
        is_expert: bool = False,
        tp_comm_buffer_name: Optional[str] = None,
        disable_grad_reduce: bool = False,
        tp_group: Optional[ProcessGroup] = None,
    ) -> None: ...
    @overload
    def __init__(
        self: ColumnParallelLinear[Literal[True], _SequenceParallel],
        input_size: int,
        output_size: int,
        *,
        config: Any,
        init_method: Callable[..., Any],
        bias: bool = True,
        gather_output: Literal[True],
        stride: int = 1,
        keep_master_weight_for_test: bool = False,
        skip_bias_add: bool = False,
        skip_weight_param_allocation: bool = False,
        embedding_activation_buffer: Optional[List[Tensor]] = None,
        grad_output_buffer: Optional[List[Tensor]] = None,
        is_expert: bool = False,
        tp_comm_buffer_name: Optional[str] = None,
        disable_grad_reduce: bool = False,
        tp_group: Optional[ProcessGroup] = None,
    ) -> None: ...
    @overload
    def __init__(
        self: ColumnParallelLinear[bool, _SequenceParallel],
        input_size: int,
        output_size: int,
        *,
        config: Any,
        init_method: Callable[..., Any],
        bias: bool = True,
        gather_output: bool = False,
        stride: int = 1,
        keep_master_weight_for_test: bool = False,
        skip_bias_add: bool = False,
        skip_weight_param_allocation: bool = False,
        embedding_activation_buffer: Optional[List[Tensor]] = None,
        grad_output_buffer: Optional[List[Tensor]] = None,
        is_expert: bool = False,
        tp_comm_buffer_name: Optional[str] = None,
        disable_grad_reduce: bool = False,
        tp_group: Optional[ProcessGroup] = None,
    ) -> None: ...
    def forward(
        self, input_: Tensor, weight: Optional[Tensor] = None, runtime_gather_output: Optional[bool] = None
    ) -> Tuple[Tensor, Optional[Tensor]]: ...
    def __call__(
        self, input_: Tensor, weight: Optional[Tensor] = None, runtime_gather_output: Optional[bool] = None
    ) -> Tuple[Tensor, Optional[Tensor]]: ...

class RowParallelLinear(Module, Generic[_Flag, _SequenceParallel]):
    input_size: int
    output_size: int
    input_is_parallel: bool
    skip_bias_add: bool
    sequence_parallel: bool
    weight: Tensor
    bias: Optional[Tensor]
    @overload
    def __init__(
        self: RowParallelLinear[Literal[True], _SequenceParallel],
        input_size: int,
        output_size: int,
        *,
        config: Any,
        init_method: Callable[..., Any],
        bias: bool,
        input_is_parallel: Literal[True],
        skip_bias_add: bool,
        stride: int = 1,
        keep_master_weight_for_test: bool = False,
        is_expert: bool = False,
        tp_comm_buffer_name: Optional[str] = None,
        tp_group: Optional[ProcessGroup] = None,
    ) -> None: ...
    @overload
    def __init__(
        self: RowParallelLinear[Literal[False], _SequenceParallel],
        input_size: int,
        output_size: int,
        *,
        config: Any,
        init_method: Callable[..., Any],
        bias: bool,
        input_is_parallel: Literal[False],
        skip_bias_add: bool,
        stride: int = 1,
        keep_master_weight_for_test: bool = False,
        is_expert: bool = False,
        tp_comm_buffer_name: Optional[str] = None,
        tp_group: Optional[ProcessGroup] = None,
    ) -> None: ...
    @overload
    def __init__(
        self: RowParallelLinear[bool, _SequenceParallel],
        input_size: int,
        output_size: int,
        *,
        config: Any,
        init_method: Callable[..., Any],
        bias: bool,
        input_is_parallel: bool,
        skip_bias_add: bool,
        stride: int = 1,
        keep_master_weight_for_test: bool = False,
        is_expert: bool = False,
        tp_comm_buffer_name: Optional[str] = None,
        tp_group: Optional[ProcessGroup] = None,
    ) -> None: ...
    def forward(self, input_: Tensor) -> Tuple[Tensor, Optional[Tensor]]: ...
    def __call__(self, input_: Tensor) -> Tuple[Tensor, Optional[Tensor]]: ...

class VocabParallelEmbedding(Module, Generic[_Flag]):
    num_embeddings: int
    embedding_dim: int
    reduce_scatter_embeddings: bool
    weight: Tensor
    @overload
    def __init__(
        self: VocabParallelEmbedding[Literal[False]],
        num_embeddings: int,
        embedding_dim: int,
        *,
        init_method: Callable[..., Any],
        reduce_scatter_embeddings: Literal[False] = False,
        config: Any,
        tp_group: Optional[ProcessGroup] = None,
    ) -> None: ...
    @overload
    def __init__(
        self: VocabParallelEmbedding[Literal[True]],
        num_embeddings: int,
        embedding_dim: int,
        *,
        init_method: Callable[..., Any],
        reduce_scatter_embeddings: Literal[True],
        config: Any,
        tp_group: Optional[ProcessGroup] = None,
    ) -> None: ...
    @overload
    def __init__(
        self: VocabParallelEmbedding[bool],
        num_embeddings: int,
        embedding_dim: int,
        *,
        init_method: Callable[..., Any],
        reduce_scatter_embeddings: bool = False,
        config: Any,
        tp_group: Optional[ProcessGroup] = None,
    ) -> None: ...
    def forward(self, input_: Tensor) -> Tensor: ...
    def __call__(self, input_: Tensor) -> Tensor: ...

def __getattr__(name: str) -> Any: ...
