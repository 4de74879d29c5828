"""Classes and their members on the checker side: which class's forward a
module call runs, the attributes a subclass redeclares, a call context for
an op the plugin routes a call to, named tuples and module lists."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from mypy.checkmember import analyze_member_access
from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    CallExpr,
    Context,
    Expression,
    DictExpr,
    DictionaryComprehension,
    GeneratorExpr,
    ListComprehension,
    ListExpr,
    MemberExpr,
    NameExpr,
    SuperExpr,
    TupleExpr,
    TypeInfo,
    Var,
)
from mypy.plugin import FunctionContext
from mypy.typevars import fill_typevars
from mypy.types import AnyType, Instance, NoneType, TupleType, Type, TypeOfAny, UnionType, get_proper_type

from .calls import typed_before
from .carriers import carried, phantom_generic
from .tensor_types import element_types
from .tree import PHANTOM_MODULE

MODULE = "torch.nn.modules.module.Module"


def _instance(typ: Optional[Type]) -> Optional[Instance]:
    p = get_proper_type(typ) if typ is not None else None
    return p if isinstance(p, Instance) else None


def holds_carrier(typ: Optional[Type]) -> bool:
    """A carrier, or an Optional / Union of carriers."""
    return typ is not None and any(carried(t) is not None for t in element_types(typ))


def declared_below(typ: Type, base: str, name: str) -> Optional[Type]:
    """The type of attribute `name` as the class of `typ` (or the nearest of
    its bases below `base`) declares it, when that declaration holds a
    carrier; None otherwise."""
    receiver = _instance(typ)
    if receiver is None or receiver.type.fullname == base:
        return None
    for info in receiver.type.mro:
        if info.fullname == base:
            return None
        sym = info.names.get(name)
        if sym is not None:
            var = sym.node
            if isinstance(var, Var) and holds_carrier(var.type):
                return var.type
            return None
    return None


def forward_owner(typ: Type) -> Optional[Tuple[str, Instance]]:
    """(fullname of the class whose forward a call of module `typ` runs, the module's type)."""
    receiver = _instance(typ)
    if receiver is None:
        return None
    return _first_defining(receiver.type.mro, "forward", receiver)


def super_forward_owner(context: Context) -> Optional[Tuple[str, Instance]]:
    """For `super().forward(...)`: (fullname of the class whose forward runs, self's type)."""
    callee = getattr(context, "callee", None)
    if not isinstance(callee, SuperExpr) or callee.info is None:
        return None
    info = callee.info
    self_type = fill_typevars(info)
    if not isinstance(self_type, Instance):
        return None
    return _first_defining(info.mro[1:], callee.name, self_type)


def _first_defining(mro: List[TypeInfo], name: str, receiver: Instance) -> Optional[Tuple[str, Instance]]:
    for info in mro:
        if name in info.names:
            return info.fullname, receiver
    return None


def receiver_expr(context: Context) -> Expression:
    """The module a call runs (`layer` in `layer(x)`, `lin` in `lin.forward(x)`);
    `self` for `super().forward(x)`."""
    callee = getattr(context, "callee", None)
    if isinstance(callee, MemberExpr) and callee.name == "forward":
        return callee.expr  # `lin.forward(x)`; `self.lin(x)` calls `self.lin`
    if isinstance(callee, SuperExpr) or callee is None:
        return NameExpr("self")
    return callee


def attribute_read(api: Any, receiver: Instance, name: str, context: Context) -> Type:
    """The type of `receiver.name` as a read, without messages."""
    return analyze_member_access(
        name, receiver, context, is_lvalue=False, is_super=False, is_operator=False,
        original_type=receiver, chk=api, suppress_errors=True,
    )


def without_none(typ: Type) -> Optional[Type]:
    """typ without its None alternative (None if nothing else is left)."""
    if typ.__class__ is Instance:  # most attributes read: an Instance, the answer as is
        return typ
    p = get_proper_type(typ)
    if isinstance(p, NoneType):
        return None
    if isinstance(p, UnionType):
        rest = [t for t in p.items if not isinstance(get_proper_type(t), NoneType)]
        if len(rest) != len(p.items):
            return rest[0] if len(rest) == 1 else (UnionType(rest, p.line, p.column) if rest else None)
    return typ


def member(base: Expression, name: str) -> MemberExpr:
    """`base.name`, an expression for messages only (never analysed)."""
    return MemberExpr(base, name)


def constructor_argument(base: Expression, name: str, position: int) -> Optional[Expression]:
    """The argument `name` (or positional `position`) of `base` when `base` is
    the call that builds the module (`nn.Softmax(dim=-1)` in
    `nn.Softmax(dim=-1)(x)`); None for a module held in a name or attribute,
    or an argument not written."""
    if not isinstance(base, CallExpr):
        return None
    for i, (kind, arg_name, arg) in enumerate(zip(base.arg_kinds, base.arg_names, base.args)):
        if (kind == ARG_NAMED and arg_name == name) or (kind == ARG_POS and i == position):
            return arg
    return None


def op_call(
    api: Any, context: Context, formals: List[Tuple[str, Expression, Type]], default_return: Type
) -> FunctionContext:
    """A FunctionContext of a call of an op with one argument per formal
    (name, expression, type), reported at `context`."""
    return FunctionContext(
        arg_types=[[t] for _, _, t in formals],
        arg_kinds=[[ARG_POS] for _ in formals],
        callee_arg_names=[n for n, _, _ in formals],
        arg_names=[[None] for _ in formals],
        default_return_type=default_return,
        args=[[e] for _, e, _ in formals],
        context=context,
        api=api,
    )


def named_result(typ: Type) -> Optional[Tuple[str, List[Type]]]:
    """(class name, items) of a torch.return_types named tuple."""
    p = get_proper_type(typ)
    if not isinstance(p, TupleType):
        return None
    module, _, name = p.partial_fallback.type.fullname.rpartition(".")
    return (name, list(p.items)) if module == "torch.return_types" else None


def module_class(typ: Optional[Type]) -> Optional[Instance]:
    """typ, when it is an instance of a proper subclass of nn.Module."""
    p = _instance(typ)
    if p is None or p.type.fullname == MODULE or not p.type.has_base(MODULE):
        return None
    return p


def element_class(api: Any, expr: Expression) -> Optional[Instance]:
    """The one module class of the elements of a list display or
    comprehension `expr`, or of the values of a dict display or
    comprehension (their own types: the list's is joined in the context of
    the parameter, Iterable[Module])."""
    if isinstance(expr, ListComprehension):
        expr = expr.generator
    if isinstance(expr, GeneratorExpr):
        items = [expr.left_expr]
    elif isinstance(expr, DictionaryComprehension):
        items = [expr.value]
    elif isinstance(expr, (ListExpr, TupleExpr)) and expr.items:
        items = list(expr.items)
    elif isinstance(expr, DictExpr) and expr.items:
        items = [value for _, value in expr.items]
    else:
        return None
    classes = [module_class(typed_before(api, item)) for item in items]
    first = classes[0]
    if first is None or any(c is None or c.type is not first.type for c in classes):
        return None
    return first


SEQUENTIAL = "torch.nn.modules.container.Sequential"
_SEQUENTIAL_OF = "SequentialOf"


def sequential_of(ctx: Any) -> Optional[Type]:
    """For the constructor call `nn.Sequential(m1, ...)`:
    spmd_phantom.SequentialOf[Tuple[M1, ...]] when every argument is a
    positional module instance; else None (`*layers`, an OrderedDict)."""
    if any(kind != ARG_POS for kinds in ctx.arg_kinds for kind in kinds):
        return None
    found = [module_class(t) for types in ctx.arg_types for t in types]
    modules: List[Type] = [m for m in found if m is not None]
    if not modules or len(modules) != len(found):
        return None
    fallback = ctx.api.named_generic_type("builtins.tuple", [AnyType(TypeOfAny.special_form)])
    return phantom_generic(ctx.api, _SEQUENTIAL_OF, TupleType(modules, fallback))


def chained_modules(typ: Type) -> Optional[List[Instance]]:
    """The modules of a SequentialOf[Tuple[M1, ...]], in call order; None
    for any other type."""
    p = _instance(typ)
    if p is None or p.type.fullname != f"{PHANTOM_MODULE}.{_SEQUENTIAL_OF}" or not p.args:
        return None
    items = get_proper_type(p.args[0])
    if not isinstance(items, TupleType):
        return None
    modules = [module_class(t) for t in items.items]
    return None if any(m is None for m in modules) else modules  # type: ignore[return-value]


def message_expr(text: str, context: Context) -> NameExpr:
    """An expression written `text` at `context`'s place, for messages only
    (a value no expression of the code holds: a module's output inside an
    nn.Sequential)."""
    expr = NameExpr(text)
    expr.set_line(context)
    return expr
