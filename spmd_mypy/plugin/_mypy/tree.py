"""The stub module `spmd_phantom` in checked trees, and walking statements.

The rewrite passes (route_declared, wrap_untyped) turn expressions into calls
of the stub's functions, `_spmd_phantom_.<name>(e)`; this module makes and
recognises those calls, and lists the blocks and functions of a statement
list for every pass that walks one."""

from __future__ import annotations

from typing import Dict, Generic, Iterable, Iterator, List, Optional, Tuple, TypeVar

from mypy.nodes import (
    ARG_POS,
    Block,
    CallExpr,
    ClassDef,
    Decorator,
    Expression,
    ForStmt,
    FuncDef,
    IfStmt,
    MatchStmt,
    MemberExpr,
    NameExpr,
    OverloadedFuncDef,
    Statement,
    TryStmt,
    WhileStmt,
    WithStmt,
)


PHANTOM_MODULE = "spmd_phantom"
PHANTOM_ALIAS = "_spmd_phantom_"  # the name a rewritten tree binds the stub module to
RETURNED = f"{PHANTOM_MODULE}.returned"  # route_declared: `return e`
ASSIGNED = f"{PHANTOM_MODULE}.assigned"  # route_declared: `y: T = e`
REASSIGNED = f"{PHANTOM_MODULE}.reassigned"  # route_declared: `ys = xs`, ys declared a list or dict
UNTYPED = f"{PHANTOM_MODULE}.untyped"  # wrap_untyped: calls torch leaves untyped
# route_declared: `Batch(tokens=xs)`, the callee again and the key as more arguments
KEYWORD_ITEM = f"{PHANTOM_MODULE}.keyword_item"
TRUSTED_APPLY = f"{PHANTOM_MODULE}.trusted_apply"  # trusted_classes: an autograd Function's apply


def is_phantom_call(expr: Expression, callee: Optional[str] = None) -> bool:
    """A call the rewrite made: of the stub module's `callee` (any function if None)."""
    func = expr.callee if isinstance(expr, CallExpr) else None
    return (
        isinstance(func, MemberExpr)
        and isinstance(func.expr, NameExpr)
        and func.expr.name == PHANTOM_ALIAS
        and (callee is None or func.name == callee.rsplit(".", 1)[1])
    )


def unwrapped(expr: Expression) -> Expression:
    """The value as written inside the rewrite passes' calls (`returned(e)`,
    `assigned(e)`, `reassigned(xs)`, `untyped(e)`, `keyword_item(xs, Batch,
    "tokens")`): `e`; any other expression as it is."""
    while (
        isinstance(expr, CallExpr)
        and is_phantom_call(expr)
        and (len(expr.args) == 1 or len(expr.args) == 3 and is_phantom_call(expr, KEYWORD_ITEM))
    ):
        expr = expr.args[0]
    return expr


def is_untyped_wrapper(expr: Expression) -> bool:
    return is_phantom_call(expr, UNTYPED)


def wrap_in_phantom(expr: Expression, callee: str, *more: Expression) -> Expression:
    """`_spmd_phantom_.<callee>(expr, *more)`, placed where `expr` is."""
    if is_phantom_call(expr):
        return expr  # already rewritten
    module = NameExpr(PHANTOM_ALIAS)
    func = MemberExpr(module, callee[_SHORT:])
    if more:
        call = CallExpr(func, [expr, *more], [ARG_POS] * (1 + len(more)), [None] * (1 + len(more)))
    else:
        call = CallExpr(func, [expr], [ARG_POS], [None])
    line, column, end_line, end_column = expr.line, expr.column, expr.end_line, expr.end_column
    module.set_line(line, column, end_line, end_column)
    func.set_line(line, column, end_line, end_column)
    call.set_line(line, column, end_line, end_column)
    return call


def copied_name(expr: Expression) -> Optional[Expression]:
    """A fresh copy of a name or dotted name (`Batch`, `types.Batch`), at the
    same place; None for any other expression."""
    if type(expr) is NameExpr:
        out: Expression = NameExpr(expr.name)
    elif type(expr) is MemberExpr:
        inner = copied_name(expr.expr)
        if inner is None:
            return None
        out = MemberExpr(inner, expr.name)
    else:
        return None
    out.set_line(expr.line, expr.column, expr.end_line, expr.end_column)
    return out


_SHORT = len(PHANTOM_MODULE) + 1  # `spmd_phantom.returned`[_SHORT:]: the stub's function


def sub_blocks(stmt: Statement) -> List[Block]:
    if isinstance(stmt, IfStmt):
        return [*stmt.body, *([stmt.else_body] if stmt.else_body else [])]
    if isinstance(stmt, (WhileStmt, ForStmt)):
        return [stmt.body, *([stmt.else_body] if stmt.else_body else [])]
    if isinstance(stmt, WithStmt):
        return [stmt.body]
    if isinstance(stmt, TryStmt):
        extra = [b for b in (stmt.else_body, stmt.finally_body) if b is not None]
        return [stmt.body, *stmt.handlers, *extra]
    if isinstance(stmt, MatchStmt):
        return list(stmt.bodies)
    if isinstance(stmt, Block):
        return [stmt]
    return []


