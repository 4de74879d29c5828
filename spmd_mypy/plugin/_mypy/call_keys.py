"""A call hook's question as one hashable key, and a watch for its errors.

Hooks of typed ops and collectives answer from what mypy gives them: the
receiver's and the arguments' types, the default result, and a few literal
facts written in the call (a dim `1`, a dtype `torch.int64`, an axis name
`"tp"`, `src=S(0)`).  `call_key` puts exactly those in one tuple, so that a
hook can answer a question it has answered before from that answer
(plugin/answers.py); what the rules never read (the name of a tensor or
float variable, the text of a tensor expression) stays out of it, so
different code with the same types asks the same question.

Types are compared as mypy compares them (a class by its TypeInfo object,
a Literal by its value).  The literal facts follow the rules' readers
(expressions.py): ints, strings, names by fullname, calls and tuples by
their parts; a float's value is read by no rule.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

from mypy.errors import ErrorWatcher
from mypy.nodes import (
    CallExpr,
    EllipsisExpr,
    Expression,
    FloatExpr,
    IntExpr,
    ListExpr,
    MemberExpr,
    NameExpr,
    SliceExpr,
    StrExpr,
    TupleExpr,
    UnaryExpr,
)
from mypy.types import Instance, LiteralType, Type

from .carriers import CARRIER, TENSOR

OPAQUE: Any = object()  # a fact no key can hold: the call is not remembered


class Same:
    """A key part that equals only itself's object: for a mypy type whose
    comparison costs a walk of it (a signature), where a new object stands
    for a new definition.  The key keeps the object alive, so its id is
    never reused meanwhile."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return other.__class__ is Same and other.obj is self.obj  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"Same({self.obj!r})"


def call_key(ctx: Any, prefix: object) -> Optional[Tuple[object, ...]]:
    """The key of a Function/MethodContext's question (after `prefix`, what
    the caller knows of the call's place), None when an argument is written
    in a form the key cannot hold, or an argument of the call is bound to no
    parameter (the hooks read such a keyword from the call itself:
    collective_args.reduce_op).

    Written for speed (hooks ask it per call): the common arguments -- a
    tensor or a float, a name, a string or int literal -- inline."""
    context = ctx.context
    arg_types = ctx.arg_types
    if context.__class__ is CallExpr and len(context.args) != sum(map(len, arg_types)):
        return None
    parts: list = [prefix, getattr(ctx, "type", None), ctx.default_return_type, tuple(ctx.callee_arg_names)]
    for names, exprs, types in zip(ctx.arg_names, ctx.args, arg_types):
        parts.append(len(exprs))
        for name, expr, typ in zip(names, exprs, types):
            cls = expr.__class__
            if cls is StrExpr or cls is IntExpr:
                # a literal's value says it all; of its type (str or Literal['x'],
                # by the callee's parameter) only which kind of type
                parts += (name, typ.__class__, (cls, expr.value))  # type: ignore[attr-defined]
                continue
            if typ.__class__ is Instance and cls is not ListExpr and cls is not TupleExpr:
                if typ.type.fullname in _PLAIN_VALUES:
                    parts += (name, typ, None)  # most arguments: a tensor or a float
                    continue
                if cls is NameExpr:
                    node = expr.node  # type: ignore[attr-defined]
                    parts += (name, typ, getattr(node, "fullname", None) or expr.fullname or OPAQUE)  # type: ignore[attr-defined]
                    continue
            fact = _fact(expr, typ, ctx.api.lookup_type_or_none)
            if fact is OPAQUE:
                return None
            parts += (name, typ, fact)
    return None if OPAQUE in parts else tuple(parts)


# Types whose values the rules read only through the type: a tensor (any
# class deriving from Tensor, checked by _plain_value) and a float.
_PLAIN_VALUES = frozenset({"builtins.float", TENSOR, CARRIER})
_DISPLAYS = (ListExpr, TupleExpr)


def _plain_value(typ: Type) -> bool:
    """A tensor or a float: the rules read its type, never how it is written."""
    if not isinstance(typ, Instance):
        return False
    info = typ.type
    return info.fullname in _PLAIN_VALUES or info.has_base(TENSOR)


