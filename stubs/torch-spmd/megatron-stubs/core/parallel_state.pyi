# Only the tensor-parallel group getter is typed; the rest of the module is Any.
from typing import Any

from torch.distributed import ProcessGroup

def get_tensor_model_parallel_group(check_initialized: bool = True) -> ProcessGroup: ...
def __getattr__(name: str) -> Any: ...