def flat_statements(block: Block) -> List[Statement]:
    """A body's statements and those of the blocks nested in them, in order,
    not entering nested functions and classes."""
    out: List[Statement] = []
    for stmt in block.body:
        out.append(stmt)
        if not isinstance(stmt, (FuncDef, Decorator, ClassDef)):
            for inner in sub_blocks(stmt):
                out += flat_statements(inner)
    return out


def inner_blocks(stmt: Statement) -> List[Block]:
    """The blocks directly in a statement: a function's or class's body, a
    compound statement's blocks."""
    if isinstance(stmt, Decorator):
        return [stmt.func.body]
    if isinstance(stmt, FuncDef):
        return [stmt.body]
    if isinstance(stmt, OverloadedFuncDef):
        items = [*stmt.items, *([stmt.impl] if stmt.impl else [])]
        return [i.func.body if isinstance(i, Decorator) else i.body for i in items]
    if isinstance(stmt, ClassDef):
        return [stmt.defs]
    return sub_blocks(stmt)


def blocks_in(stmts: List[Statement]) -> Iterator[Block]:
    """Every block among `stmts`: bodies of functions, classes and compound statements."""
    for stmt in stmts:
        for block in inner_blocks(stmt):
            yield block
            yield from blocks_in(block.body)


def functions_of(stmts: List[Statement]) -> Iterable[FuncDef]:
    """The outermost functions among `stmts` and in the classes there
    (nested functions are part of their enclosing function's body)."""
    for stmt in stmts:
        if isinstance(stmt, Decorator):
            yield stmt.func
        elif isinstance(stmt, FuncDef):
            yield stmt
        elif isinstance(stmt, OverloadedFuncDef):
            yield from functions_of([*stmt.items, *([stmt.impl] if stmt.impl else [])])
        elif isinstance(stmt, ClassDef):
            yield from functions_of(stmt.defs.body)
        else:
            for block in sub_blocks(stmt):
                yield from functions_of(block.body)


def dotted_name(expr: Expression, bindings: Dict[str, str]) -> Optional[str]:
    """The full dotted name `expr` spells (`dist.all_reduce`, `torch.special.erf`)
    with its first name resolved through `bindings` (the module's imports);
    None for anything else."""
    if isinstance(expr, NameExpr):
        return bindings.get(expr.name)
    if isinstance(expr, MemberExpr):
        base = dotted_name(expr.expr, bindings)
        return None if base is None else f"{base}.{expr.name}"
    return None


T = TypeVar("T")


class BodyMemo(Generic[T]):
    """What was read from a function's body while mypy still held it: mypy
    frees a module's function bodies once it has checked it (and a cached
    module has none), while a reader in another module may still ask
    (an autograd Function applied elsewhere).  Kept by the node, which the
    entry keeps alive; an edited function (daemon) is a new node."""

    _LIMIT = 4096  # a long daemon session: drop what edits left behind

    def __init__(self) -> None:
        self._kept: Dict[int, Tuple[FuncDef, T]] = {}

    def put(self, func: FuncDef, value: T) -> None:
        if len(self._kept) >= self._LIMIT:
            self._kept.clear()
        self._kept[id(func)] = (func, value)

    def get(self, func: FuncDef) -> Optional[Tuple[T]]:
        """(the value,) read from `func` while its body was whole, else None."""
        kept = self._kept.get(id(func))
        return (kept[1],) if kept is not None and kept[0] is func else None


# Attributes of mypy nodes that point away from the node's own subtree (definitions,
# analysed or expanded copies) or hold types rather than expressions.
_NOT_CHILDREN = frozenset({
    "node", "analyzed", "info", "original_def", "def_var", "var", "expanded", "type",
    "unanalyzed_type", "unanalyzed_items", "original_decorators", "removed_statements",
    "removed_base_type_exprs", "names", "imports", "raw_data", "alias_deps", "type_args",
})
_ATTRS: Dict[type, Tuple[str, ...]] = {}


def child_attrs(cls: type) -> Tuple[str, ...]:
    """The attributes of a mypy node class that may hold child nodes (mypyc
    lists them), for a walk of every node of a subtree."""
    hit = _ATTRS.get(cls)
    if hit is None:
        names: List[str] = []
        for klass in cls.__mro__:
            names += [n for n in getattr(klass, "__mypyc_attrs__", ()) if n not in names]
        hit = _ATTRS[cls] = tuple(n for n in names if n not in _NOT_CHILDREN and not n.startswith("_"))
    return hit
