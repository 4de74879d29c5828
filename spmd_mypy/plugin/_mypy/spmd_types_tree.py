"""The mypy side of reading code written for the runtime checker spmd_types.

- refine_asserts (a rewrite pass, before analysis): spmd_types asserts a
  type as a statement, `spmd.assert_type(x, {...})`, and the runtime then
  knows x's type from there on.  mypy can only type a call, so the pass turns
  such a statement (and `spmd.mutate_type(x, ...)`) into `x =
  spmd.assert_type(x, {...})`: the call's hook checks and types the value,
  and the assignment refines x.  A dict built in a name first (`out =
  {**spmd.get_local_type(y), g: spmd.S(1)}` or `out = dict(...)` followed by
  `out[g] = spmd.I`) is written into the call as one dict display, so its
  hook reads it where it is used, as the runtime does; so is a name bound
  to another expression made of names, literals and calls
  (`spec = spmd.PartitionSpec(...)`, `t = spmd.get_local_type(y)`), and a
  tuple of them spread into the call (`spmd.assert_type(x, *token_type)`).
  A binding is forgotten once a name it reads is bound again, or its
  type is changed by mutate_type (an assert only states the type).
- dict_entries, enum_value: reading the arguments (group_types.py reads
  ProcessGroup and Literal axis keys).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    ARG_STAR,
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
    IntExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OverloadedFuncDef,
    RefExpr,
    Statement,
    StrExpr,
    TupleExpr,
    TypeInfo,
    Var,
)
from mypy.server.subexpr import get_subexpressions
from mypy.treetransform import TransformVisitor
from mypy.types import Instance, Type, get_proper_type

from .group_types import enum_member_value
from .spmd_types_regions import rewrite_regions
from .tree import sub_blocks, unwrapped

MODULE = "spmd_types"
_REFINING = ("assert_type", "mutate_type")


def _aliases(tree: MypyFile) -> Tuple[Set[str], Dict[str, str]]:
    """(names bound to the module spmd_types, names bound to its refining
    functions -> the function's own name)."""
    modules: Set[str] = set()
    functions: Dict[str, str] = {}
    for imp in tree.imports:
        if isinstance(imp, Import):
            for name, alias in imp.ids:
                if name == MODULE:
                    modules.add(alias or name)
        elif isinstance(imp, ImportFrom) and imp.id == MODULE:
            for name, alias in imp.names:
                if name in _REFINING:
                    functions[alias or name] = name
    return modules, functions


def _refining_call(expr: Expression, modules: Set[str], functions: Dict[str, str]) -> bool:
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
    rvalue = unwrapped(rvalue)
    if isinstance(rvalue, DictExpr):
        if not any(unwrapped(v) is not v for _, v in rvalue.items):
            return rvalue
        built = DictExpr([(k, unwrapped(v)) for k, v in rvalue.items])
        built.set_line(rvalue)
        return built
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


def _pure(expr: Expression, depth: int = 6) -> bool:
    """Names, attributes, literals, displays and calls of them: an expression
    that reads the same where an assert is as where it was bound, unless a
    name it reads is bound again in between (_forget)."""
    if depth <= 0:
        return False
    if isinstance(expr, (NameExpr, MemberExpr, StrExpr, IntExpr)):
        return not isinstance(expr, MemberExpr) or _pure(expr.expr, depth - 1)
    if isinstance(expr, TupleExpr):
        return all(_pure(e, depth - 1) for e in expr.items)
    if isinstance(expr, DictExpr):
        return all((k is None or _pure(k, depth - 1)) and _pure(v, depth - 1) for k, v in expr.items)
    if isinstance(expr, CallExpr):
        return _pure(expr.callee, depth - 1) and all(_pure(a, depth - 1) for a in expr.args)
    return False


def _bound_value(rvalue: Expression) -> Optional[Expression]:
    """What a name bound to `rvalue` stands for in an assert's arguments."""
    built = _dict_built(rvalue)
    if built is not None:
        return built
    rvalue = unwrapped(rvalue)
    return rvalue if _pure(rvalue) else None


def _forget(bound: Dict[str, Expression], name: str) -> None:
    """`name` is bound again: every value that reads it no longer holds."""
    def reads(value: Expression) -> bool:
        return any(isinstance(e, NameExpr) and e.name == name for e in get_subexpressions(value))

    for held in [k for k, v in bound.items() if reads(v)]:
        del bound[held]


def _inlined(arg: Expression, bound: Dict[str, Expression]) -> Expression:
    """A copy of the value `arg` names, at arg's place (a dict display anew)."""
    value = bound[arg.name]  # type: ignore[attr-defined]
    if isinstance(value, DictExpr):
        inline: Expression = DictExpr(list(value.items))
    else:
        inline = TransformVisitor().expr(value)
    inline.set_line(arg)
    return inline


def _inline_arguments(call: CallExpr, bound: Dict[str, Expression]) -> None:
    """An assert's type arguments that name bound values, written in; a bound
    tuple spread into it (`*token_type`) written in item by item."""
    args, kinds, names = [call.args[0]], [call.arg_kinds[0]], [call.arg_names[0]]
    for arg, kind, name in zip(call.args[1:], call.arg_kinds[1:], call.arg_names[1:]):
        value = bound.get(arg.name) if isinstance(arg, NameExpr) else None
        if value is not None and kind == ARG_STAR and isinstance(value, TupleExpr):
            for item in value.items:
                copy = TransformVisitor().expr(item)
                copy.set_line(arg)
                args.append(copy)
                kinds.append(ARG_POS)
                names.append(None)
            continue
        if value is not None and kind in (ARG_POS, ARG_NAMED) and not isinstance(value, TupleExpr):
            arg = _inlined(arg, bound)
        args.append(arg)
        kinds.append(kind)
        names.append(name)
    call.args, call.arg_kinds, call.arg_names = args, kinds, names


def _refine_block(block: Block, modules: Set[str], functions: Dict[str, str], dicts: Dict[str, Expression]) -> None:
    body = block.body
    for i, stmt in enumerate(body):
        if isinstance(stmt, AssignmentStmt) and len(stmt.lvalues) == 1:
            target = stmt.lvalues[0]
            if isinstance(target, NameExpr):
                _forget(dicts, target.name)
                built = _bound_value(stmt.rvalue)
                if built is not None:
                    dicts[target.name] = built
                else:
                    dicts.pop(target.name, None)
            elif isinstance(target, IndexExpr) and isinstance(target.base, NameExpr) and target.base.name in dicts:
                old = dicts[target.base.name]
                if isinstance(old, DictExpr):
                    grown = DictExpr([*old.items, (target.index, unwrapped(stmt.rvalue))])
                    grown.set_line(old)
                    dicts[target.base.name] = grown
                else:
                    del dicts[target.base.name]
        elif isinstance(stmt, ExpressionStmt) and _refining_call(stmt.expr, modules, functions):
            call = stmt.expr
            assert isinstance(call, CallExpr)
            _inline_arguments(call, dicts)
            first = call.args[0]
            if isinstance(first, NameExpr):
                callee = call.callee
                called = callee.name if isinstance(callee, MemberExpr) else functions.get(getattr(callee, "name", ""))
                if called == "mutate_type":
                    _forget(dicts, first.name)  # its type changes; an assert only states it
                assign = AssignmentStmt([_fresh_name(first.name, first)], call)
                assign.set_line(stmt)
                body[i] = assign
        elif isinstance(stmt, (FuncDef, Decorator, OverloadedFuncDef, ClassDef)):
            _refine_definitions([stmt], modules, functions)
        else:
            for inner in sub_blocks(stmt):
                _refine_block(inner, modules, functions, dicts)


def _refine_definitions(stmts: List[Statement], modules: Set[str], functions: Dict[str, str]) -> None:
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
