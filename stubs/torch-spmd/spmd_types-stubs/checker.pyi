from typing import Any, Literal, Optional
from contextlib import AbstractContextManager

from . import is_type_checking as is_type_checking, local_map as local_map, no_typecheck as no_typecheck

def typecheck(strict_mode: Optional[Literal["permissive", "strict"]] = None, local: Optional[bool] = None) -> AbstractContextManager[Any]: ...

SpmdTypeMode: Any
