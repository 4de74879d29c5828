"""Writes to attributes: the value assigned to a member expression, typed
ahead of the checker without messages (parameters.py checks it)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from mypy.nodes import (
    AssignmentStmt,
    CallExpr,
    ConditionalExpr,
    Context,
    Expression,
    MemberExpr,
    OpExpr,
    RefExpr,
    Statement,
)
from mypy.types import Type

from .carriers import check_owner
from .tree import inner_blocks


class _WrittenValues:
    """lvalue -> rvalue of the member assignments (`self.w = e`) of the
    function the checker is in (of the whole file when a write is not found
    there, or at module level), indexed on the first write a hook asks about
    in it: most writes are in a short __init__, so the rest of the file is
    not walked."""

    __slots__ = ("owner", "scope", "values", "whole")

    def __init__(self) -> None:
        self.owner: object = None
        self.scope: object = None  # the function indexed (None: the whole file)
        self.values: Dict[int, Expression] = {}
        self.whole = False


_WRITTEN = _WrittenValues()


def _index_member_assignments(stmts: List[Statement], values: Dict[int, Expression]) -> None:
    """Every `obj.attr = e` among `stmts`, in nested blocks, functions and classes."""
    for stmt in stmts:
        if isinstance(stmt, AssignmentStmt):
            for lvalue in stmt.lvalues:
                if isinstance(lvalue, MemberExpr):
                    values[id(lvalue)] = stmt.rvalue
        else:
            for block in inner_blocks(stmt):
                _index_member_assignments(block.body, values)


def written_value(api: Any, lvalue: Context) -> Optional[Expression]:
    """The value assigned to the member expression `lvalue` in a plain
    assignment (None for `+=`, tuple targets and other writes)."""
    owner = check_owner(api)
    tree = getattr(api, "tree", None)
    if owner is None or tree is None:
        return None
    func = api.scope.current_function()
    written = _WRITTEN
    if owner is not written.owner or (func is not written.scope and not written.whole):
        written.owner, written.scope, written.values, written.whole = None, func, {}, func is None
        _index_member_assignments(func.body.body if func is not None else tree.defs, written.values)
        written.owner = owner
    found = written.values.get(id(lvalue))
    if found is None and not written.whole:  # a write outside the function's own body
        written.whole = True
        _index_member_assignments(tree.defs, written.values)
        found = written.values.get(id(lvalue))
    return found


# Calls whose result is a plain tensor whatever their arguments: a write of
# one holds no SPMD type yet, known without typing the value ahead.
_PLAIN_TENSOR_CALLS = frozenset({"torch.nn.parameter.Parameter"})


def plain_tensor_call(expr: Expression) -> bool:
    """`nn.Parameter(...)`: the value of most attribute writes in __init__."""
    return (
        isinstance(expr, CallExpr)
        and isinstance(expr.callee, RefExpr)
        and expr.callee.fullname in _PLAIN_TENSOR_CALLS
    )


def quietly_typed(api: Any, expr: Expression) -> Type:
    """The type of `expr`, typed ahead of the checker if it has none yet,
    with no message and nothing stored (the checker types it again, and
    reports, where it gets to it)."""
    found = api.lookup_type_or_none(expr)
    if found is not None:
        return found
    with api.msg.filter_errors(), api.local_type_map:
        return api.expr_checker.accept(expr)


def branches(expr: Expression, with_or: bool = False) -> List[Expression]:
    """The values a written expression may be: the branches of `a if c else b`
    (and with `with_or` the operands of `a or b`), nested, else the
    expression itself."""
    if isinstance(expr, ConditionalExpr):
        return branches(expr.if_expr, with_or) + branches(expr.else_expr, with_or)
    if with_or and isinstance(expr, OpExpr) and expr.op == "or":
        return branches(expr.left, with_or) + branches(expr.right, with_or)
    return [expr]


def parameter_calls(expr: Expression) -> List[Expression]:
    """The `nn.Parameter(...)` calls a written value is: itself, or the
    branches of `a if c else b` (`nn.Parameter(...) if bias else None`)."""
    if isinstance(expr, ConditionalExpr):
        return parameter_calls(expr.if_expr) + parameter_calls(expr.else_expr)
    return [expr] if plain_tensor_call(expr) else []
