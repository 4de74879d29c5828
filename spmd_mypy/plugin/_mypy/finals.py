"""`Final` names at a module's top level or in a class's body, for arguments read statically
(`spmd.assert_spmd(x, SPEC)` with `SPEC: Final = Spmd(...)`, possibly
imported from another module).  A module already checked keeps its symbol
table and path but not its statements, so its initialiser is then read from
the source (plugin/spec_argument.py); names in it resolve through the
module's symbol table."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from mypy.nodes import (
    VAR_NO_INFO, AssignmentStmt, ClassDef, Expression, MemberExpr, MypyFile, NameExpr, RefExpr, TypeAlias, TypeInfo, Var,
)
from mypy.types import Instance, Type, get_proper_type


def alias_target(expr: Expression) -> Optional[Type]:
    """The type a reference to a non-generic type alias names (`spmd=Hidden`
    with `Hidden = Annotated[Tensor, Spmd(tp=I)]`), None for anything else."""
    node = expr.node if isinstance(expr, RefExpr) else None
    if not isinstance(node, TypeAlias) or node.alias_tvars:
        return None
    return get_proper_type(node.target)


def final_name(expr: Expression) -> Optional[Tuple[str, str]]:
    """(module, name) of a reference to a Final variable at a module's top
    level, or (module, `Class.NAME`) to one in a class's body."""
    node = expr.node if isinstance(expr, RefExpr) else None
    if node is None and isinstance(expr, MemberExpr) and isinstance(expr.expr, RefExpr):
        owner = expr.expr.node  # `Layout.COLUMN`: the checker, not semanal, binds class members
        symbol = owner.get(expr.name) if isinstance(owner, TypeInfo) else None
        node = symbol.node if symbol is not None else None
    if not isinstance(node, Var) or not node.is_final:
        return None
    if node.info is not VAR_NO_INFO:
        module = node.info.module_name
        return module, f"{node.info.fullname[len(module) + 1:]}.{node.name}"
    module, _, name = node.fullname.rpartition(".")
    return (module, name) if module else None


def _module(api: Any, module: str) -> Optional[MypyFile]:
    tree = getattr(api, "modules", {}).get(module)
    return tree if isinstance(tree, MypyFile) else None


def module_value(api: Any, module: str, name: str) -> Optional[Expression]:
    """The initialiser of `name` in the module's tree; None when the tree no
    longer holds statements (a module checked before) or has no such one."""
    tree = _module(api, module)
    body = tree.defs if tree is not None else []
    *classes, name = name.split(".")
    for owner in classes:  # `Layout.COLUMN`: in the body of `class Layout`
        body = next((s.defs.body for s in body if isinstance(s, ClassDef) and s.name == owner), [])
    for stmt in body:
        if (
            isinstance(stmt, AssignmentStmt)
            and len(stmt.lvalues) == 1
            and isinstance(stmt.lvalues[0], NameExpr)
            and stmt.lvalues[0].name == name
        ):
            return stmt.rvalue
    return None


def enum_alias(expr: Expression) -> Optional[Tuple[str, str, TypeInfo]]:
    """(module, name, the enum class) of a reference to a module-level
    variable, not Final, whose type is an enum class (`DP` after `DP =
    MeshAxisName.DP`: mypy types it MeshAxisName, without the member)."""
    node = expr.node if isinstance(expr, RefExpr) else None
    if not isinstance(node, Var) or node.is_final or node.info is not VAR_NO_INFO or node.type is None:
        return None
    typ = get_proper_type(node.type)
    if not isinstance(typ, Instance) or not typ.type.is_enum:
        return None
    module, _, name = node.fullname.rpartition(".")
    return (module, name, typ.type) if module else None


def owning_module(api: Any, fullname: str) -> Optional[Tuple[str, str]]:
    """(module, the name within it) of a fullname: `pkg.specs.Layout.COL` ->
    (`pkg.specs`, `Layout.COL`) when `pkg.specs` is a module mypy holds."""
    module, _, name = fullname.rpartition(".")
    while module:
        if _module(api, module) is not None:
            return module, name
        module, _, outer = module.rpartition(".")
        name = f"{outer}.{name}"
    return None


def module_file(api: Any, module: str) -> Optional[str]:
    tree = _module(api, module)
    return tree.path if tree is not None else None


def resolve_in_module(api: Any, module: str, dotted: str) -> Optional[str]:
    """The fullname `a.b.c` written in the module stands for (its symbol table)."""
    tree = _module(api, module)
    first, _, rest = dotted.partition(".")
    symbol = tree.names.get(first) if tree is not None else None
    node = symbol.node if symbol is not None else None
    full = getattr(node, "fullname", None)
    if not full:
        return None
    return f"{full}.{rest}" if rest else full
