"""DTensors with known placements (plugin/dtensor.py), on the mypy side.

  PlacedDTensor[Literal["dp=Shard(0), tp=Replicate()"]] (spmd_phantom.dtensor)
  carries a DTensor's placements per mesh axis; the module is loaded (as an
  extra dependency) only by files that import torch.distributed.tensor.
  mesh_names reads the mesh a call names (`mesh["tp"]`, `mesh["dp", "tp"]`);
  later_partners looks ahead in the enclosing function for the operands a
  value assigned from a call meets.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from mypy.nodes import (
    AssignmentStmt,
    CallExpr,
    ComparisonExpr,
    Expression,
    ExpressionStmt,
    FuncDef,
    Import,
    ImportFrom,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OpExpr,
    ReturnStmt,
    StrExpr,
    TupleExpr,
    TypeInfo,
    Var,
)
from mypy.types import Instance, LiteralType, Type, get_proper_type

from .tree import flat_statements

DTENSOR_MODULE = "spmd_phantom.dtensor"
PLACED = f"{DTENSOR_MODULE}.PlacedDTensor"
_IMPORTS = ("torch.distributed.tensor", "torch.distributed._tensor")


def imports_dtensor(tree: object) -> bool:
    """Whether a parsed file imports torch's DTensor package (then it needs PlacedDTensor)."""
    if not isinstance(tree, MypyFile):
        return False
    for imp in tree.imports:
        ids = [i for i, _ in imp.ids] if isinstance(imp, Import) else [imp.id] if isinstance(imp, ImportFrom) else []
        if any(i.startswith(_IMPORTS) for i in ids):
            return True
    return False


def placed_dtensor(api: Any, text: str) -> Optional[Type]:
    """PlacedDTensor[Literal[text]], or None when the stub is not loaded."""
    module = getattr(api, "modules", {}).get(DTENSOR_MODULE)
    sym = module.names.get("PlacedDTensor") if module is not None else None
    info = sym.node if sym is not None else None
    if not isinstance(info, TypeInfo):
        return None
    literal = LiteralType(text, fallback=api.named_type("builtins.str"))
    return Instance(info, [literal])


def placed_of(typ: Optional[Type]) -> Optional[str]:
    """The placements text a PlacedDTensor holds, else None."""
    p = get_proper_type(typ) if typ is not None else None
    if isinstance(p, Instance) and p.type.fullname == PLACED and p.args:
        arg = get_proper_type(p.args[0])
        if isinstance(arg, LiteralType) and isinstance(arg.value, str):
            return arg.value
    return None


def mesh_names(api: Any, expr: Optional[Expression]) -> Optional[List[str]]:
    """The dim names of a mesh indexed by name: `mesh["tp"]`, `mesh["dp", "tp"]`,
    or a name last assigned such a mesh earlier in the function."""
    if isinstance(expr, NameExpr):
        func = api.scope.current_function() if hasattr(api, "scope") else None
        stmts = flat_statements(func.body) if isinstance(func, FuncDef) else []
        earlier = [s.rvalue for s in stmts if isinstance(s, AssignmentStmt) and s.line < expr.line
                   and any(isinstance(t, NameExpr) and t.name == expr.name for t in s.lvalues)]
        expr = earlier[-1] if earlier else None
    if not isinstance(expr, IndexExpr):
        return None
    index = expr.index
    if isinstance(index, StrExpr):
        return [index.value]
    if isinstance(index, TupleExpr) and all(isinstance(i, StrExpr) for i in index.items):
        return [i.value for i in index.items]  # type: ignore[attr-defined]
    return None


def _operands(expr: Optional[Expression]) -> List[Tuple[Expression, Expression]]:
    """Pairs (a, b) of expressions that meet in one op inside `expr` (binary
    operators, a call's arguments with each other and with a method's receiver)."""
    out: List[Tuple[Expression, Expression]] = []
    todo = [expr]
    while todo:
        e = todo.pop()
        if isinstance(e, OpExpr):
            out += [(e.left, e.right), (e.right, e.left)]
            todo += [e.left, e.right]
        elif isinstance(e, ComparisonExpr):
            todo += e.operands
        elif isinstance(e, CallExpr):
            args = list(e.args) + ([e.callee.expr] if isinstance(e.callee, MemberExpr) else [])
            out += [(a, b) for a in args for b in args if a is not b]
            todo += args
        elif isinstance(e, (MemberExpr,)):
            todo.append(e.expr)
        elif isinstance(e, (TupleExpr,)):
            todo += e.items
    return out


def later_partners(api: Any, call: Expression) -> List[Tuple[Expression, Type]]:
    """The operands (with their declared or already inferred types) that the
    value of `call` meets in the rest of the enclosing function: the call used
    in place, or the name it is assigned to.  Operands whose type is not known
    yet are left out."""
    func = api.scope.current_function() if hasattr(api, "scope") else None
    if not isinstance(func, FuncDef):
        return []
    stmts = flat_statements(func.body)
    target: Optional[str] = None
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, AssignmentStmt) and stmt.rvalue is call and len(stmt.lvalues) == 1:
            if isinstance(stmt.lvalues[0], NameExpr):
                target = stmt.lvalues[0].name
                stmts = stmts[i + 1:]
            break
    found: List[Tuple[Expression, Type]] = []
    for stmt in stmts:
        if isinstance(stmt, AssignmentStmt) and target is not None and any(
            isinstance(t, NameExpr) and t.name == target for t in stmt.lvalues
        ):
            break  # rebound
        expr = stmt.rvalue if isinstance(stmt, AssignmentStmt) else (
            stmt.expr if isinstance(stmt, (ExpressionStmt, ReturnStmt)) else None)
        for a, b in _operands(expr):
            if a is call or (target is not None and isinstance(a, NameExpr) and a.name == target):
                typ = _known_type(api, b)
                if typ is not None:
                    found.append((b, typ))
    return found


def _known_type(api: Any, expr: Expression) -> Optional[Type]:
    binder = getattr(api, "binder", None)
    narrowed = binder.get(expr) if binder is not None and isinstance(expr, NameExpr) else None
    if narrowed is not None:
        return narrowed
    if isinstance(expr, NameExpr) and isinstance(expr.node, Var) and expr.node.type is not None:
        return expr.node.type
    return api.lookup_type_or_none(expr) if hasattr(api, "lookup_type_or_none") else None
