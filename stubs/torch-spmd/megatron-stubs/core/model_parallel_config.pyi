# megatron-core 0.16.1's ModelParallelConfig, a dataclass of about a hundred
# fields: the fields user code branches on are declared, every other field
# reads as Any (__getattr__), and the constructor takes the dataclass's
# fields as keywords unchecked.  tests/interop/test_megatron_stubs.py checks
# each declared field against the installed dataclass.
from typing import Any

class ModelParallelConfig:
    tensor_model_parallel_size: int
    pipeline_model_parallel_size: int
    sequence_parallel: bool
    def __init__(self, *args: Any, **kwargs: Any) -> None: ...
    def __getattr__(self, name: str) -> Any: ...
    def __setattr__(self, name: str, value: Any) -> None: ...

def __getattr__(name: str) -> Any: ...
