"""Reading expressions: literal values of arguments, callee names, and the
short source-like text hints quote."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    CallExpr,
    Context,
    EllipsisExpr,
    Expression,
    FloatExpr,
    IndexExpr,
    IntExpr,
    ListExpr,
    MemberExpr,
    NameExpr,
    RefExpr,
    SliceExpr,
    StrExpr,
    TupleExpr,
    UnaryExpr,
)
from mypy.types import Instance, get_proper_type

from .tree import is_untyped_wrapper


def fullname_of(expr: Expression) -> Optional[str]:
    if isinstance(expr, RefExpr):
        node = expr.node
        return getattr(node, "fullname", None) or expr.fullname or None
    return None


def str_value(expr: Expression) -> Optional[str]:
    return expr.value if isinstance(expr, StrExpr) else None


def str_tuple(expr: Expression) -> Optional[Tuple[str, ...]]:
    if isinstance(expr, TupleExpr):
        values = [str_value(e) for e in expr.items]
        if all(v is not None for v in values):
            return tuple(values)  # type: ignore[arg-type]
    return None


def int_value(expr: Expression) -> Optional[int]:
    if isinstance(expr, IntExpr):
        return expr.value
    if isinstance(expr, UnaryExpr) and expr.op == "-" and isinstance(expr.expr, IntExpr):
        return -expr.expr.value
    return None


NOT_LITERAL: Any = object()  # literal_value of an expression that is not a literal


def literal_value(expr: Expression, api: Any = None) -> Any:
    """The Python value of a literal argument (ints, floats, strings, True/False/None,
    tuples and lists of them, slices, ...); NOT_LITERAL otherwise.  With `api`, an
    index that is not literal reads as "int" (an int value) or "slice" (a slice)."""
    if isinstance(expr, IntExpr) or isinstance(expr, FloatExpr) or isinstance(expr, StrExpr):
        return expr.value
    if isinstance(expr, UnaryExpr) and expr.op == "-" and isinstance(expr.expr, (IntExpr, FloatExpr)):
        return -expr.expr.value
    if isinstance(expr, NameExpr) and expr.fullname in _CONSTANTS:
        return _CONSTANTS[expr.fullname]
    if isinstance(expr, EllipsisExpr):
        return Ellipsis
    if isinstance(expr, (TupleExpr, ListExpr)):
        items = [literal_value(e, api) for e in expr.items]
        return NOT_LITERAL if any(i is NOT_LITERAL for i in items) else tuple(items)
    if isinstance(expr, SliceExpr):
        parts = [None if e is None else literal_value(e) for e in (expr.begin_index, expr.end_index, expr.stride)]
        if any(x is NOT_LITERAL for x in parts):
            return "slice" if api is not None else NOT_LITERAL
        return slice(*parts)
    if api is not None:
        p = get_proper_type(api.get_expression_type(expr))
        if isinstance(p, Instance) and p.type.fullname == "builtins.int":
            return "int"
    return NOT_LITERAL


_CONSTANTS = {"builtins.True": True, "builtins.False": False, "builtins.None": None}


def call_parts(expr: Expression) -> Optional[Tuple[Optional[str], List[Expression], List[Tuple[str, Expression]]]]:
    """(callee fullname, positional args, keyword args) of a call expression."""
    if not isinstance(expr, CallExpr):
        return None
    pos = [a for a, k in zip(expr.args, expr.arg_kinds) if k == ARG_POS]
    kws = [(n, a) for a, k, n in zip(expr.args, expr.arg_kinds, expr.arg_names) if k == ARG_NAMED and n]
    return fullname_of(expr.callee), pos, kws


def is_true(expr: Expression) -> bool:
    return isinstance(expr, NameExpr) and expr.fullname == "builtins.True"


def is_false(expr: Expression) -> bool:
    return isinstance(expr, NameExpr) and expr.fullname == "builtins.False"


def operator_sides(context: Context) -> Optional[Tuple[str, str]]:
    """Source text of the left and right operands of `a op b`, `a op= b`, `a < b`."""
    left = getattr(context, "left", None)
    right = getattr(context, "right", None)
    if left is None:
        left, right = getattr(context, "lvalue", None), getattr(context, "rvalue", None)
    if left is None:
        operands = getattr(context, "operands", None)
        if operands and len(operands) >= 2:
            left, right = operands[0], operands[1]
    if isinstance(left, Expression) and isinstance(right, Expression):
        return expr_text(left), expr_text(right)
    return None


def expr_text(expr: Expression) -> str:
    """A short source-like rendering of an argument, for hints."""
    if isinstance(expr, NameExpr):
        return expr.name
    if isinstance(expr, MemberExpr):
        base = expr_text(expr.expr)
        return f"{base}.{expr.name}"
    if isinstance(expr, CallExpr) and is_untyped_wrapper(expr) and len(expr.args) == 1:
        return expr_text(expr.args[0])  # the call as written
    if isinstance(expr, CallExpr) and isinstance(expr.callee, (NameExpr, MemberExpr)):
        return f"{expr_text(expr.callee)}(...)"
    if isinstance(expr, IndexExpr):
        return f"{expr_text(expr.base)}[...]"
    return "x"


def display_items(expr: Expression) -> Optional[List[Expression]]:
    """The items of a list or tuple display `[a, b]` / `(a, b)`, else None."""
    if isinstance(expr, (ListExpr, TupleExpr)):
        return list(expr.items)
    return None
