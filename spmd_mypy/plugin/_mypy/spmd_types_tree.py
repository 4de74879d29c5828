"""The mypy side of reading code written for the runtime checker spmd_types.

- refine_asserts (a rewrite pass, before analysis): spmd_types asserts a
  type as a statement, `spmd.assert_type(x, {...})`, and the runtime then
  knows x's type from there on.  mypy can only type a call, so the pass turns
  such a statement (and `spmd.mutate_type(x, ...)`) into `x =
  spmd.assert_type(x, {...})`: the call's hook checks and types the value,
  and the assignment refines x.  A dict built in a name first (`out =
  {**spmd.get_local_type(y), g: spmd.S(1)}` or `out = dict(...)` followed by
  `out[g] = spmd.I`) is written into the call as one dict display, so its
  hook reads it where it is used, as the runtime does.
- dict_entries, enum_value: reading the arguments (group_types.py reads
  ProcessGroup and Literal axis keys).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

from mypy.nodes import (
    ARG_POS,
    AssignmentStmt,
    Block,
    CallExpr,
    ClassDef,
    Decorator,
    DictExpr,
    Expression,
    ExpressionStmt,
    FuncDef,
    Import,
    ImportFrom,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OverloadedFuncDef,
    RefExpr,
    Statement,
    TypeInfo,
    Var,
)
from mypy.types import Instance, Type, get_proper_type

from .group_types import enum_member_value
from .spmd_types_regions import rewrite_regions
from .tree import REASSIGNED, is_phantom_call, sub_blocks

MODULE = "spmd_types"
_REFINING = ("assert_type", "mutate_type")


def _aliases(tree: MypyFile) -> Tuple[Set[str], Set[str]]:
    """(names bound to the module spmd_types, names bound to its refining functions)."""
    modules: Set[str] = set()
    functions: Set[str] = set()
    for imp in tree.imports:
        if isinstance(imp, Import):
            for name, alias in imp.ids:
                if name == MODULE:
                    modules.add(alias or name)
        elif isinstance(imp, ImportFrom) and imp.id == MODULE:
            for name, alias in imp.names:
                if name in _REFINING:
                    functions.add(alias or name)
    return modules, functions


def _refining_call(expr: Expression, modules: Set[str], functions: Set[str]) -> bool:
    if not isinstance(expr, CallExpr) or not expr.args or expr.arg_kinds[0] != ARG_POS:
        return False
    callee = expr.callee
    if isinstance(callee, MemberExpr) and isinstance(callee.expr, NameExpr):
        return callee.expr.name in modules and callee.name in _REFINING
    return isinstance(callee, NameExpr) and callee.name in functions


def _fresh_name(name: str, at: Expression) -> NameExpr:
    out = NameExpr(name)
    out.set_line(at.line, at.column, at.end_line, at.end_column)
    return out


def _dict_built(rvalue: Expression) -> Optional[DictExpr]:
    """`{...}` or `dict(e)` (one positional argument): as a dict display."""
    if isinstance(rvalue, DictExpr):
        return rvalue
    if (
        isinstance(rvalue, CallExpr)
        and isinstance(rvalue.callee, NameExpr)
        and rvalue.callee.name == "dict"
        and len(rvalue.args) == 1
        and rvalue.arg_kinds[0] == ARG_POS
    ):
        built = DictExpr([(None, rvalue.args[0])])
        built.set_line(rvalue)
        return built
    return None


def _refine_block(block: Block, modules: Set[str], functions: Set[str], dicts: Dict[str, DictExpr]) -> None:
    body = block.body
    for i, stmt in enumerate(body):
        if isinstance(stmt, AssignmentStmt) and len(stmt.lvalues) == 1:
            target = stmt.lvalues[0]
            if isinstance(target, NameExpr):
                built = _dict_built(stmt.rvalue)
                if built is not None:
                    dicts[target.name] = built
                else:
                    dicts.pop(target.name, None)
            elif isinstance(target, IndexExpr) and isinstance(target.base, NameExpr) and target.base.name in dicts:
                old = dicts[target.base.name]
                value = stmt.rvalue  # `d["tp"] = I`: the name as written (route_declared wraps it)
                if is_phantom_call(value, REASSIGNED):
                    value = value.args[0]  # type: ignore[attr-defined]
                grown = DictExpr([*old.items, (target.index, value)])
                grown.set_line(old)
                dicts[target.base.name] = grown
        elif isinstance(stmt, ExpressionStmt) and _refining_call(stmt.expr, modules, functions):
            call = stmt.expr
            assert isinstance(call, CallExpr)
            for j, arg in enumerate(call.args[1:], 1):
                if isinstance(arg, NameExpr) and arg.name in dicts:
                    inline = DictExpr(list(dicts[arg.name].items))
                    inline.set_line(arg)
                    call.args[j] = inline
            first = call.args[0]
            if isinstance(first, NameExpr):
                assign = AssignmentStmt([_fresh_name(first.name, first)], call)
                assign.set_line(stmt)
                body[i] = assign
        elif isinstance(stmt, (FuncDef, Decorator, OverloadedFuncDef, ClassDef)):
            _refine_definitions([stmt], modules, functions)
        else:
            for inner in sub_blocks(stmt):
                _refine_block(inner, modules, functions, dicts)


def _refine_definitions(stmts: List[Statement], modules: Set[str], functions: Set[str]) -> None:
    for stmt in stmts:
        if isinstance(stmt, OverloadedFuncDef):
            _refine_definitions([*stmt.items, *([stmt.impl] if stmt.impl else [])], modules, functions)
        elif isinstance(stmt, (FuncDef, Decorator)):
            func = stmt.func if isinstance(stmt, Decorator) else stmt
            _refine_block(func.body, modules, functions, {})
        elif isinstance(stmt, ClassDef):
            _refine_definitions(stmt.defs.body, modules, functions)
        else:
            for inner in sub_blocks(stmt):
                _refine_definitions(inner.body, modules, functions)


def refine_asserts(tree: MypyFile, stmts: Optional[List[Statement]] = None) -> None:
    """Rewrite the asserting statements inside the functions of `stmts` (default:
    the whole tree) into assignments; module-level statements are left as
    they are (their top level may be analysed before any hook could run)."""
    modules, functions = _aliases(tree)
    if modules or functions:
        _refine_definitions(tree.defs if stmts is None else stmts, modules, functions)
    rewrite_regions(tree, tree.defs if stmts is None else stmts)


# -- reading arguments ---------------------------------------------------------------


def dict_entries(expr: Expression) -> Optional[List[Tuple[Optional[Expression], Expression]]]:
    """The entries of a dict display (key None: a `**mapping` spread), else None."""
    return list(expr.items) if isinstance(expr, DictExpr) else None


def enum_value(expr: Expression) -> Optional[str]:
    """The string value of an enum member written `Axis.TP` (group_types.enum_member_value), else None."""
    if not isinstance(expr, MemberExpr):
        return None
    node = expr.node
    info = getattr(node, "info", None) if isinstance(node, Var) else None
    if info is None and isinstance(expr.expr, RefExpr):  # `Axis.TP`: the class's member
        info = expr.expr.node
    if not isinstance(info, TypeInfo):
        return None
    return enum_member_value(info, expr.name)


def instance_fullname(typ: Optional[Type]) -> Optional[str]:
    """The class a type is an instance of (its fullname), else None."""
    t = get_proper_type(typ) if typ is not None else None
    return t.type.fullname if isinstance(t, Instance) else None
