"""Reading an `spmd_typecheck(*, x, ...)` body built from spmd_types.rules.

spmd_types' keyword form of the hook is a type-level forward: it returns the
output type(s), composed of `rules.einsum`, the type-only collectives
(`rules.all_reduce(y, group, src=P, dst=I)`, ...) and `assert_type`.  This
module turns such a body into a list of steps the plugin evaluates at each
`Fn.apply` call (plugin/spmd_types_rules.py), with the call's argument types:

  ("assign", name, expr)        `name = expr`
  ("return", expr)              `return expr` (a tuple display: several outputs)
  ("skip", None, expr)          an expression statement (`rules.ignore(b)`)
  ("if", (name, is_none), then, else)
                                `if name is None:` / `if name is not None:`
                                (then/else: steps)

None for a body with any other statement (a loop, a try, a nested def): not
read statically.  Expressions stay mypy expressions; `rule_call` and
`none_test` read them.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from mypy.nodes import (
    ARG_NAMED,
    ARG_OPT,
    ARG_POS,
    AssignmentStmt,
    Block,
    CallExpr,
    ComparisonExpr,
    ConditionalExpr,
    Expression,
    ExpressionStmt,
    FuncDef,
    IfStmt,
    IntExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    PassStmt,
    ReturnStmt,
    StrExpr,
)
from mypy.types import NoneType, Type, get_proper_type

from .tree import BodyMemo, is_phantom_call

RULES_MODULE = "spmd_types.rules"
RULE_OPS = frozenset({
    "einsum", "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "reinterpret", "convert", "ignore",
})
Step = Tuple[str, Any, Any]


def _none_test(expr: Expression) -> Optional[Tuple[str, bool]]:
    """`name is None` -> (name, True); `name is not None` -> (name, False)."""
    if (
        isinstance(expr, ComparisonExpr)
        and len(expr.operators) == 1
        and expr.operators[0] in ("is", "is not")
        and isinstance(expr.operands[0], NameExpr)
        and isinstance(expr.operands[1], NameExpr)
        and expr.operands[1].name == "None"
    ):
        return expr.operands[0].name, expr.operators[0] == "is"
    return None


def _steps(block: Block) -> Optional[List[Step]]:
    out: List[Step] = []
    for stmt in block.body:
        if isinstance(stmt, AssignmentStmt) and len(stmt.lvalues) == 1 and isinstance(stmt.lvalues[0], NameExpr):
            out.append(("assign", stmt.lvalues[0].name, stmt.rvalue))
        elif isinstance(stmt, ReturnStmt) and stmt.expr is not None:
            out.append(("return", None, stmt.expr))
        elif isinstance(stmt, ExpressionStmt):
            out.append(("skip", None, stmt.expr))
        elif isinstance(stmt, PassStmt):
            continue
        elif isinstance(stmt, IfStmt) and len(stmt.expr) == 1 and _none_test(stmt.expr[0]) is not None:
            then = _steps(stmt.body[0])
            other = _steps(stmt.else_body) if stmt.else_body is not None else []
            if then is None or other is None:
                return None
            out.append(("if", _none_test(stmt.expr[0]), (then, other)))
        else:
            return None
    return out


# The steps read from each hook while its body was whole.
_KEPT: BodyMemo[Optional[List[Step]]] = BodyMemo()


def rule_steps(func: object) -> Optional[List[Step]]:
    """The steps of a keyword-only hook that returns its output types, else None."""
    if not isinstance(func, FuncDef):
        return None
    if not func.body.body:  # freed after its module was checked, or a cached skeleton
        kept = _KEPT.get(func)
        return kept[0] if kept is not None else None
    steps = _steps(func.body)
    found = steps if steps is not None and _returns_value(steps) else None
    _KEPT.put(func, found)
    return found


def _returns_value(steps: List[Step]) -> bool:
    for kind, _, payload in steps:
        if kind == "return" or (kind == "if" and any(_returns_value(s) for s in payload)):
            return True
    return False


def _rules_base(expr: Expression) -> bool:
    """`rules`, `spmd.rules`, `spmd_types.rules`: the module spmd_types.rules."""
    node = getattr(expr, "node", None)
    if isinstance(node, MypyFile):
        return node.fullname == RULES_MODULE
    return isinstance(expr, (NameExpr, MemberExpr)) and expr.name == "rules"


def rule_call(expr: Expression) -> Optional[Tuple[str, List[Expression], Dict[str, Expression]]]:
    """`rules.<op>(args, k=v)` -> (op, positional args, keyword args), else None."""
    if not isinstance(expr, CallExpr):
        return None
    callee = expr.callee
    if isinstance(callee, MemberExpr) and _rules_base(callee.expr):
        op = callee.name
    elif isinstance(callee, NameExpr) and (callee.fullname or "").startswith(RULES_MODULE + "."):
        op = callee.name
    else:
        return None
    if op not in RULE_OPS:
        return None
    pos = [a for a, k in zip(expr.args, expr.arg_kinds) if k == ARG_POS]
    kws = {n: a for a, k, n in zip(expr.args, expr.arg_kinds, expr.arg_names) if k == ARG_NAMED and n}
    return op, pos, kws


def conditional(expr: Expression) -> Optional[Tuple[Tuple[str, bool], Expression, Expression]]:
    """`a if name is None else b` -> ((name, True), a, b), else None."""
    if isinstance(expr, ConditionalExpr):
        test = _none_test(expr.cond)
        if test is not None:
            return test, expr.if_expr, expr.else_expr
    return None


def name_of(expr: Expression) -> Optional[str]:
    return expr.name if isinstance(expr, NameExpr) else None


def hook_function(info: Any, name: str) -> Optional[FuncDef]:
    """The FuncDef of a class's staticmethod `name` (None: absent or not a function)."""
    node = info.names.get(name)
    found = node.node if node is not None else None
    found = getattr(found, "func", found)
    return found if isinstance(found, FuncDef) else None


