"""Type aliases whose value writes Spmd(...) beside something other than Tensor.

mypy drops `Annotated` from an alias's value before any hook sees it, so in
`A = Annotated[int, Spmd(tp=R)]`, or `B = Annotated[TensorT, Spmd(tp=V)]`
with `TensorT = torch.Tensor`, no Tensor hook runs at the first argument and
the Spmd(...) was dropped in silence.  Before semantic analysis the first
argument of such an Annotated is wrapped where it stands,
`Annotated[_spmd_phantom_.AliasValue[X], Spmd(...)]`, at X's position; the
type-analyze hook of AliasValue (reading.alias_value_hook) then reads the
metadata as the Annotated hook does in annotations: an alias of Tensor or
Parameter gives the carrier, anything else an spmd-annotation error.  An X
written `Tensor` or `Parameter` (any module path) is left alone: the Tensor
hook reads it at its position.

The wrap happens only when mypy asks for the module's dependencies before
analysing it: a module parsed again from a stale cache entry is analysed
without that call, and its aliases before the plugin's first hook there.
So a module with a wrapped alias is parsed anew on every run (the plugin
reports it to mypy as checked each run, like the modules defining
typecheck hooks)."""

from __future__ import annotations

from typing import List, Optional, Tuple

from mypy.nodes import (
    AssignmentStmt,
    CallExpr,
    ClassDef,
    Expression,
    IfStmt,
    IndexExpr,
    MemberExpr,
    NameExpr,
    OpExpr,
    Statement,
    TryStmt,
    TupleExpr,
)
from mypy.plugin import AnalyzeTypeContext
from mypy.types import AnyType, Type, TypeOfAny, UnboundType

from .tree import PHANTOM_ALIAS, PHANTOM_MODULE, sub_blocks

ALIAS_VALUE = f"{PHANTOM_MODULE}.AliasValue"
_READ_NAMES = frozenset({"Tensor", "Parameter"})


def wrap_alias_values(stmts: List[Statement]) -> bool:
    """Wrap the first argument of each `Annotated[X, ..., Spmd(...), ...]` in
    the values of the module-level and class-level `NAME = ...` among
    `stmts` (and the if/try blocks there), X a name that is not Tensor or
    Parameter.  True when one was wrapped."""
    wrapped = False
    for stmt in stmts:
        kind = stmt.__class__  # most statements are defs and imports: one identity test each
        if kind is AssignmentStmt:
            rvalue = stmt.rvalue  # type: ignore[attr-defined]
            if rvalue.__class__ is IndexExpr or rvalue.__class__ is OpExpr:
                wrapped = _wrap(rvalue) or wrapped
        elif kind is ClassDef:
            wrapped = wrap_alias_values(stmt.defs.body) or wrapped  # type: ignore[attr-defined]
        elif kind is IfStmt or kind is TryStmt:
            for block in sub_blocks(stmt):
                wrapped = wrap_alias_values(block.body) or wrapped
    return wrapped


def _wrap(expr: Expression) -> bool:
    if isinstance(expr, OpExpr) and expr.op == "|":
        return _wrap(expr.left) | _wrap(expr.right)
    if not isinstance(expr, IndexExpr):
        return False
    index = expr.index
    items = list(index.items) if isinstance(index, TupleExpr) else [index]
    if _last_name(expr.base) != "Annotated" or not isinstance(index, TupleExpr):
        return any([_wrap(item) for item in items])  # Optional[Annotated[...]], Union[...]
    first = items[0]
    spmd = any(isinstance(i, CallExpr) and _last_name(i.callee) == "Spmd" for i in items[1:])
    if spmd and isinstance(first, (NameExpr, MemberExpr)) and first.name not in _READ_NAMES:
        index.items[0] = _wrapped(first)
        return True
    return False


def _wrapped(first: Expression) -> IndexExpr:
    module = NameExpr(PHANTOM_ALIAS)
    base = MemberExpr(module, ALIAS_VALUE.rpartition(".")[2])
    out = IndexExpr(base, first)
    for node in (module, base, out):
        node.set_line(first.line, first.column, first.end_line, first.end_column)
    return out


def _last_name(expr: Optional[Expression]) -> Optional[str]:
    return expr.name if isinstance(expr, (NameExpr, MemberExpr)) else None


def alias_value_argument(ctx: AnalyzeTypeContext) -> Tuple[Type, Optional[Tuple[str, Tuple[int, int]]]]:
    """For `AliasValue[X]`: X analysed, and X's name and position when X is a bare name."""
    inner = alias_value_in_analyzer(ctx)
    first = ctx.type.args[0] if len(ctx.type.args) == 1 else None
    if first.__class__ is not UnboundType or first.args:  # type: ignore[union-attr]
        return inner, None
    return inner, (first.name, (first.line, first.column))  # type: ignore[union-attr]


def alias_value_in_analyzer(ctx: AnalyzeTypeContext) -> Type:
    """X analysed, as mypy reads the value without the wrapper (Any for an
    AliasValue not written by the rewrite, with other than one argument)."""
    args = ctx.type.args
    return ctx.api.analyze_type(args[0]) if len(args) == 1 else AnyType(TypeOfAny.from_error)
