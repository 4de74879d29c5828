# spmd_types.rules: type-level operations used inside spmd_typecheck bodies.
# Opaque to spmd-mypy (it reads the body's assert_type calls instead).
from typing import Any

def __getattr__(name: str) -> Any: ...
