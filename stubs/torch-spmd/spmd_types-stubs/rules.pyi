# spmd_types.rules: type-level operations used inside spmd_typecheck bodies.
# Opaque to mypy; spmd-mypy reads a keyword spmd_typecheck body built of these calls
# (plugin/spmd_types_rules.py) by their names.
from typing import Any

def __getattr__(name: str) -> Any: ...