def class_in_file(api: Any, name: str) -> Any:
    """The TypeInfo of the module-level class `name` of the file being checked."""
    tree = getattr(api, "tree", None)
    node = tree.names.get(name) if tree is not None else None
    return getattr(node, "node", None)


def int_tuple(expr: Expression) -> Optional[Tuple[int, ...]]:
    """`(0, 1)` / `[0]` of int literals, else None."""
    items = getattr(expr, "items", None)
    if not isinstance(items, list) or not all(isinstance(i, IntExpr) for i in items):
        return None
    return tuple(i.value for i in items)


def is_none_type(typ: Optional[Type]) -> bool:
    return typ is not None and isinstance(get_proper_type(typ), NoneType)


RULE_RESULT = "_spmd_rule_result"


def wrap_rule_returns(forward: FuncDef, hook: FuncDef, cls_name: str, alias: str, returns: List[ReturnStmt]) -> None:
    """forward's `return e` -> `return <alias>._spmd_rule_result(e, "Fn", x=x, ...)`
    (forward's parameters after ctx), for a hook whose body rule_steps reads:
    the hook's evaluation on forward's own parameters checks e."""
    if rule_steps(hook) is None:
        return
    params = [a.variable.name for a in forward.arguments[1:] if a.kind in (ARG_POS, ARG_OPT)]
    for ret in returns:
        inner = ret.expr
        if inner is None:
            continue
        phantom = isinstance(inner, CallExpr) and is_phantom_call(inner) and bool(inner.args)
        value = inner.args[0] if isinstance(inner, CallExpr) and phantom else inner
        callee = MemberExpr(NameExpr(alias), RULE_RESULT)
        label = StrExpr(cls_name)
        names = [NameExpr(n) for n in params]
        call = CallExpr(callee, [value, label, *names], [ARG_POS, ARG_POS, *[ARG_NAMED] * len(names)],
                        [None, None, *params])
        for node in (callee, callee.expr, label, call, *names):
            node.set_line(value.line, value.column, value.end_line, value.end_column)
        if isinstance(inner, CallExpr) and phantom:
            inner.args[0] = call
        else:
            ret.expr = call
