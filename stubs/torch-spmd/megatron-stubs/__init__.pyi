# Partial stubs for megatron-core (PEP 561 stub-only package, "partial" in
# py.typed): only megatron.core.tensor_parallel's mappings and parallel
# layers, and the tensor-parallel group getter, are typed here.
from typing import Any

def __getattr__(name: str) -> Any: ...
