"""Reading expressions: literal values of arguments, callee names, and the
short source-like text hints quote."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from mypy.nodes import (
    ARG_NAMED,
    ARG_OPT,
    ARG_POS,
    ARG_STAR,
    ARG_STAR2,
    AssignmentExpr,
    AwaitExpr,
    BytesExpr,
    CallExpr,
    ComparisonExpr,
    ConditionalExpr,
    Context,
    DictExpr,
    DictionaryComprehension,
    EllipsisExpr,
    Expression,
    FloatExpr,
    GeneratorExpr,
    IndexExpr,
    IntExpr,
    LambdaExpr,
    ListComprehension,
    ListExpr,
    MemberExpr,
    NameExpr,
    OpExpr,
    RefExpr,
    SetComprehension,
    SetExpr,
    SliceExpr,
    StarExpr,
    StrExpr,
    TupleExpr,
    UnaryExpr,
)
from mypy.types import Instance, get_proper_type

from .tree import unwrapped


def fullname_of(expr: Expression) -> Optional[str]:
    if isinstance(expr, RefExpr):
        node = expr.node
        return getattr(node, "fullname", None) or expr.fullname or None
    return None


def str_value(expr: Expression) -> Optional[str]:
    return expr.value if isinstance(expr, StrExpr) else None


def is_name(expr: Expression) -> bool:
    """A bare name (`xs`), whose type no context changes."""
    return type(expr) is NameExpr


def str_tuple(expr: Expression) -> Optional[Tuple[str, ...]]:
    if isinstance(expr, TupleExpr):
        values = [str_value(e) for e in expr.items]
        if all(v is not None for v in values):
            return tuple(values)  # type: ignore[arg-type]
    return None


def int_value(expr: Expression) -> Optional[int]:
    if isinstance(expr, IntExpr):
        return expr.value
    if isinstance(expr, UnaryExpr) and expr.op == "-" and isinstance(expr.expr, IntExpr):
        return -expr.expr.value
    return None


NOT_LITERAL: Any = object()  # literal_value of an expression that is not a literal


def literal_value(expr: Expression, api: Any = None) -> Any:
    """The Python value of a literal argument (ints, floats, strings, True/False/None,
    tuples and lists of them, slices, ...); NOT_LITERAL otherwise.  With `api`, an
    index that is not literal reads as "int" (an int value) or "slice" (a slice)."""
    if isinstance(expr, IntExpr) or isinstance(expr, FloatExpr) or isinstance(expr, StrExpr):
        return expr.value
    if isinstance(expr, UnaryExpr) and expr.op == "-" and isinstance(expr.expr, (IntExpr, FloatExpr)):
        return -expr.expr.value
    if isinstance(expr, NameExpr) and expr.fullname in _CONSTANTS:
        return _CONSTANTS[expr.fullname]
    if isinstance(expr, EllipsisExpr):
        return Ellipsis
    if isinstance(expr, (TupleExpr, ListExpr)):
        items = [literal_value(e, api) for e in expr.items]
        return NOT_LITERAL if any(i is NOT_LITERAL for i in items) else tuple(items)
    if isinstance(expr, SliceExpr):
        parts = [None if e is None else literal_value(e) for e in (expr.begin_index, expr.end_index, expr.stride)]
        if any(x is NOT_LITERAL for x in parts):
            return "slice" if api is not None else NOT_LITERAL
        return slice(*parts)
    if api is not None:
        p = get_proper_type(api.get_expression_type(expr))
        if isinstance(p, Instance) and p.type.fullname == "builtins.int":
            return "int"
    return NOT_LITERAL


_CONSTANTS = {"builtins.True": True, "builtins.False": False, "builtins.None": None}


def call_parts(expr: Expression) -> Optional[Tuple[Optional[str], List[Expression], List[Tuple[str, Expression]]]]:
    """(callee fullname, positional args, keyword args) of a call expression."""
    if not isinstance(expr, CallExpr):
        return None
    pos = [a for a, k in zip(expr.args, expr.arg_kinds) if k == ARG_POS]
    kws = [(n, a) for a, k, n in zip(expr.args, expr.arg_kinds, expr.arg_names) if k == ARG_NAMED and n]
    return fullname_of(expr.callee), pos, kws


def is_true(expr: Expression) -> bool:
    return isinstance(expr, NameExpr) and expr.fullname == "builtins.True"


def is_false(expr: Expression) -> bool:
    return isinstance(expr, NameExpr) and expr.fullname == "builtins.False"


def is_none_expr(expr: Expression) -> bool:
    return isinstance(expr, NameExpr) and expr.fullname == "builtins.None"


def operator_sides(context: Context) -> Optional[Tuple[str, str]]:
    """Source text of the left and right operands of `a op b`, `a op= b`, `a < b`."""
    found = operator_operands(context)
    return None if found is None else (expr_text(found[0]), expr_text(found[1]))


def is_operator(context: Context) -> bool:
    """Whether `context` is `a op b`, `a op= b` or `a < b` (operator_sides
    without rendering them)."""
    return operator_operands(context) is not None


def operator_operands(context: Context) -> Optional[Tuple[Expression, Expression]]:
    """The left and right operands of `a op b`, `a op= b`, `a < b`; None for any other node."""
    left = getattr(context, "left", None)
    right = getattr(context, "right", None)
    if left is None:
        left, right = getattr(context, "lvalue", None), getattr(context, "rvalue", None)
    if left is None:
        operands = getattr(context, "operands", None)
        if operands and len(operands) >= 2:
            left, right = operands[0], operands[1]
    if isinstance(left, Expression) and isinstance(right, Expression):
        return left, right
    return None


def expr_text(expr: Expression) -> str:
    """The expression as written (up to spacing, quotes and float spelling),
    for messages and hints, whose calls must apply as they stand; an
    abbreviated form (`f(...)`, `a[...]`) past TEXT_LIMIT characters."""
    expr = unwrapped(expr)  # a rewrite's wrapper: the value as written
    full = _render(expr)
    if full is not None and len(full) <= TEXT_LIMIT:
        return full
    return _short(expr)


TEXT_LIMIT = 120

# expr_text of a form it does not render (an f-string): a placeholder no
# name in the user's code can be, so callers can tell it from a name `x`.
UNRENDERED = "<expression>"

# Binding strength of binary operators (higher binds tighter), as in Python.
_PRECEDENCE = {
    "or": 1, "and": 2, "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8, "+": 9, "-": 9,
    "*": 10, "@": 10, "/": 10, "//": 10, "%": 10, "**": 12,
}
_UNARY = 11
_AWAIT = 12  # binds tighter than unary operators; parenthesised as an operand of **
_ATOM = 13
_LAMBDA = -1  # below a conditional expression
_COMPARISON = 4  # `a is not None`: below `|`, above `not`
_NOT = 3
_CONDITIONAL = 0  # `a if c else b`: below every binary operator


def _short(expr: Expression) -> str:
    if isinstance(expr, NameExpr):
        return expr.name
    if isinstance(expr, MemberExpr):
        return f"{_short(expr.expr)}.{expr.name}"
    if isinstance(expr, CallExpr) and isinstance(expr.callee, (NameExpr, MemberExpr)):
        return f"{_short(expr.callee)}(...)"
    if isinstance(expr, IndexExpr):
        return f"{_short(expr.base)}[...]"
    return UNRENDERED


def _render(expr: Expression) -> Optional[str]:
    """Source text of `expr`; None for a form not rendered."""
    found = _rendered(expr)
    return None if found is None else found[0]


def _rendered(expr: Expression) -> Optional[Tuple[str, int]]:
    """(text, precedence of its outermost operator)."""
    expr = unwrapped(expr)
    if isinstance(expr, NameExpr):
        return expr.name, _ATOM
    if isinstance(expr, (IntExpr, FloatExpr, StrExpr)):
        return repr(expr.value), _ATOM
    if isinstance(expr, BytesExpr):  # mypy keeps the text between the quotes
        return f"b'{expr.value}'", _ATOM
    if isinstance(expr, EllipsisExpr):
        return "...", _ATOM
    if isinstance(expr, MemberExpr):
        base = _operand(expr.expr, _ATOM, False)
        return (None if base is None else (f"{base}.{expr.name}", _ATOM))
    if isinstance(expr, CallExpr):
        return _rendered_call(expr)
    if isinstance(expr, IndexExpr):
        base, index = _operand(expr.base, _ATOM, False), _index_text(expr.index)
        return None if base is None or index is None else (f"{base}[{index}]", _ATOM)
    if isinstance(expr, OpExpr) and expr.op in _PRECEDENCE:
        return _rendered_op(expr)
    if isinstance(expr, UnaryExpr):
        prec = _NOT if expr.op == "not" else _UNARY
        inner = _operand(expr.expr, prec, False)
        op = "not " if expr.op == "not" else expr.op
        return None if inner is None else (f"{op}{inner}", prec)
    if isinstance(expr, ComparisonExpr):
        return _rendered_comparison(expr)
    if isinstance(expr, ConditionalExpr):
        parts = [_operand(e, _CONDITIONAL + 1, False) for e in (expr.if_expr, expr.cond)]
        rest = _operand(expr.else_expr, _CONDITIONAL, True)
        if parts[0] is None or parts[1] is None or rest is None:
            return None
        return f"{parts[0]} if {parts[1]} else {rest}", _CONDITIONAL
    if isinstance(expr, (TupleExpr, ListExpr)):
        items = [_render(i) for i in expr.items]
        if any(i is None for i in items):
            return None
        body = ", ".join(i for i in items if i is not None)
        if isinstance(expr, ListExpr):
            return f"[{body}]", _ATOM
        return (f"({body},)" if len(items) == 1 else f"({body})"), _ATOM
    return _rendered_other(expr)


def _rendered_other(expr: Expression) -> Optional[Tuple[str, int]]:
    """Displays, comprehensions, lambdas, `await`, `*xs` and `(y := e)`."""
    if isinstance(expr, DictExpr):
        parts: List[Optional[str]] = []
        for key, value in expr.items:
            if key is None:  # `**d`
                spread = _operand(value, _UNARY, False)
                parts.append(None if spread is None else f"**{spread}")
            else:
                parts.append(_pair(key, value))
        return _joined(parts, "{", "}")
    if isinstance(expr, SetExpr):
        return _joined([_render(i) for i in expr.items], "{", "}") if expr.items else None
    if isinstance(expr, (ListComprehension, SetComprehension)):
        inner = _comprehension(expr.generator)
        ends = "[]" if isinstance(expr, ListComprehension) else "{}"
        return None if inner is None else (f"{ends[0]}{inner}{ends[1]}", _ATOM)
    if isinstance(expr, GeneratorExpr):
        inner = _comprehension(expr)
        return None if inner is None else (f"({inner})", _ATOM)
    if isinstance(expr, DictionaryComprehension):
        head = _pair(expr.key, expr.value) if expr.key is not None else None
        loops = _loops(expr.indices, expr.sequences, expr.condlists, expr.is_async)
        return None if head is None or loops is None else (f"{{{head} {loops}}}", _ATOM)
    if isinstance(expr, LambdaExpr):
        return _rendered_lambda(expr)
    if isinstance(expr, AwaitExpr):
        inner = _operand(expr.expr, _ATOM, False)
        return None if inner is None else (f"await {inner}", _AWAIT)
    if isinstance(expr, StarExpr):
        inner = _operand(expr.expr, _UNARY, False)
        return None if inner is None else (f"*{inner}", _ATOM)
    if isinstance(expr, AssignmentExpr):
        value = _render(expr.value)
        return None if value is None else (f"({expr.target.name} := {value})", _ATOM)
    return None


def _joined(parts: List[Optional[str]], opening: str, closing: str) -> Optional[Tuple[str, int]]:
    if any(p is None for p in parts):
        return None
    return opening + ", ".join(p for p in parts if p is not None) + closing, _ATOM


def _pair(key: Expression, value: Expression) -> Optional[str]:
    k, v = _render(key), _render(value)
    return None if k is None or v is None else f"{k}: {v}"


def _comprehension(gen: GeneratorExpr) -> Optional[str]:
    head = _render(gen.left_expr)
    loops = _loops(gen.indices, gen.sequences, gen.condlists, gen.is_async)
    return None if head is None or loops is None else f"{head} {loops}"


def _loops(
    indices: List[Expression], sequences: List[Expression], condlists: List[List[Expression]], is_async: List[bool]
) -> Optional[str]:
    """`for a in xs if c for b in ys`: a comprehension's clauses."""
    out = []
    for index, seq, conds, asynchronous in zip(indices, sequences, condlists, is_async):
        target = _render(index)
        source = _operand(seq, _CONDITIONAL + 1, False)
        tests = [_operand(c, _CONDITIONAL + 1, False) for c in conds]
        if target is None or source is None or any(t is None for t in tests):
            return None
        if isinstance(index, TupleExpr) and target.startswith("("):
            target = target[1:-1]  # `for a, b in xs`
        out.append(("async for " if asynchronous else "for ") + f"{target} in {source}")
        out += [f"if {t}" for t in tests if t is not None]
    return " ".join(out)


