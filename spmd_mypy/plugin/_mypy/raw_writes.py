"""Rewrite pass: the tensor a raw torch.distributed collective changes in place.

`dist.all_reduce(buf, group=g)` changes buf's value (and layout: a pending
sum becomes the same value on every rank) without rebinding it, and mypy
types a name only where it is bound.  So, before semantic analysis, a
statement that is such a call, whose written tensor is a plain name bound in
the same function (or at module level), becomes

    buf = _spmd_phantom_.raw_write(buf, dist.all_reduce(buf, group=g))

The stub function returns its first argument's type; its hook
(raw_collectives.py) reads the real call and gives buf the type of what the
collective wrote (vocab.opnames.RAW_WRITES).  Callees are recognised from
the file's imports (`torch.distributed.all_reduce`, `import
torch.distributed as dist`, `from torch.distributed import all_reduce`);
the hook checks the resolved fullname.  Written tensors that are not names
(`p.grad.data`) are left alone: their type stays what it was."""

from __future__ import annotations

from typing import Dict, List, Optional, Set

from mypy.nodes import (
    ARG_POS,
    AssignmentStmt,
    Block,
    CallExpr,
    ClassDef,
    Decorator,
    Expression,
    ExpressionStmt,
    ForStmt,
    FuncDef,
    Import,
    ImportFrom,
    MemberExpr,
    MypyFile,
    NameExpr,
    OverloadedFuncDef,
    RefExpr,
    Statement,
    WithStmt,
)

from ...vocab.opnames import RAW_WRITES
from .tree import PHANTOM_ALIAS, dotted_name, sub_blocks

RAW_WRITE = "spmd_phantom.raw_write"
_DIST = "torch.distributed"


def _dist_bindings(tree: MypyFile) -> Dict[str, str]:
    """Names the imports bind to torch, torch.distributed or its collectives."""
    out: Dict[str, str] = {}
    for imp in tree.imports:
        if isinstance(imp, Import):
            for module, alias in imp.ids:
                if module in ("torch", _DIST):
                    out[alias or module.split(".")[0]] = module if alias else "torch"
        elif isinstance(imp, ImportFrom) and imp.relative == 0:
            if imp.id == "torch":
                for name, alias in imp.names:
                    if name == "distributed":
                        out[alias or name] = _DIST
            elif imp.id == _DIST:
                for name, alias in imp.names:
                    if name in RAW_WRITES:
                        out[alias or name] = f"{_DIST}.{name}"
    return out


def raw_write_target(call: Expression, bindings: Dict[str, str]) -> Optional[NameExpr]:
    """The name a raw collective call writes, when it is one."""
    if not isinstance(call, CallExpr):
        return None
    path = dotted_name(call.callee, bindings)
    if path is None or not path.startswith(_DIST + "."):
        return None
    row = RAW_WRITES.get(path[len(_DIST) + 1:])
    if row is None or len(call.args) <= row[0] or call.arg_kinds[row[0]] != ARG_POS:
        return None
    target = call.args[row[0]]
    return target if isinstance(target, NameExpr) else None


def _bound_names(func: FuncDef) -> Set[str]:
    """Parameters and names assigned in the function's own body (syntactically)."""
    names = {arg.variable.name for arg in func.arguments}
    stack: List[Block] = [func.body]
    while stack:
        for stmt in stack.pop().body:
            if isinstance(stmt, AssignmentStmt):
                names.update(lv.name for lv in stmt.lvalues if isinstance(lv, NameExpr))
            elif isinstance(stmt, ForStmt) and isinstance(stmt.index, NameExpr):
                names.add(stmt.index.name)
            elif isinstance(stmt, WithStmt):
                names.update(t.name for t in stmt.target if isinstance(t, NameExpr))
            stack.extend(sub_blocks(stmt))
    return names


def _rewrite_block(block: List[Statement], bindings: Dict[str, str], bound: Optional[Set[str]]) -> None:
    for i, stmt in enumerate(block):
        if isinstance(stmt, ExpressionStmt):
            target = raw_write_target(stmt.expr, bindings)
            if target is not None and (bound is None or target.name in bound):
                block[i] = _assignment(target, stmt.expr, stmt)
        elif isinstance(stmt, (FuncDef, Decorator, OverloadedFuncDef, ClassDef)):
            _rewrite_definitions([stmt], bindings)
        else:
            for inner in sub_blocks(stmt):
                _rewrite_block(inner.body, bindings, bound)


def _assignment(target: NameExpr, call: Expression, stmt: Statement) -> AssignmentStmt:
    def named(name: str) -> NameExpr:
        node = NameExpr(name)
        node.set_line(target.line, target.column, target.end_line, target.end_column)
        return node

    func = MemberExpr(named(PHANTOM_ALIAS), RAW_WRITE.rsplit(".", 1)[1])
    func.set_line(call.line, call.column, call.end_line, call.end_column)
    wrapper = CallExpr(func, [named(target.name), call], [ARG_POS, ARG_POS], [None, None])
    wrapper.set_line(call.line, call.column, call.end_line, call.end_column)
    assign = AssignmentStmt([named(target.name)], wrapper)
    assign.set_line(stmt.line, stmt.column, stmt.end_line, stmt.end_column)
    return assign


def _rewrite_definitions(stmts: List[Statement], bindings: Dict[str, str]) -> None:
    for stmt in stmts:
        if isinstance(stmt, OverloadedFuncDef):
            _rewrite_definitions([*stmt.items, *([stmt.impl] if stmt.impl else [])], bindings)
        elif isinstance(stmt, (FuncDef, Decorator)):
            func = stmt.func if isinstance(stmt, Decorator) else stmt
            _rewrite_block(func.body.body, bindings, _bound_names(func))
        elif isinstance(stmt, ClassDef):
            _rewrite_definitions(stmt.defs.body, bindings)


def retype_raw_writes(tree: MypyFile, stmts: Optional[List[Statement]] = None) -> None:
    """Rewrite the raw collectives of `stmts` (the whole module when None)."""
    bindings = _dist_bindings(tree)
    if not bindings:
        return
    if stmts is None:
        _rewrite_block(tree.defs, bindings, None)
    else:
        _rewrite_definitions(stmts, bindings)


def raw_write_call(ctx: object) -> Optional[tuple]:
    """(the collective's name in torch.distributed, the real call) in the hook
    of the rewrite's stub function; None for anything else."""
    args = getattr(ctx, "args", None)
    if not args or len(args) != 2 or len(args[1]) != 1:
        return None
    inner = args[1][0]
    if not isinstance(inner, CallExpr) or not isinstance(inner.callee, RefExpr):
        return None
    module, _, name = (inner.callee.fullname or "").rpartition(".")
    return (name, inner) if module.startswith(_DIST) else None


def call_argument(call: CallExpr, position: int, keyword: str) -> Optional[Expression]:
    """The argument of `call` passed as `keyword=` or at `position`."""
    for i, (kind, name) in enumerate(zip(call.arg_kinds, call.arg_names)):
        if name == keyword or (name is None and kind == ARG_POS and i == position):
            return call.args[i]
    return None