def _fact(expr: Expression, typ: Type, lookup: Any) -> object:
    cls = expr.__class__
    if cls is ListExpr or cls is TupleExpr:
        # torch.cat([a, b]): the rules read each item and its own type
        items = []
        for item in expr.items:  # type: ignore[attr-defined]
            item_type = lookup(item)
            if item_type is None:
                return OPAQUE
            fact = _fact(item, item_type, lookup)
            if fact is OPAQUE:
                return OPAQUE
            items.append((item_type, fact))
        return (cls, tuple(items))
    if _plain_value(typ):
        return None
    return literal_shape(expr)


def literal_shape(expr: Optional[Expression]) -> object:
    """What the rules can read from an expression: literal values, names by
    fullname (a local variable by its bare name), calls and tuples by their
    parts; OPAQUE for anything else."""
    if expr is None:
        return None
    cls = expr.__class__
    if cls is IntExpr or cls is StrExpr or cls is FloatExpr:
        return (cls, expr.value)  # type: ignore[attr-defined]
    if cls is NameExpr or cls is MemberExpr:
        node = expr.node  # type: ignore[attr-defined]
        full = getattr(node, "fullname", None) or expr.fullname  # type: ignore[attr-defined]
        if full:
            return full
        if cls is MemberExpr:
            base = literal_shape(expr.expr)  # type: ignore[attr-defined]
            return OPAQUE if base is OPAQUE else (base, expr.name)  # type: ignore[attr-defined]
        return OPAQUE
    if cls is UnaryExpr:
        inner = literal_shape(expr.expr)  # type: ignore[attr-defined]
        return OPAQUE if inner is OPAQUE else (expr.op, inner)  # type: ignore[attr-defined]
    if cls is TupleExpr or cls is ListExpr:
        items = tuple(literal_shape(e) for e in expr.items)  # type: ignore[attr-defined]
        return OPAQUE if OPAQUE in items else (cls, items)
    if cls is CallExpr:
        parts = (literal_shape(expr.callee),) + tuple(literal_shape(a) for a in expr.args)  # type: ignore[attr-defined]
        if OPAQUE in parts:
            return OPAQUE
        return (cls, parts, tuple(expr.arg_names), tuple(expr.arg_kinds))  # type: ignore[attr-defined]
    if cls is SliceExpr:
        parts = tuple(literal_shape(e) for e in (expr.begin_index, expr.end_index, expr.stride))  # type: ignore[attr-defined]
        return OPAQUE if OPAQUE in parts else (cls, parts)
    if cls is EllipsisExpr:
        return cls
    return OPAQUE


def written_call(expr: Expression) -> Optional[object]:
    """The literal shape of a call written in the source (`Spmd(tp=V, dp=S(0))`),
    None when `expr` is no call or holds a part literal_shape cannot read.
    Its names are fullnames, so two places that write the same call naming
    the same definitions have one key."""
    if expr.__class__ is not CallExpr:
        return None
    shape = literal_shape(expr)
    return None if shape is OPAQUE else shape


def types_by_value(types: Sequence[Type]) -> Optional[Tuple[Type, ...]]:
    """`types` as a key compared by value, when each is an Instance whose
    arguments are Instances or Literals (a carrier, Tensor, int, a class):
    their equality says all a hook reads of them, and an Instance keeps its
    hash.  None for anything else (an Any compares equal to every Any,
    whatever its kind; a callable's hash walks it)."""
    for t in types:
        if t.__class__ is not Instance or not _plain_args(t):
            return None
    return tuple(types)


def _plain_args(t: Instance) -> bool:
    for a in t.args:
        cls = a.__class__
        if cls is LiteralType:
            continue
        if cls is not Instance or not _plain_args(a):  # type: ignore[arg-type]
            return False
    return True


def error_watch(api: Any) -> ErrorWatcher:
    """A context manager that sees every error and note reported inside it,
    also those an outer filter then drops (it is the innermost watcher) and
    those reported past the filters (calls.fail_past_filters):
    `.has_new_errors()` after it."""
    return ErrorWatcher(api.msg.errors)