def _rendered_lambda(expr: LambdaExpr) -> Optional[Tuple[str, int]]:
    """`lambda a, b=1: body` (positional parameters and defaults only)."""
    params = []
    for arg in expr.arguments:
        if arg.kind not in (ARG_POS, ARG_OPT):
            return None
        default = _render(arg.initializer) if arg.initializer is not None else None
        if arg.initializer is not None and default is None:
            return None
        name = arg.variable.name
        params.append(name if default is None else f"{name}={default}")
    body = _render(expr.expr())
    if body is None:
        return None
    head = f"lambda {', '.join(params)}" if params else "lambda"
    return f"{head}: {body}", _LAMBDA


def _operand(expr: Expression, outer: int, right: bool) -> Optional[str]:
    """`expr` as an operand of an operator binding `outer`, parenthesised if needed."""
    found = _rendered(expr)
    if found is None:
        return None
    text, inner = found
    if inner < outer or (inner == outer and right != (outer == _PRECEDENCE["**"])):
        return f"({text})"
    return text


def _rendered_op(expr: OpExpr) -> Optional[Tuple[str, int]]:
    prec = _PRECEDENCE[expr.op]
    left = _operand(expr.left, prec, False)
    right = _operand(expr.right, prec, True)
    if left is None or right is None:
        return None
    return f"{left} {expr.op} {right}", prec


