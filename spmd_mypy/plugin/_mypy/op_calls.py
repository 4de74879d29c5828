"""What the op hooks' quick lane reads of a call, in one pass (plugin/op_lane.py).

The lane runs for most op calls of annotated code, so what it needs of the
call -- is the result one tensor, and is every argument a carrier, a Python
number or something that holds no tensor -- is read here in one function,
without the general readers' steps (carriers.carried, argument_kind) for
each argument.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from mypy.nodes import ARG_NAMED, ARG_POS, CallExpr, IntExpr, NameExpr, StrExpr, TupleExpr, UnaryExpr
from mypy.types import Instance, LiteralType, TupleType

from ...vocab.opclasses import SCALAR
from .carriers import CARRIER, TENSOR

_TENSORS = frozenset({TENSOR, CARRIER})
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
    for types in ctx.arg_types:
        for typ in types:
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
    if arg.__class__ is not LiteralType or not isinstance(arg.value, str) or "PS" in arg.value:
        return None
    return arg.value


def collective_question(ctx: Any) -> Optional[Tuple[object, ...]]:
    """For a typed collective's call written in the plain form -- its value
    a carrier, the axis a string (or a tuple of them), src/dst/expert_mode/op
    names or literals (`S(0)` a call of a name on an int) -- what the hook's
    answer depends on: the value's canonical string and each other
    argument's written form, by parameter; None for any other call (a group
    or a variable as the axis, a computed src, an argument bound to no
    parameter) or a result that is not one tensor."""
    default = ctx.default_return_type
    if default.__class__ is not Instance or default.type.fullname not in _TENSORS:
        return None
    context = ctx.context
    if context.__class__ is not CallExpr or len(context.args) != sum(map(len, ctx.arg_types)):
        return None  # not a call, or an argument bound to no parameter
    # the call as written: each argument's formal by its keyword or position
    # (every argument is bound, so the i-th positional one to the i-th formal)
    formals: List[str] = ctx.callee_arg_names
    names: List[Optional[str]] = context.arg_names
    kinds = context.arg_kinds
    parts: List[object] = [tuple(names)]
    for i, expr in enumerate(context.args):
        formal = names[i] or (formals[i] if i < len(formals) else None)
        kind = kinds[i]  # compared by identity: an Enum's hash is Python code
        if formal is None or (kind is not ARG_POS and kind is not ARG_NAMED):
            return None  # *args, **kwargs
        if formal == "x":
            x = ctx.arg_types[formals.index("x")]
            shape: object = _literal_text(x[0]) if len(x) == 1 else None
        elif formal == "axis":
            shape = _axis_shape(expr)
        elif expr.__class__ is NameExpr:  # src=P: _written's first case, inline (two per call)
            shape = expr.fullname or None
        else:
            shape = _written(expr)
        if shape is None:
            return None
        parts.append(shape)
    return tuple(parts)


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
