# The carrier of SPMD types inside mypy (type-check time only; nothing imports
# this at runtime).
#
# The mypy plugin represents "a Tensor whose SPMD type is T" as
# SpmdTensor[Literal["<canonical form of T>"]], e.g.
# SpmdTensor[Literal["dp=R, tp=S(1)"]].  A generic subclass of Tensor with a
# Literal argument survives inference, containers, unions, the incremental
# cache and the daemon; equality of types is equality of the canonical
# strings (spmd_mypy.vocab.spec).  SpmdTensor[Any] is a tensor of unknown
# SPMD type.  Pyright and other checkers without plugins see a plain Tensor.

from typing import Any, Generic, TypeVar

from torch import Tensor

_S_co = TypeVar("_S_co", covariant=True)

class SpmdTensor(Tensor, Generic[_S_co]): ...

class SpmdAttr(Generic[_S_co]):
    """A tensor attribute declared in a class body (an nn.Module parameter).

    Reading it gives SpmdTensor[_S_co]; assigning any Tensor to it is allowed
    (the usual `self.w = nn.Parameter(...)` in __init__).
    """

    def __get__(self, obj: object, owner: object) -> SpmdTensor[_S_co]: ...
    def __set__(self, obj: object, value: Tensor) -> None: ...

class SpmdOptAttr(Generic[_S_co]):
    """An Optional tensor attribute declared in a class body (an optional bias)."""

    def __get__(self, obj: object, owner: object) -> SpmdTensor[_S_co] | None: ...
    def __set__(self, obj: object, value: Tensor | None) -> None: ...

# The plugin routes `return e` and `y: Annotated[...] = e` of files that use
# spmd through these two (see spmd_mypy/plugin/declared.py): their hooks check
# the value against the declared type per axis.  Never called at runtime.
def returned(value: object) -> Any: ...
def assigned(value: object) -> Any: ...
