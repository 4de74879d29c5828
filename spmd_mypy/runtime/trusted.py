"""spmd.trusted: a trusted boundary -- declared types in and out, body unchecked.

    copy_to_region = spmd.trusted(_CopyToModelParallelRegion.apply,
                                  in_types=(Spmd(tp=I), None), out_types=Spmd(tp=R))
    fused = spmd.trusted(flash_attn_func, in_types=(...), out_types=Spmd(tp=V))

    @spmd.trusted(in_types=(Spmd(tp=V),), out_types=Spmd(tp=V))
    def fused_attention(q: Tensor) -> Tensor: ...

The checker types a call of the result by in_types (each positional
argument; None for a non-tensor; a decorated method's self is not counted)
and out_types (the result, or a tuple of results), and checks nothing
inside fn: the declaration is trusted, as the name says.  At runtime the
call goes straight to fn.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Protocol, Tuple, TypeVar, Union, overload

from ..vocab.spec import Spmd

__all__ = ["TrustedDecorator", "trusted"]

F = TypeVar("F", bound=Callable[..., Any])
TypesArg = Union[None, Spmd, Tuple[Optional[Spmd], ...]]


class TrustedDecorator(Protocol):
    """What `trusted(in_types=..., out_types=...)` without fn returns: the
    decorator.  The checker retypes the function it decorates by the
    declared types (spmd_mypy/plugin/local_map.py)."""

    def __call__(self, fn: F, /) -> F: ...


def _check(name: str, value: object) -> None:
    items = value if isinstance(value, tuple) else (value,)
    if not all(v is None or isinstance(v, Spmd) for v in items):
        raise TypeError(f"spmd.trusted: {name} takes Spmd(...) or None entries, got {value!r}")


@overload
def trusted(fn: F, *, in_types: TypesArg = ..., out_types: TypesArg = ...) -> F: ...


@overload
def trusted(fn: None = None, *, in_types: TypesArg = ..., out_types: TypesArg = ...) -> TrustedDecorator: ...


def trusted(fn: Optional[F] = None, *, in_types: TypesArg = None, out_types: TypesArg = None) -> Any:
    """fn with declared SPMD types (in_types per positional argument, out_types
    for the result) that the checker trusts without looking inside."""
    _check("in_types", in_types)
    _check("out_types", out_types)

    def wrap(f: F) -> F:
        if isinstance(f, type):  # a class (an autograd Function): marked, unchanged
            f.__spmd_trusted_types__ = (in_types, out_types)  # type: ignore[attr-defined]
            return f

        @functools.wraps(f)
        def boundary(*args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs)

        boundary.__spmd_trusted_types__ = (in_types, out_types)  # type: ignore[attr-defined]
        return boundary  # type: ignore[return-value]

    return wrap if fn is None else wrap(fn)
