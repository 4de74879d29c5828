"""Where code says a product is a pending sum: a small syntactic look-ahead
over a checked tree, for the contraction rule (plugin/contraction.py).

A product is declared a pending sum on some axes when it is

  - written directly as the value argument of a call `reads` accepts
    (`spmd.reinterpret(h @ w2, "tp", src=V, dst=P)`), or
  - the value of `name = <product>` whose next use in the same block (the
    first later statement that mentions `name`) is as the value argument of
    such a call (`partial = F.linear(x, w)` then
    `spmd.reinterpret(partial, "tp", src=V, dst=P)`).

  - or that name's next use passes it directly to a parameter without an
    SPMD type (an unannotated autograd Function's `.apply`, a function whose
    parameter is a plain Tensor): the unchecked code there may reduce it,
    and unknowns never cause errors (every axis).

The index maps the span of each such product expression to the axes; it is
built once per tree (the checker's tree of the file)."""

from __future__ import annotations

from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

from mypy.nodes import (
    ARG_POS,
    AssignmentStmt,
    CallExpr,
    Decorator,
    Expression,
    FuncDef,
    MemberExpr,
    MypyFile,
    NameExpr,
    RefExpr,
    Statement,
    TypeInfo,
)
from mypy.server.subexpr import get_subexpressions
from mypy.types import CallableType

from .carriers import carried
from .tree import blocks_in, unwrapped

Span = Tuple[int, int, int, int]
# A call -> (its value argument, the axes it declares partial), or None.
Reads = Callable[[CallExpr], Optional[Tuple[Expression, FrozenSet[str]]]]


def span(node: Any) -> Optional[Span]:
    """(line, column, end line, end column) of a node; None when mypy kept no end."""
    end_line, end_column = getattr(node, "end_line", None), getattr(node, "end_column", None)
    if end_line is None or end_column is None:
        return None
    return (node.line, node.column, end_line, end_column)


def _index(tree: MypyFile, reads: Reads) -> Dict[Span, FrozenSet[str]]:
    index: Dict[Span, FrozenSet[str]] = {}
    value_names: Dict[int, FrozenSet[str]] = {}  # id(NameExpr value argument) -> axes

    def add(expr: Expression, axes: FrozenSet[str]) -> None:
        where = span(unwrapped(expr))
        if where is not None:
            index[where] = index.get(where, frozenset()) | axes

    for expr in get_subexpressions(tree):
        got = reads(expr) if isinstance(expr, CallExpr) else None
        if got is not None:
            value, axes = got
            add(value, axes)
            if isinstance(unwrapped(value), NameExpr):
                value_names[id(unwrapped(value))] = axes
    for block in blocks_in(tree.defs):
        names: List[Optional[List[NameExpr]]] = [None] * len(block.body)
        for k, stmt in enumerate(block.body):
            if isinstance(stmt, AssignmentStmt) and len(stmt.lvalues) == 1 and isinstance(stmt.lvalues[0], NameExpr):
                axes = _next_use(stmt.lvalues[0].name, block.body, k + 1, names, value_names)
                if axes is not None:
                    add(stmt.rvalue, axes)
    return index


def _next_use(
    name: str, body: List[Statement], start: int, names: List[Optional[List[NameExpr]]],
    value_names: Dict[int, FrozenSet[str]],
) -> Optional[FrozenSet[str]]:
    """The axes when the first later statement naming `name` reads it first as
    the value argument of a V -> P reinterpret (names: per statement, filled lazily,
    in the order mypy evaluates them: an assignment's value before its targets)."""
    for k in range(start, len(body)):
        if names[k] is None:
            names[k] = [e for e in get_subexpressions(body[k]) if isinstance(e, NameExpr)]
        first = next((n for n in names[k] or () if n.name == name), None)
        if first is not None:
            return value_names.get(id(first)) or (ANY if _into_untyped(body[k], first) else None)
    return None


ANY: FrozenSet[str] = frozenset({"*"})  # every axis
_TYPED_LIBRARIES = ("spmd_mypy.", "torch.", "spmd_phantom.")


def _into_untyped(stmt: Statement, value: NameExpr) -> bool:
    """`value` is passed directly to a parameter that holds no SPMD type: of a
    user function, or of an autograd Function's `forward` through `.apply`
    (the code there, unchecked, may reduce it: gradual typing)."""
    for call in get_subexpressions(stmt):
        if not isinstance(call, CallExpr) or not any(a is value for a in call.args):
            continue
        position = next(k for k, a in enumerate(call.args) if a is value)
        if call.arg_kinds[position] != ARG_POS:
            return False
        callee, func, skip = call.callee, None, 0
        if isinstance(callee, MemberExpr) and callee.name == "apply" and isinstance(callee.expr, RefExpr):
            info = callee.expr.node
            if isinstance(info, TypeInfo) and info.has_base("torch.autograd.function.Function"):
                found = info.get_method("forward")
                func = found.func if isinstance(found, Decorator) else found
                skip = 1  # ctx
        elif isinstance(callee, RefExpr) and isinstance(callee.node, FuncDef):
            func = callee.node
        if not isinstance(func, FuncDef) or func.fullname.startswith(_TYPED_LIBRARIES):
            return False  # spmd's collectives and torch's ops: typed by the plugin
        if not isinstance(func.type, CallableType):
            return True  # unannotated
        types = func.type.arg_types
        return position + skip < len(types) and carried(types[position + skip]) is None
    return False


_LAST: List[Any] = [None, None, {}]  # (tree, reads, index) of the last file asked about


def declared_partial(api: Any, reads: Reads) -> Dict[Span, FrozenSet[str]]:
    """The index of the file the checker is checking (built once per tree)."""
    tree: Optional[MypyFile] = getattr(api, "tree", None)
    if tree is None:
        return {}
    if _LAST[0] is tree and _LAST[1] is reads:
        return _LAST[2]
    index = _index(tree, reads)
    _LAST[:] = [tree, reads, index]
    return index


def source_text(where: Optional[Span], data: bytes) -> Optional[str]:
    """The source text of a span of an ASCII file's bytes, whitespace runs
    collapsed; None when it cannot be cut out exactly."""
    if where is None or not data:
        return None
    line, column, end_line, end_column = where
    try:
        lines = data.decode("ascii").split("\n")[line - 1 : end_line]
    except UnicodeDecodeError:
        return None
    if not lines:
        return None
    if len(lines) == 1:
        text = lines[0][column:end_column]
    else:
        text = "\n".join([lines[0][column:], *lines[1:-1], lines[-1][:end_column]])
    return " ".join(text.split()) or None