def _rendered_comparison(expr: ComparisonExpr) -> Optional[Tuple[str, int]]:
    texts = [_operand(e, _COMPARISON + 1, False) for e in expr.operands]
    if any(t is None for t in texts):
        return None
    out = [texts[0]]
    for op, text in zip(expr.operators, texts[1:]):
        out += [op, text]
    return " ".join(t for t in out if t is not None), _COMPARISON


def _rendered_call(expr: CallExpr) -> Optional[Tuple[str, int]]:
    callee = _operand(expr.callee, _ATOM, False)
    if callee is None:
        return None
    if len(expr.args) == 1 and expr.arg_kinds[0] == ARG_POS and isinstance(expr.args[0], GeneratorExpr):
        inner = _comprehension(expr.args[0])  # `sum(t for t in xs)`: its own parentheses
        return None if inner is None else (f"{callee}({inner})", _ATOM)
    parts = []
    for arg, kind, name in zip(expr.args, expr.arg_kinds, expr.arg_names):
        text = _render(arg)
        if text is None:
            return None
        if kind == ARG_STAR:
            parts.append(f"*{text}")
        elif kind == ARG_STAR2:
            parts.append(f"**{text}")
        elif name is not None:
            parts.append(f"{name}={text}")
        else:
            parts.append(text)
    return f"{callee}({', '.join(parts)})", _ATOM


