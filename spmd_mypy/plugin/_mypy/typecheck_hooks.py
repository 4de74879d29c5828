"""Reading an autograd Function's typecheck hook (spmd_types' convention).

A Function with a `typecheck_forward` or keyword-only `spmd_typecheck`
staticmethod states its types there: the asserts on its parameters are its
inputs' types, the assert on what `.apply` returned (or, for a
spmd_typecheck that returns the output types, its spmd_types.rules steps:
spmd_types_rules.py) its output's.  read_hook gives those asserts;
function_hooks(info) gives them for a class, for the `.apply` hook, and
keeps them: mypy frees a module's function bodies once it has checked it,
and a Function is often applied in another module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Set, Tuple

from mypy.nodes import (
    ARG_POS,
    AssignmentStmt,
    CallExpr,
    Decorator,
    Expression,
    ExpressionStmt,
    FuncDef,
    MemberExpr,
    NameExpr,
    Statement,
    TypeInfo,
)

from .calls import function_class
from .spmd_types_rules import rule_steps
from .tree import BodyMemo, flat_statements

HOOK_NAMES = ("typecheck_forward", "spmd_typecheck")


def keyword_arg(call: CallExpr, name: str) -> Optional[Expression]:
    for arg, arg_name in zip(call.args, call.arg_names):
        if arg_name == name:
            return arg
    return None


@dataclass
class Asserted:
    """The types a typecheck_forward / spmd_typecheck states."""

    parameters: List[str]  # the hook's parameter names, in order (positional ones, then keyword-only)
    inputs: Dict[str, List[Expression]]  # parameter -> the type arguments asserted on it
    output: Optional[List[Expression]]  # the type arguments asserted on the output
    like: Optional[Tuple[str, Optional[Expression]]]  # assert_type_like(out, <param>, overrides)
    keyword_only: bool  # spmd_typecheck(*, x, ...): names are forward's
    unread: bool = False  # the body is not in memory (a cached module's skeleton, or freed unread)


def hook_func(node: object) -> Optional[FuncDef]:
    if isinstance(node, Decorator):
        return node.func
    return node if isinstance(node, FuncDef) else None


def _assert_call(stmt: Statement) -> Optional[CallExpr]:
    """The assert_type / assert_type_like call of a statement (also in its rewritten `x = ...` form)."""
    expr = stmt.expr if isinstance(stmt, ExpressionStmt) else stmt.rvalue if isinstance(stmt, AssignmentStmt) else None
    if not isinstance(expr, CallExpr) or not expr.args:
        return None
    callee = expr.callee
    name = callee.name if isinstance(callee, (MemberExpr, NameExpr)) else None
    return expr if name in ("assert_type", "assert_type_like") else None


def read_hook(func: FuncDef) -> Asserted:
    """The asserts of a typecheck_forward / spmd_typecheck body, in order of
    the statements: on a parameter an input type, on another name the output's."""
    params = [n for n in func.arg_names if n is not None]
    positional = [n for n, k in zip(func.arg_names, func.arg_kinds) if k == ARG_POS and n is not None]
    out = Asserted(params, {}, None, None, not positional or func.name == "spmd_typecheck")
    if not func.body.body:  # a written body has a statement: this one is a cached skeleton or freed
        out.unread = True
        return out
    applied: Set[str] = set()
    for stmt in flat_statements(func.body):
        if isinstance(stmt, AssignmentStmt) and isinstance(stmt.rvalue, CallExpr):
            callee = stmt.rvalue.callee
            if isinstance(callee, MemberExpr) and callee.name == "apply":
                applied.update(t.name for t in stmt.lvalues if isinstance(t, NameExpr))
        call = _assert_call(stmt)
        if call is None or not isinstance(call.args[0], NameExpr):
            continue
        name = call.args[0].name
        callee_name = call.callee.name if isinstance(call.callee, (MemberExpr, NameExpr)) else ""
        types = [a for a, k in zip(call.args[1:], call.arg_kinds[1:]) if k == ARG_POS]
        spec = keyword_arg(call, "partition_spec")
        types += [spec] if spec is not None else []
        output = name in applied or (name == positional[0] if func.name == "spmd_typecheck" and positional else False)
        if callee_name == "assert_type_like" and output and len(call.args) >= 2 and isinstance(call.args[1], NameExpr):
            out.like = (call.args[1].name, call.args[2] if len(call.args) > 2 else None)
        elif callee_name == "assert_type" and output:
            out.output = types
        elif callee_name == "assert_type" and name in params and name not in out.inputs:
            out.inputs[name] = types
    return out


HookInfo = Tuple[str, str, Asserted, List[str], FuncDef]

# Each Function's hook as read while its body was whole, by its node: mypy frees
# a module's function bodies once it has checked it (a batch run keeps no
# tree of a checked module), and a Function is often applied in another
# module (torchtitan's dist_gemm.py applies linear.py's).  Read at an
# `.apply` and when its forward is checked (remember_hooks).
_KEPT: BodyMemo[HookInfo] = BodyMemo()


def function_hooks(info: TypeInfo) -> Optional[HookInfo]:
    """(class name, hook name, its asserts, forward's parameters after ctx, the
    hook) of an autograd Function class with a typecheck hook."""
    for name in HOOK_NAMES:
        node = info.names.get(name)
        func = hook_func(node.node) if node is not None else None
        if func is None:
            continue
        kept = _KEPT.get(func) if not func.body.body else None
        if kept is not None:
            return kept[0]
        found = info.names.get("forward")
        forward = hook_func(found.node) if found is not None else None
        params = [n for n in forward.arg_names[1:] if n is not None] if forward is not None else []
        result = (info.name, name, read_hook(func), params, func)
        if func.body.body:
            _KEPT.put(func, result)
            rule_steps(func)  # kept by spmd_types_rules the same way
        return result
    return None


def remember_hooks(api: Any) -> None:
    """Inside a Function's forward (its module being checked): read its hook
    now, while its body is whole."""
    scope = getattr(api, "scope", None)
    func = scope.current_function() if scope is not None else None
    info = func.info if func is not None else None  # active_class() is None inside a method
    if isinstance(info, TypeInfo) and info:
        function_hooks(info)


def typecheck_hooks_of(callee_type: object) -> Optional[HookInfo]:
    """For `Fn.apply(...)`: function_hooks of the class Fn (a torch autograd
    Function with a typecheck_forward or spmd_typecheck staticmethod), else None."""
    info = function_class(callee_type)
    return function_hooks(info) if info is not None else None
