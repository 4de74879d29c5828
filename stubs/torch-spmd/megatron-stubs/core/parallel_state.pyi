# Only the tensor-parallel group and rank getters are typed; the rest of the
# module is Any.  The plugin types the rank as a rank number on the Megatron
# axis (spmd_mypy/plugin/ranks.py).
from typing import Any

from torch.distributed import ProcessGroup

def get_tensor_model_parallel_group(check_initialized: bool = True) -> ProcessGroup: ...
def get_tensor_model_parallel_rank() -> int: ...
def __getattr__(name: str) -> Any: ...
