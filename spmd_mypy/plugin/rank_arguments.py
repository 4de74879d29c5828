"""Values that meet a declared rank number, or an int where a rank is given.

`Annotated[int, Spmd(tp=V)]` declares a rank number (reading._rank_number):
an int that may differ by rank on tp.  Any int of no other axis fits it (0
is a valid value of every rank type).  A rank number that differs on an axis
the declaration does not name is an error: where a value is returned or
written (check_rank_value), and where it is passed to a parameter declared a
plain `int` or a rank number of fewer axes (check_rank_argument), whose
function body was checked as if every rank held one value there.  Used by
ranks.through_call (user function calls), relation.call_through (module
calls), declared.py (returns, annotated assignments) and parameters.py
(attribute writes).
"""

from __future__ import annotations

from typing import Any, List, Optional, Set

from ..vocab.localtype import V
from ..vocab.spec import Spmd
from . import _mypy
from .callsite import joined_rank
from .carrier import spmd_of_text
from .errors import SPMD_ARG


def declared_rank(declared: Optional[_mypy.Type]) -> bool:
    """A type declared a rank number (`Annotated[int, Spmd(tp=V)]`)."""
    return bool(_mypy.declared_rank_text(declared))


def check_rank_value(api: Any, expr: Any, got: _mypy.Type, declared: _mypy.Type, what: str, code: Any) -> None:
    """A value returned or written where a rank number is declared."""
    text = _mypy.declared_rank_text(declared)
    extra = _beyond(got, text)
    if not extra:
        return
    _mypy.fail(
        api,
        f"{what} differs by rank on {_axes(extra)} ({_mypy.expr_text(expr)} is a rank number) where the "
        f"declared rank number does not: what reads it would take one value for every rank. Hint: declare "
        f"it Annotated[int, Spmd({_spec(extra, text)})]",
        expr,
        code,
    )


def check_rank_argument(api: Any, label: str, name: Optional[str], expr: Any, typ: _mypy.Type, param: _mypy.Type) -> None:
    """An argument of type `typ` for a parameter declared `param`: a rank
    number that differs where an `int` parameter (or a rank number of fewer
    axes) is one value on every rank is spmd-arg."""
    text = _mypy.declared_rank_text(param)
    extra = _beyond(typ, text) if text is not None else []
    if not extra:
        return
    _mypy.fail(
        api,
        f"{label} differs by rank on {_axes(extra)} ({_mypy.expr_text(expr)} is a rank number) where the "
        f"parameter is one value on every rank there: the function's body was checked as if it were, so what "
        f"it computes from it (a mask, an offset, a slice) would be typed wrong. Hint: declare the parameter "
        f"{name or 'it'}: Annotated[int, Spmd({_spec(extra, text)})]",
        expr,
        SPMD_ARG,
    )


def _beyond(got: _mypy.Type, declared: Optional[str]) -> List[str]:
    """The axes the rank numbers in `got` differ on and the declared rank
    type (its canonical string; "" or None: a plain int) does not; "*" for
    every axis (the default group's rank)."""
    value = joined_rank(_mypy.rank_texts(got))
    if value is None:
        return []
    allowed = spmd_of_text(declared) if declared else None
    out = [a for a, t in value.axes.items() if t is V and not (allowed is not None and allowed.axis_type(a) is V)]
    if value.rest is V and (allowed is None or allowed.rest is not V):
        out.append("*")
    return out


def _axes(extra: List[str]) -> str:
    return "every axis" if "*" in extra else ", ".join(repr(a) for a in extra)


def _spec(extra: List[str], declared: Optional[str]) -> str:
    """The keyword arguments of the Spmd(...) that declares both the axes
    given and those declared before."""
    before: Optional[Spmd] = spmd_of_text(declared) if declared else None
    names: Set[str] = {a for a in extra if a != "*"}
    if before is not None:
        names |= {a for a, t in before.axes.items() if t is V}
    spec = ", ".join(f"{a}=V" for a in sorted(names))
    if "*" in extra:  # the default group's rank: no Spmd(...) names every axis of a mesh it does not know
        spec = f"{spec + ', ' if spec else ''}<each mesh axis>=V"
    return spec
