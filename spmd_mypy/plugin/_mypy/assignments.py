"""Whether a value is the only one its target is ever assigned.

The constructors that keep their elements' classes in the type
(`nn.ModuleList([Block(...)])` -> ModuleListOf[Block], `nn.Sequential(A(),
B())` -> SequentialOf[Tuple[A, B]]) give a type no other value fits: where
the same attribute or name is assigned another list of modules in another
branch (`if flag: self.mlp = nn.Sequential(A()) else: self.mlp =
nn.Sequential(B())`), mypy would report the second assignment.  Such a
target keeps torch's plain type (modules.py asks here first).

A container made empty (`nn.ModuleList()`, `nn.ModuleDict()`) and filled
afterwards (`self.layers.append(Block(...))`, `self.layers[str(i)] =
Block(...)`, torchtitan's way) keeps its elements' class only when every
write of the class's methods puts in a module of one class
(written_modules); any other way of filling it keeps torch's type."""

from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional, Tuple

from mypy.nodes import (
    AssignmentStmt,
    Block,
    CallExpr,
    Decorator,
    Expression,
    ExpressionStmt,
    FuncDef,
    IndexExpr,
    MemberExpr,
    NameExpr,
    OperatorAssignmentStmt,
    OverloadedFuncDef,
    RefExpr,
    Statement,
    TupleExpr,
    TypeInfo,
)
from mypy.types import AnyType, Instance, TypeOfAny, get_proper_type

from .members import module_class
from .tree import flat_statements


def assigned_once(api: Any, value: Expression) -> bool:
    """Whether the statement `target = value` in the function the checker is
    in is the only assignment to its target: a name, in that function; an
    attribute `self.<name>`, in every method of its class.  True when
    `value` is assigned to nothing (an argument, a return) or to anything
    else, and at module level."""
    scanned = _scope_of_target(api, value)
    if scanned is None:
        return True
    bodies, same = scanned
    return sum(_count(body, same) for body in bodies) == 1


def written_modules(api: Any, value: Expression) -> Optional[List[Instance]]:
    """For `target = value` in the function the checker is in, the modules
    written into target by the statements of every method of its class (of
    that function, for a name): `target[k] = M(...)`, `target.append(M(...))`,
    `target.insert(i, M(...))`, each M a module class or a function declared
    to return one.  None when target is filled any other way (extend,
    update, add_module, `+=`, a value of no known class).  Writes are not
    looked for (none found) where `value` is assigned to nothing, to
    another target than a name or `self.<name>`, or at module level."""
    scanned = _scope_of_target(api, value)
    if scanned is None:
        return []
    bodies, same = scanned
    found: List[Instance] = []
    for body in bodies:
        for stmt in flat_statements(body):
            written = _written(stmt, same)
            if written is None:
                return None
            found += written
    return found


def _scope_of_target(api: Any, value: Expression) -> Optional[Tuple[List[Block], Callable[[Expression], bool]]]:
    """For `target = value` in the function the checker is in, the bodies
    where target can be written and what matches it: a name, in that
    function; `self.<name>`, in every method of its class.  None where
    `value` is assigned to nothing, to another target, or at module level."""
    scope = getattr(api, "scope", None)
    fn = scope.current_function() if scope is not None else None
    if not isinstance(fn, FuncDef):
        return None
    target = _target_of(fn.body, value)
    if isinstance(target, NameExpr):
        return [fn.body], _same_name(target.name)
    if isinstance(target, MemberExpr) and isinstance(target.expr, NameExpr) and target.expr.name == "self":
        info = fn.info or None  # the class of a method (active_class is None inside one)
        bodies = list(_method_bodies(info.defn.defs.body)) if info is not None else [fn.body]
        return bodies, _same_attribute(target.name)
    return None


def _written(stmt: Statement, same: Callable[[Expression], bool]) -> Optional[List[Instance]]:
    """The modules `stmt` writes into the container `same` matches (None:
    a write of another form, or of a value of no known module class)."""
    values: List[Expression] = []
    if isinstance(stmt, AssignmentStmt):
        values = [stmt.rvalue for t in stmt.lvalues if isinstance(t, IndexExpr) and same(t.base)]
    elif isinstance(stmt, OperatorAssignmentStmt) and same(stmt.lvalue):
        return None
    elif isinstance(stmt, ExpressionStmt) and isinstance(stmt.expr, CallExpr):
        callee = stmt.expr.callee
        if isinstance(callee, MemberExpr) and same(callee.expr):
            if callee.name in _READS:
                return []
            if callee.name not in _PUTS or len(stmt.expr.args) != _PUTS[callee.name]:
                return None
            values = [stmt.expr.args[-1]]
    classes = [_made_module(v) for v in values]
    return None if any(c is None for c in classes) else classes  # type: ignore[return-value]


# the container methods that put one module in (their number of arguments), and those that write none
_PUTS = {"append": 1, "insert": 2}
_READS = frozenset({"pop", "clear", "keys", "values", "items", "__getitem__", "__len__", "__contains__", "train", "eval", "to", "cuda", "apply", "requires_grad_", "zero_grad"})


def _made_module(value: Expression) -> Optional[Instance]:
    """The module class `value` makes: a call of a module class, or of a
    function declared to return a module instance; None for anything else."""
    callee = value.callee if isinstance(value, CallExpr) else None
    node = callee.node if isinstance(callee, RefExpr) else None
    if isinstance(node, Decorator):
        node = node.func
    if isinstance(node, TypeInfo):
        found: Any = Instance(node, [AnyType(TypeOfAny.special_form)] * len(node.defn.type_vars))
    elif isinstance(node, FuncDef) and node.type is not None:
        found = get_proper_type(getattr(node.type, "ret_type", None))
    else:
        return None
    return module_class(found)


def _same_name(name: str) -> Callable[[Expression], bool]:
    return lambda t: isinstance(t, NameExpr) and t.name == name


def _same_attribute(name: str) -> Callable[[Expression], bool]:
    return lambda t: isinstance(t, MemberExpr) and isinstance(t.expr, NameExpr) and t.expr.name == "self" and t.name == name


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
