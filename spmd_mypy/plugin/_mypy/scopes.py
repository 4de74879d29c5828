"""Where the checker is: the function it is checking (by qualified name), and
the function an expression names, for the communication report
(plugin/comm_sites.py) and spmd.reveal_comms."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from mypy.nodes import (
    CallExpr,
    Decorator,
    Expression,
    FuncItem,
    LambdaExpr,
    MemberExpr,
    OverloadedFuncDef,
    RefExpr,
    TypeInfo,
)

MODULE_SCOPE = "<module>"


def checking_function(api: Any) -> str:
    """The qualified name (Class.method, outer.inner) of the function the checker
    is in, MODULE_SCOPE at module level; a lambda counts as the function around it."""
    scope = getattr(api, "scope", None)
    parts = []
    for item in getattr(scope, "stack", ())[1:]:
        if isinstance(item, TypeInfo):
            parts.append(item.name)
        elif isinstance(item, FuncItem) and not isinstance(item, LambdaExpr):
            parts.append(item.name)
    return ".".join(parts) or MODULE_SCOPE


def bodies_not_checked_yet(api: Any) -> bool:
    """At module level in a mypy that checks the module's top level before the
    bodies of its functions (its interface phase): no body has been checked."""
    scope = getattr(api, "scope", None)
    at_top = scope is None or scope.current_function() is None
    return at_top and not getattr(api, "recurse_into_functions", True)


def checker_identity(api: Any) -> int:
    """One number per check of a file (mypy makes a checker per file and run)."""
    return id(api)


def call_position(expr: Expression) -> Optional[Tuple[int, int]]:
    """(line, column) of a call expression, None for anything else."""
    return (expr.line, expr.column) if isinstance(expr, CallExpr) else None


def named_function(api: Any, expr: Expression) -> Optional[Tuple[str, str]]:
    """(file, qualified name) of the function or method `expr` names: `f`,
    `Class.method`, `module.f`; None when it names none."""
    node: Any = expr.node if isinstance(expr, RefExpr) else None
    if node is None and isinstance(expr, MemberExpr) and isinstance(expr.expr, RefExpr):
        owner = expr.expr.node
        if isinstance(owner, TypeInfo):
            entry = owner.names.get(expr.name)
            node = entry.node if entry is not None else None
    if isinstance(node, Decorator):
        node = node.func
    if isinstance(node, OverloadedFuncDef):
        node = node.impl.func if isinstance(node.impl, Decorator) else node.impl
    if not isinstance(node, FuncItem) or isinstance(node, LambdaExpr):
        return None
    fullname = node.fullname
    modules = getattr(api, "modules", {})
    module = max((m for m in modules if fullname.startswith(m + ".")), key=len, default=None)
    if module is None or modules[module].path is None:
        return None
    return modules[module].path, fullname[len(module) + 1:]


def from_cache(api: Any, path: str) -> bool:
    """Whether the module at `path` came from mypy's cache in this run (fresh:
    its bodies are not checked, so no hook runs in them)."""
    for tree in getattr(api, "modules", {}).values():
        if tree.path == path:
            return bool(getattr(tree, "is_cache_skeleton", False))
    return False
