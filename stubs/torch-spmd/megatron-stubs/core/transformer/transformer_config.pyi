# megatron-core 0.16.1's TransformerConfig, as ModelParallelConfig: a few
# fields declared, the others Any.  activation_func is the MLP's elementwise
# activation (F.gelu by default; megatron's MLP calls it on the column-parallel
# output), so it is declared spmd.Activation where megatron-core says
# Callable: a module storing it (`self.activation_func =
# config.activation_func`) has its calls typed as F.gelu's would be, and an
# unreduced (P) operand is an error (spmd_mypy/runtime/activation.py).
from typing import Any, Optional

from megatron.core.model_parallel_config import ModelParallelConfig
from spmd_mypy.runtime.activation import Activation

class TransformerConfig(ModelParallelConfig):
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    ffn_hidden_size: Optional[int]
    kv_channels: Optional[int]
    add_bias_linear: bool
    gated_linear_unit: bool
    activation_func: Activation
    bias_activation_fusion: bool

def __getattr__(name: str) -> Any: ...
