"""Python's operators on tensors: one row each.

A row names the operator by its dunder core (`add` for `x + y`), how a
message writes it, its op class (opclasses.py's names), the torch function
it is (the factor row global mode propagates it by), and which of its forms
exist: reflected (`y.__radd__(x)` for `x + y`), in-place (`x += y`), numbers
as operands (`x + 1.0`), a result without gradient (comparisons).  Every
table that knows operators (opclasses' classes, scalar operands, reflected
and in-place dunders, results without gradient; opnames' symbols and
functions; the factor table's pointwise rows) is derived from these rows, so
a new operator is one row here.
"""

from __future__ import annotations

from typing import Dict, Final, FrozenSet, NamedTuple, Optional, Tuple

__all__ = [
    "Operator",
    "OPERATORS",
    "dunders",
    "class_rows",
    "symbols",
    "functions",
    "scalar_dunders",
    "reflected_dunders",
    "inplace_dunders",
    "nograd_dunders",
    "pointwise_dunders",
]


class Operator(NamedTuple):
    core: str  # the dunder without underscores: "add" for __add__
    symbol: str  # how a message writes it
    cls: str  # its op class (opclasses: "linear", "multilinear", "divide", "nonlinear")
    function: Optional[str]  # the torch function it is, for global mode (None: none)
    reflected: bool = False  # __r<core>__ exists
    inplace: bool = False  # __i<core>__ exists
    scalars: bool = False  # numbers are operands (x + 1.0)
    nograd: bool = False  # the result carries no gradient (a comparison)
    pointwise: bool = True  # elementwise (the factor table's pointwise family)


OPERATORS: Final[Tuple[Operator, ...]] = (
    Operator("add", "+", "linear", "add", reflected=True, inplace=True, scalars=True),
    Operator("sub", "-", "linear", "sub", reflected=True, inplace=True, scalars=True),
    Operator("mul", "*", "multilinear", "mul", reflected=True, inplace=True, scalars=True),
    Operator("truediv", "/", "divide", "div", reflected=True, inplace=True, scalars=True),
    Operator("matmul", "@", "multilinear", "matmul", reflected=True, inplace=True, pointwise=False),
    Operator("neg", "unary -", "linear", "neg"),
    Operator("pos", "unary +", "linear", "positive"),
    Operator("getitem", "indexing", "linear", None, pointwise=False),
    Operator("pow", "**", "nonlinear", "pow", reflected=True, scalars=True, pointwise=False),
    Operator("gt", ">", "nonlinear", "gt", nograd=True),
    Operator("ge", ">=", "nonlinear", "ge", nograd=True),
    Operator("lt", "<", "nonlinear", "lt", nograd=True),
    Operator("le", "<=", "nonlinear", "le", nograd=True),
    Operator("eq", "==", "nonlinear", "eq", nograd=True),
    Operator("ne", "!=", "nonlinear", "ne", nograd=True),
)


def dunders(op: Operator) -> Dict[str, str]:
    """Each dunder of `op` -> how a message writes it."""
    out = {f"__{op.core}__": op.symbol}
    if op.reflected:
        out[f"__r{op.core}__"] = op.symbol
    if op.inplace:
        out[f"__i{op.core}__"] = op.symbol + "="
    return out


def class_rows() -> Dict[str, str]:
    """dunder -> op class, for every operator not nonlinear (the default class)."""
    return {d: op.cls for op in OPERATORS if op.cls != "nonlinear" for d in dunders(op)}


def symbols() -> Dict[str, str]:
    return {d: s for op in OPERATORS for d, s in dunders(op).items()}


def functions() -> Dict[str, str]:
    """dunder core -> torch function (reflected cores read as their base)."""
    return {op.core: op.function for op in OPERATORS if op.function is not None}


def scalar_dunders() -> FrozenSet[str]:
    return frozenset(d for op in OPERATORS if op.scalars for d in dunders(op))


def reflected_dunders() -> FrozenSet[str]:
    return frozenset(f"__r{op.core}__" for op in OPERATORS if op.reflected)


def inplace_dunders() -> Dict[str, str]:
    """In-place dunder -> its out-of-place dunder."""
    return {f"__i{op.core}__": f"__{op.core}__" for op in OPERATORS if op.inplace}


def nograd_dunders() -> FrozenSet[str]:
    return frozenset(d for op in OPERATORS if op.nograd for d in dunders(op))


def pointwise_dunders() -> FrozenSet[str]:
    return frozenset(d for op in OPERATORS if op.pointwise for d in dunders(op))