def _index_text(index: Expression) -> Optional[str]:
    if isinstance(index, TupleExpr) and index.items:
        items = [_index_text(i) for i in index.items]
        return None if any(i is None for i in items) else ", ".join(i for i in items if i is not None)
    if isinstance(index, SliceExpr):
        parts = [_render(p) if p is not None else "" for p in (index.begin_index, index.end_index)]
        if any(p is None for p in parts):
            return None
        text = f"{parts[0]}:{parts[1]}"
        if index.stride is not None:
            stride = _render(index.stride)
            return None if stride is None else f"{text}:{stride}"
        return text
    return _render(index)


def display_items(expr: Expression) -> Optional[List[Expression]]:
    """The items of a list or tuple display `[a, b]` / `(a, b)`, else None."""
    if isinstance(expr, (ListExpr, TupleExpr)):
        return list(expr.items)
    return None


def starred(expr: Expression) -> Optional[Expression]:
    """`e` of a starred item `*e` in a display, else None."""
    return expr.expr if isinstance(expr, StarExpr) else None


def comprehension_element(expr: Expression) -> Optional[Expression]:
    """`e` of `[e for x in xs]` / `(e for x in xs)`: the one expression every
    element is (mypy types the comprehension from the parameter it is passed
    to, list[Tensor] for torch.cat's, while `e` keeps its own type)."""
    if isinstance(expr, ListComprehension):
        expr = expr.generator
    return expr.left_expr if isinstance(expr, GeneratorExpr) else None


