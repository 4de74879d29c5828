# megatron-core 0.16.1's megatron.core.transformer: TransformerConfig is
# stubbed (transformer_config.pyi); the package's other names are Any.
from typing import Any

from .transformer_config import TransformerConfig as TransformerConfig

def __getattr__(name: str) -> Any: ...
