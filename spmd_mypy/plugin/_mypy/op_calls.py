"""What the op hooks' quick lane reads of a call, in one pass (plugin/op_lane.py).

The lane runs for most op calls of annotated code, so what it needs of the
call -- is the result one tensor, and is every argument a carrier, a Python
number or something that holds no tensor -- is read here in one function,
without the general readers' steps (carriers.carried, argument_kind) for
each argument.
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Dict, List, Optional, Tuple

from mypy.nodes import ARG_STAR, ARG_STAR2, CallExpr, IntExpr, NameExpr, StrExpr, TupleExpr, UnaryExpr
from mypy.types import Instance, LiteralType, TupleType

from ...vocab.opclasses import SCALAR
from .carriers import CARRIER, TENSOR

_TENSORS = frozenset({TENSOR, CARRIER})
_flat = chain.from_iterable
_NUMBERS = frozenset({"builtins.int", "builtins.float", "builtins.bool", "builtins.complex"})
# Arguments that hold no tensor and are no operand: a string, a dtype, ...
_INERT = frozenset(
    {"builtins.str", "torch._C.dtype", "torch._C.memory_format", "torch._C.device", "torch._C.layout"}
)


def simple_operands(
    ctx: Any, receiver: bool, scalars: bool, carrier_needed: bool = True
) -> Optional[Tuple[object, ...]]:
    """For a call whose result is one tensor and whose arguments are all
    carriers, Python numbers or inert values (a string, a dtype, a tuple of
    ints; not `out=`): its operands in the order the rules take them (the
    receiver first, then the arguments by parameter), each a carrier's
    canonical string or SCALAR (a number, an operand only when `scalars`);
    None for any other call, or one with a PS/PSA operand, or (when
    `carrier_needed`) one without a carrier operand."""
    default = ctx.default_return_type
    if default.__class__ is not Instance:
        return None
    info = default.type
    if info.fullname not in _TENSORS and not info.has_base(TENSOR):
        return None
    out: List[object] = []
    if receiver:
        text = _literal_text(ctx.type)
        if text is None:
            return None
        out.append(text)
    carriers = receiver
    for typ in _flat(ctx.arg_types):  # by parameter; most parameters of an op are given nothing
        cls = typ.__class__
        if cls is Instance:
            full = typ.type.fullname
            if full == CARRIER:  # _literal_text, written out: most operands are carriers
                args = typ.args
                arg = args[0] if args else None
                if arg.__class__ is not LiteralType or arg.value.__class__ is not str or "PS" in arg.value:
                    return None
                out.append(arg.value)
                carriers = True
            elif full in _NUMBERS:
                if scalars:
                    out.append(SCALAR)
            elif full not in _INERT:
                return None
        elif cls is not TupleType or not _ints(typ):  # a tuple of sizes or dims passes
            return None
    if not carriers and carrier_needed or "out" in getattr(ctx.context, "arg_names", ()):
        return None  # out=t: the result must agree with t (ops.check_out)
    return tuple(out)


def _ints(typ: TupleType) -> bool:
    """A tuple type of ints (the rules read no tuple but a display of tensors)."""
    return all(t.__class__ is Instance and t.type.fullname == "builtins.int" for t in typ.items)


def _literal_text(typ: Any) -> Optional[str]:
    """A carrier Instance's canonical string (None: not a carrier, SpmdTensor[Any],
    or a PS/PSA value, which the lane leaves to the general path)."""
    if typ.__class__ is not Instance or typ.type.fullname != CARRIER or not typ.args:
        return None
    arg = typ.args[0]
    if arg.__class__ is not LiteralType:
        return None
    value = arg.value
    return value if value.__class__ is str and "PS" not in value else None


def collective_question(ctx: Any) -> Optional[Tuple[object, ...]]:
    """For a typed collective's call written in the plain form -- its value
    a carrier, the axis a string (or a tuple of them), src/dst/expert_mode/op
    names or literals (`S(0)` a call of a name on an int) -- what the hook's
    answer depends on: the keyword names as written (which, with the
    callee's parameters, bind each argument), the value's canonical string
    and each other argument's written form; None for any other call (a group
    or a variable as the axis, a computed src, an argument bound to no
    parameter, *args or **kwargs) or a result that is not one tensor."""
    default = ctx.default_return_type
    if default.__class__ is not Instance or default.type.fullname not in _TENSORS:
        return None
    context = ctx.context
    if context.__class__ is not CallExpr:
        return None
    args = context.args
    kinds = context.arg_kinds  # `in` compares by identity first: an Enum's hash is Python code
    if ARG_STAR in kinds or ARG_STAR2 in kinds or len(args) != sum(map(len, ctx.arg_types)):
        return None  # *args, **kwargs, or an argument bound to no parameter
    formals: List[str] = ctx.callee_arg_names
    names = tuple(context.arg_names)
    plan = _plan(formals, names)
    if plan is None:
        return None
    axis_at, others = plan
    x = ctx.arg_types[formals.index("x")]
    text = _literal_text(x[0]) if len(x) == 1 else None
    axis = _axis_shape(args[axis_at]) if axis_at is not None else _UNBOUND
    if text is None or axis is None:
        return None
    parts: List[object] = [names, text, axis]
    for i in others:
        expr = args[i]
        shape = (expr.fullname or None) if expr.__class__ is NameExpr else _written(expr)
        if shape is None:
            return None
        parts.append(shape)
    return tuple(parts)


_UNSET: Any = object()
_UNBOUND = ("unbound",)  # the axis given no argument (mypy reports the call)
# id(a callee's parameter names) -> (those names, keyword names as written -> plan)
Plan = Tuple[Optional[int], Tuple[int, ...]]  # the axis's position, the others'
_PLANS: Dict[int, Tuple[object, Dict[Tuple[Optional[str], ...], Optional[Plan]]]] = {}


def _plan(formals: List[str], names: Tuple[Optional[str], ...]) -> Optional[Plan]:
    """Where the arguments bind (by keyword, else the i-th positional to the
    i-th parameter): the axis's position and the others' (x's type is read
    by parameter); None if one binds to no parameter or x is not given.
    Kept per callee and keyword names: the same for every call written alike."""
    entry = _PLANS.get(id(formals))
    if entry is None or entry[0] is not formals:
        if len(_PLANS) >= 4096:
            _PLANS.clear()
        entry = _PLANS[id(formals)] = (formals, {})  # holding the names keeps their id from reuse
    found = entry[1].get(names, _UNSET)
    if found is _UNSET:
        found = entry[1][names] = _bind(formals, names)
    return found  # type: ignore[no-any-return]


def _bind(formals: List[str], names: Tuple[Optional[str], ...]) -> Optional[Plan]:
    x_given, axis_at = False, None
    others: List[int] = []
    for i, name in enumerate(names):
        formal = name or (formals[i] if i < len(formals) else None)
        if formal is None:
            return None
        if formal == "x":
            x_given = True
        elif formal == "axis":
            axis_at = i
        else:
            others.append(i)
    return (axis_at, tuple(others)) if x_given else None


def _axis_shape(expr: Any) -> Optional[object]:
    if expr.__class__ is StrExpr:
        return expr.value
    if expr.__class__ is TupleExpr:
        items: List[Any] = expr.items
        if all(e.__class__ is StrExpr for e in items):
            return tuple(e.value for e in items)
    return None


def _written(expr: Any) -> Optional[object]:
    """A name by its fullname, a string or int literal, `S(-1)`; else None."""
    cls = expr.__class__
    if cls is NameExpr:
        return expr.fullname or None
    if cls is StrExpr or cls is IntExpr:
        return (cls, expr.value)
    if cls is UnaryExpr and expr.op == "-" and expr.expr.__class__ is IntExpr:
        return (IntExpr, -expr.expr.value)
    if cls is CallExpr and expr.callee.__class__ is NameExpr and len(expr.args) == 1 and not expr.arg_names[0]:
        inner = _written(expr.args[0])
        return None if inner is None or inner[0] is not IntExpr else (expr.callee.fullname, inner)  # type: ignore[index]
    return None
