"""Whether a value is the only one its target is ever assigned.

The constructors that keep their elements' classes in the type
(`nn.ModuleList([Block(...)])` -> ModuleListOf[Block], `nn.Sequential(A(),
B())` -> SequentialOf[Tuple[A, B]]) give a type no other value fits: where
the same attribute or name is assigned another list of modules in another
branch (`if flag: self.mlp = nn.Sequential(A()) else: self.mlp =
nn.Sequential(B())`), mypy would report the second assignment.  Such a
target keeps torch's plain type (modules.py asks here first)."""

from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional

from mypy.nodes import (
    AssignmentStmt,
    Block,
    Decorator,
    Expression,
    FuncDef,
    MemberExpr,
    NameExpr,
    OverloadedFuncDef,
    Statement,
    TupleExpr,
)

from .tree import flat_statements


def assigned_once(api: Any, value: Expression) -> bool:
    """Whether the statement `target = value` in the function the checker is
    in is the only assignment to its target: a name, in that function; an
    attribute `self.<name>`, in every method of its class.  True when
    `value` is assigned to nothing (an argument, a return) or to anything
    else, and at module level."""
    scope = getattr(api, "scope", None)
    if scope is None:
        return True
    fn = scope.current_function()
    if not isinstance(fn, FuncDef):
        return True
    target = _target_of(fn.body, value)
    if isinstance(target, NameExpr):
        return _count(fn.body, lambda t: isinstance(t, NameExpr) and t.name == target.name) == 1
    if isinstance(target, MemberExpr) and isinstance(target.expr, NameExpr) and target.expr.name == "self":
        info = scope.active_class()
        bodies = list(_method_bodies(info.defn.defs.body)) if info is not None else [fn.body]
        name = target.name

        def same(t: Expression) -> bool:
            return isinstance(t, MemberExpr) and isinstance(t.expr, NameExpr) and t.expr.name == "self" and t.name == name

        return sum(_count(body, same) for body in bodies) == 1
    return True


def _target_of(body: Block, value: Expression) -> Optional[Expression]:
    for stmt in flat_statements(body):
        if isinstance(stmt, AssignmentStmt) and stmt.rvalue is value and len(stmt.lvalues) == 1:
            return stmt.lvalues[0]
    return None


def _count(body: Block, matches: Callable[[Expression], bool]) -> int:
    return sum(1 for stmt in flat_statements(body) for t in _targets(stmt) if matches(t))


def _targets(stmt: Statement) -> List[Expression]:
    if not isinstance(stmt, AssignmentStmt):
        return []
    out: List[Expression] = []
    for lvalue in stmt.lvalues:
        out += lvalue.items if isinstance(lvalue, TupleExpr) else [lvalue]
    return out


def _method_bodies(stmts: List[Statement]) -> Iterator[Block]:
    for stmt in stmts:
        if isinstance(stmt, OverloadedFuncDef):
            yield from _method_bodies([*stmt.items, *([stmt.impl] if stmt.impl is not None else [])])
        elif isinstance(stmt, Decorator):
            yield stmt.func.body
        elif isinstance(stmt, FuncDef):
            yield stmt.body
