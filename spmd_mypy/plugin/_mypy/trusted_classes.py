"""Rewrite pass: `@spmd.trusted(in_types=..., out_types=...)` above a class.

An autograd Function is called through `.apply`, a classmethod of its base,
and mypy ignores what a class decorator returns, so the decorator alone
cannot retype `Fn.apply`.  Before semantic analysis this pass ends the body
of each class so decorated with

    apply = _spmd_phantom_.trusted_apply(<the decorator's callee>, in_types=..., out_types=...)

holding copies of the decorator's own expressions.  The stub function's hook
(plugin/local_map.py) gives `apply` the declared signature, as the call form
`spmd.trusted(Fn.apply, in_types=..., out_types=...)` does: one positional
parameter per in_types entry and the declared result.  `apply` is then an
attribute of the class whose type mypy infers, stores in its cache and
tracks in the daemon's dependencies like any other.  The callee goes along
so that the hook can tell spmd's `trusted` from another function of that
name (the attribute is then Any, as the base's apply returns).

Classes at module level and in its if/try blocks are read (an autograd
Function is defined there), with a base written `Function`; one that
defines `apply` itself is left alone (and so is any other class: the
decorator's hook notes that it is not checked).
Like the alias values' pass, this one runs only when mypy asks for the
module's dependencies, so a module it rewrote is parsed anew every run; and
only in files whose bytes write `trusted(` (rewrites.route_declared_values)."""

from __future__ import annotations

from typing import List, Optional

from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    AssignmentStmt,
    CallExpr,
    ClassDef,
    Decorator,
    Expression,
    FuncBase,
    IfStmt,
    MemberExpr,
    NameExpr,
    Statement,
    TryStmt,
)
from mypy.treetransform import TransformVisitor

from .tree import PHANTOM_ALIAS, TRUSTED_APPLY, is_phantom_call, sub_blocks

_KEYWORDS = frozenset({"in_types", "out_types"})


def retype_trusted_classes(stmts: List[Statement]) -> bool:
    """Give each class among `stmts` (and in their if/try blocks) decorated
    `@<...>trusted(in_types=..., out_types=...)` its `apply` statement.
    True when one was added."""
    added = False
    for stmt in stmts:
        kind = stmt.__class__  # most statements are defs and imports: one identity test each
        if kind is ClassDef:
            added = _retype(stmt) or added  # type: ignore[arg-type]
        elif kind is IfStmt or kind is TryStmt:
            for block in sub_blocks(stmt):
                added = retype_trusted_classes(block.body) or added
    return added


def _retype(cdef: ClassDef) -> bool:
    call = next((d for d in cdef.decorators if isinstance(d, CallExpr) and _declares(d)), None)
    if not isinstance(call, CallExpr) or not _function_class(cdef) or has_trusted_apply(cdef) or _defines_apply(cdef):
        return False
    copy = TransformVisitor()
    module = NameExpr(PHANTOM_ALIAS)
    func = MemberExpr(module, TRUSTED_APPLY.rpartition(".")[2])
    args: List[Expression] = [copy.expr(call.callee), *(copy.expr(a) for a in call.args)]
    value = CallExpr(func, args, [ARG_POS, *call.arg_kinds], [None, *call.arg_names])
    target = NameExpr("apply")
    stmt = AssignmentStmt([target], value)
    for node in (module, func, value, target, stmt):
        node.set_line(call.line, call.column, call.end_line, call.end_column)
    cdef.defs.body.append(stmt)
    return True


def _declares(decorator: CallExpr) -> bool:
    """`trusted(in_types=..., out_types=...)` or `<x>.trusted(...)`: keywords
    only, in_types= or out_types= among them."""
    if not isinstance(decorator.callee, (NameExpr, MemberExpr)):
        return False
    names = decorator.arg_names
    return (
        decorator.callee.name == "trusted"
        and all(k == ARG_NAMED for k in decorator.arg_kinds)
        and any(n in _KEYWORDS for n in names)
    )


def has_trusted_apply(cdef: object) -> bool:
    """Whether this pass gave the class `cdef` its `apply` statement."""
    body = cdef.defs.body if isinstance(cdef, ClassDef) else []
    last = body[-1] if body else None
    return (
        isinstance(last, AssignmentStmt)
        and isinstance(last.rvalue, CallExpr)
        and is_phantom_call(last.rvalue, TRUSTED_APPLY)
    )


def _function_class(cdef: ClassDef) -> bool:
    """A base written `Function` (`torch.autograd.Function`): an nn.Module's
    apply is another method, which the declaration must not replace."""
    return any(isinstance(b, (NameExpr, MemberExpr)) and b.name == "Function" for b in cdef.base_type_exprs)


def _defines_apply(cdef: ClassDef) -> bool:
    for stmt in cdef.defs.body:
        if isinstance(stmt, AssignmentStmt) and any(_named_apply(t) for t in stmt.lvalues):
            return True
        if isinstance(stmt, (FuncBase, Decorator)) and stmt.name == "apply":
            return True
    return False


def _named_apply(target: Optional[Expression]) -> bool:
    return isinstance(target, NameExpr) and target.name == "apply"
