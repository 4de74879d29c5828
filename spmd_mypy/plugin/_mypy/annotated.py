"""`Annotated[X, ...]` as mypy's type analyzer reads it: the plugin's hook of
Annotated itself (reading.annotated_hook) asks here what X is, so that an
Spmd(...) beside something that is not a Tensor is never dropped in silence."""

from __future__ import annotations

from typing import Optional, Tuple

from mypy.plugin import AnalyzeTypeContext
from mypy.types import ANNOTATED_TYPE_NAMES, Instance, Type, UnboundType, get_proper_type

from .carriers import PARAMETER, TENSOR

ANNOTATED = tuple(ANNOTATED_TYPE_NAMES)  # typing.Annotated, typing_extensions.Annotated
_READ = frozenset({TENSOR, PARAMETER})


def annotated_inner(ctx: AnalyzeTypeContext) -> Optional[Type]:
    """X analysed, which is mypy's whole reading of `Annotated[X, ...]`; None
    with fewer than two arguments (mypy's own error for that is wanted)."""
    args = ctx.type.args
    if len(args) < 2:
        return None
    api = ctx.api
    return api.anal_type(args[0], allow_typed_dict_special_forms=api.allow_typed_dict_special_forms)  # type: ignore[attr-defined]


def bare_first(ctx: AnalyzeTypeContext) -> Optional[Tuple[str, Tuple[int, int]]]:
    """X's name as written and its position, when X is a bare name (`DTensor`,
    `torch.Tensor`, an alias) and metadata follows; None for X with
    arguments, a union, a string, and for fewer than two arguments."""
    args = ctx.type.args
    if len(args) < 2:
        return None  # Annotated[X] or a bare Annotated: mypy's own error
    first = args[0]
    if first.__class__ is not UnboundType or first.args:  # type: ignore[attr-defined]
        return None
    return first.name, (first.line, first.column)  # type: ignore[attr-defined]


def read_class(inner: Type) -> Optional[str]:
    """TENSOR or PARAMETER when X is exactly that class (the classes whose
    Spmd(...) the plugin reads), else None."""
    p = get_proper_type(inner)
    if isinstance(p, Instance) and p.type.fullname in _READ:
        return p.type.fullname
    return None