def copied_sequence(expr: Expression) -> Optional[Expression]:
    """`e` of `list(e)` / `tuple(e)`: a copy whose own type mypy infers from the
    parameter it is passed to (list[Tensor] for torch.cat's), while `e` keeps
    its element types."""
    if isinstance(expr, CallExpr) and len(expr.args) == 1 and expr.arg_kinds == [ARG_POS]:
        callee = expr.callee
        if isinstance(callee, NameExpr) and callee.fullname in ("builtins.list", "builtins.tuple"):
            return expr.args[0]
    return None


_CONTEXT_TYPED = (ListExpr, DictExpr, SetExpr, ListComprehension, SetComprehension, DictionaryComprehension)


def typed_in_context(expr: Expression) -> bool:
    """A list, dict or set display or comprehension: mypy infers its element
    type from the parameter it is passed to, so against a Sequence its
    type no longer tells a list of lists from a list of tuples."""
    return isinstance(expr, _CONTEXT_TYPED)


_SPLITS = frozenset({"split", "chunk", "unbind", "tensor_split", "hsplit", "vsplit", "split_with_sizes"})
# where a split's dim is given positionally (after the tensor; unbind's is its
# first argument), and its default where another than 0 (hsplit splits the
# columns of a value of 2 dims or more)
_DIM_AT, _DIM_DEFAULT = {"unbind": 0}, {"hsplit": 1}


def split_source(expr: Optional[Expression]) -> Optional[Tuple[Expression, Optional[int], bool]]:
    """(the tensor a call splits into a tuple, the dim it splits if written
    as a literal or left at its default, whether its pieces drop that dim
    (unbind's)): `x` of `torch.split(x, n, dim=-1)`, `x.chunk(k)`; None for
    any other expression."""
    if not isinstance(expr, CallExpr):
        return None
    callee = expr.callee
    name = callee.name if isinstance(callee, (MemberExpr, NameExpr)) else None
    if name not in _SPLITS:
        return None
    full = getattr(callee, "fullname", None) or ""
    function = full.startswith("torch.") or isinstance(callee, NameExpr)  # torch.split(x, n), split(x, n)
    positional = [a for a, k in zip(expr.args, expr.arg_names) if k is None]
    source = positional[0] if function and positional else callee.expr if isinstance(callee, MemberExpr) else None
    if source is None:
        return None
    at = _DIM_AT.get(name, 1) + (1 if function else 0)
    dims = [a for a, k in zip(expr.args, expr.arg_names) if k == "dim"] or positional[at:][:1]
    return source, int_value(dims[0]) if dims else _DIM_DEFAULT.get(name, 0), name == "unbind"


def _torch_call(expr: Optional[Expression], functions: frozenset, methods: frozenset) -> bool:
    """A call of one of torch's `functions` (by the callee's fullname) or of
    a method named in `methods` (`x.new_zeros(n)`)."""
    if not isinstance(expr, CallExpr):
        return False
    callee = expr.callee
    if isinstance(callee, MemberExpr) and callee.name in methods:
        return True
    full = fullname_of(callee) or ""
    return full.startswith("torch.") and full.rpartition(".")[2] in functions


_ZEROS, _NEW_ZEROS = frozenset({"zeros", "zeros_like"}), frozenset({"new_zeros"})
# Calls that make a new tensor no other name holds: factories and copies
# (not views: x.detach() and x.view(n) share x's storage).
_FRESH_FUNCTIONS = frozenset({
    "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like", "rand", "randn",
})
_FRESH_METHODS = frozenset({"new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "clone"})


def makes_zeros(expr: Optional[Expression]) -> bool:
    """A call that makes a tensor of zeros: torch.zeros(...),
    torch.zeros_like(x), x.new_zeros(...)."""
    return _torch_call(expr, _ZEROS, _NEW_ZEROS)


def makes_fresh(expr: Optional[Expression]) -> bool:
    """A call that makes a tensor nothing else holds (torch.empty(n),
    x.new_empty(n), x.clone()): an in-place op on it changes no other
    value."""
    return _torch_call(expr, _FRESH_FUNCTIONS, _FRESH_METHODS)


def assignable(expr: Optional[Expression]) -> bool:
    """A name, attribute or item: an expression a value can be bound to."""
    return isinstance(expr, (NameExpr, MemberExpr, IndexExpr))


def call_receiver(context: Context) -> Optional[Expression]:
    """`x` of a method call written `x.m(...)`; None for any other call."""
    callee = getattr(context, "callee", None)
    return callee.expr if isinstance(callee, MemberExpr) else None
