"""SPMD types <-> the mypy types that carry them.

A carrier is SpmdTensor[Literal["<canonical>"]]; a plain Tensor (or a carrier
of a non-literal argument, as after joining two branches) is unknown.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ..vocab.spec import SpecError, Spmd, read_canonical
from . import _mypy

_PARSED: Dict[str, Optional[Spmd]] = {}


def spmd_of(typ: Optional[_mypy.Type]) -> Optional[Spmd]:
    """The SPMD type a mypy type carries; None when unknown or not a tensor."""
    text = _mypy.carried(typ)
    return None if text is None else spmd_of_text(text)


def spmd_of_text(text: str) -> Optional[Spmd]:
    """The SPMD type a carrier's canonical string says; None if it says none."""
    hit = _PARSED.get(text, _PARSED)
    if hit is _PARSED:
        try:
            hit = read_canonical(text)
        except SpecError:  # a hand-written SpmdTensor[Literal["garbage"]]
            hit = None
        _PARSED[text] = hit
    return hit  # type: ignore[return-value]


def carrier(api: Any, spmd: Spmd) -> _mypy.Type:
    """The mypy type for a tensor of type `spmd` (checker side)."""
    return _mypy.carrier_in_checker(api, spmd.canonical())
