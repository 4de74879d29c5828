"""Types that hold tensors: walking, replacing, relaxing and matching them,
and the signatures and tuples hooks rebuild."""

from __future__ import annotations

from typing import Any, Callable, Iterable, List, Optional, Tuple

from mypy.nodes import CallExpr, DictExpr, Expression, ListExpr, MemberExpr, NameExpr, RefExpr, StrExpr, TupleExpr, TypeInfo, Var
from mypy.copytype import copy_type
from mypy.subtypes import is_subtype
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    NoneType,
    ProperType,
    TupleType,
    Type,
    TypedDictType,
    UninhabitedType,
    UnionType,
    flatten_nested_unions,
    get_proper_type,
)

from .carriers import carried, is_carrier, is_tensor, plain_tensor_like
from .expressions import typed_in_context
from .tree import unwrapped
from .writes import quietly_typed


def union_alternatives(typ: Optional[Type]) -> Optional[List[Type]]:
    """The items of a Union whose items are all tensors, else None."""
    if typ is None:
        return None
    p = get_proper_type(typ)
    if isinstance(p, UnionType) and p.items and all(is_tensor(t) for t in p.items):
        return list(p.items)
    return None


def union_items(typ: Type) -> List[Type]:
    """The items of a Union (proper types), or the type itself."""
    p = get_proper_type(typ)
    if isinstance(p, UnionType):
        return [get_proper_type(t) for t in flatten_nested_unions(p.items)]
    return [p]


def replace_tensors(typ: Type, new: Type) -> Type:
    """typ with every Tensor in it (top level, tuple items, list/tuple args) replaced."""
    p = get_proper_type(typ)
    if is_tensor(p):
        return new
    if isinstance(p, TupleType):
        return p.copy_modified(items=[replace_tensors(t, new) for t in p.items])
    if isinstance(p, UnionType):  # Optional[Tensor], e.g. .grad
        return UnionType([replace_tensors(t, new) for t in p.items], p.line, p.column)
    if isinstance(p, Instance) and p.args and p.type.fullname in (
        "builtins.tuple",
        "builtins.list",
    ):
        return p.copy_modified(args=[replace_tensors(t, new) for t in p.args])
    return typ


def has_tensor(typ: Type) -> bool:
    p = get_proper_type(typ)
    if is_tensor(p):
        return True
    if isinstance(p, (TupleType, UnionType)):
        return any(has_tensor(t) for t in p.items)
    if isinstance(p, Instance) and p.type.fullname in ("builtins.tuple", "builtins.list"):
        return any(has_tensor(t) for t in p.args)
    return False


# How deep the walks below look into a type: a recursive alias (packaging's
# `MarkerList = List[Union[..., "MarkerList"]]`, one in torch's pipelining
# that a list's append meets) never ends.
_DEPTH = 8


def _holds_deep(typ: Type, leaf: Callable[[ProperType], bool], depth: int) -> bool:
    """Whether `leaf` holds of typ or of a type inside it (Union and tuple
    items, type arguments), down to `depth`."""
    p = get_proper_type(typ)
    if leaf(p):
        return True
    if depth <= 0:
        return False
    if isinstance(p, (UnionType, TupleType)):
        return any(_holds_deep(t, leaf, depth - 1) for t in p.items)
    return isinstance(p, Instance) and any(_holds_deep(t, leaf, depth - 1) for t in p.args)


def has_tensor_deep(typ: Type, depth: int = _DEPTH) -> bool:
    return _holds_deep(typ, is_tensor, depth)


def has_carrier_deep(typ: Type) -> bool:
    """Whether typ declares an SPMD type somewhere inside."""
    return _holds_deep(typ, is_carrier, _DEPTH)


def element_types(typ: Type, depth: int = 6) -> List[Type]:
    """The tensor types a parameter or value holds: itself, Optional's item,
    list/tuple/Sequence elements, dict values (bounded: a recursive alias such
    as packaging's `MarkerList = List[Union[..., "MarkerList"]]` never ends)."""
    p = get_proper_type(typ)
    if is_tensor(p):
        return [p]
    if depth <= 0:
        return []
    if isinstance(p, (UnionType, TupleType)):
        return [e for t in p.items for e in element_types(t, depth - 1)]
    if isinstance(p, Instance) and p.args:
        return [e for t in p.args[-1:] for e in element_types(t, depth - 1)]
    return []


_COVARIANT = {"builtins.list": "typing.Sequence", "builtins.dict": "typing.Mapping"}


def relax_tensors(api: Any, typ: Type, depth: int = _DEPTH, covariant: bool = True) -> Type:
    """typ with every carrier made a plain Tensor and every list/dict of tensors made
    a Sequence/Mapping (lists are invariant: list[SpmdTensor[...]] is no list[Tensor]);
    with covariant=False, lists and dicts stay as they are (erase_carriers)."""
    p = get_proper_type(typ)
    if is_carrier(p):
        return plain_tensor_like(p)
    if depth <= 0:
        return typ
    if isinstance(p, UnionType):
        return UnionType([relax_tensors(api, t, depth - 1, covariant) for t in p.items], p.line, p.column)
    if isinstance(p, TupleType):
        return p.copy_modified(items=[relax_tensors(api, t, depth - 1, covariant) for t in p.items])
    if isinstance(p, Instance) and p.args and has_tensor_deep(p, depth):
        args = [relax_tensors(api, t, depth - 1, covariant) for t in p.args]
        target = _COVARIANT.get(p.type.fullname) if covariant else None
        if target is not None:
            return api.named_generic_type(target, args)
        return p.copy_modified(args=args)
    return typ


def erase_carriers(api: Any, typ: Type) -> Type:
    """typ as mypy sees it without the plugin: every carrier a plain Tensor."""
    return relax_tensors(api, typ, covariant=False)


def fits_as_plain(api: Any, actual: Type, formal: Type) -> bool:
    """Plain mypy's verdict on passing `actual` for `formal`: both with their
    carriers erased (a relaxed parameter, Sequence for a declared list, must
    not take a tuple or a list of tuples where the list is declared)."""
    return is_subtype(erase_carriers(api, actual), erase_carriers(api, formal))


def carrier_name_type(api: Any, expr: object) -> Optional[Type]:
    """The type of `expr` before the call it is an argument of is typed,
    when `expr` is a name holding carriers (holds_carriers_already): the one
    the enclosing branches narrowed it to (`if xs is not None:`), else its
    variable's; None for any other argument."""
    if not holds_carriers_already(expr):
        return None
    if isinstance(expr, CallExpr):
        expr = unwrapped(expr)
    assert isinstance(expr, RefExpr) and isinstance(expr.node, Var)
    binder = getattr(api, "binder", None)
    narrowed = binder.get(expr) if binder is not None else None
    return narrowed if narrowed is not None else expr.node.type


def fits_plain_name(api: Any, expr: object, formal: Type) -> bool:
    """A name holding carriers (carrier_name_type) that fits `formal` once
    they are erased: a plain-tensor list parameter may be relaxed for it."""
    typ = carrier_name_type(api, expr)
    return typ is not None and fits_as_plain(api, typ, formal)


def needs_relaxing(api: Any, expr: Expression, formal: Type) -> bool:
    """Whether a library parameter holding a list of tensors must be relaxed
    for this argument: never for a display or comprehension (typed in the
    parameter's context) or a tuple display (tuples are covariant: relaxing
    a list would only let a tuple through where plain mypy rejects it); for
    a name of a known type, or an attribute of one (`state.ids`, typed
    ahead quietly), only when it holds carriers and fits once they are
    erased (otherwise plain mypy's verdict and message stand); for any
    other expression, whose type is not known before the call is typed,
    always."""
    if typed_in_context(expr) or isinstance(expr, TupleExpr):
        return False
    node = expr.node if isinstance(expr, RefExpr) else None
    if isinstance(node, Var) and node.type is not None:
        return fits_plain_name(api, expr, formal)
    if not _attribute_chain(expr):
        return True
    typ = quietly_typed(api, expr)
    return has_carrier_deep(typ) and fits_as_plain(api, typ, formal)


def _attribute_chain(expr: Expression) -> bool:
    """`a.b.c`: attributes of a name, typed ahead without side effects."""
    while isinstance(expr, MemberExpr):
        expr = expr.expr
    return isinstance(expr, NameExpr)


def plain_write_type(api: Any, typ: Type) -> Optional[Type]:
    """What a write accepts of an attribute declared with a list or dict of
    plain tensors and no SPMD type anywhere (`self.bufs: List[Tensor]`): the
    declared type with those made Sequence / Mapping, so a list of carriers
    fits; None when nothing changes.  Reads keep the declared type."""
    return relax_tensors(api, typ) if plain_tensor_container(typ) else None


def container_kind(typ: Type) -> Optional[str]:
    """"list" for a list or Sequence, "other" for another container (a tuple,
    a dict), None for a tensor or an Optional / Union of tensors."""
    p = get_proper_type(typ)
    if isinstance(p, TupleType):
        return "other"
    if isinstance(p, Instance) and not is_tensor(p):
        return "list" if p.type.fullname in ("builtins.list", "typing.Sequence") else "other"
    return None


def holds_carriers_already(expr: object) -> bool:
    """Whether `expr` is a name (or attribute) whose type mypy has already
    inferred and that holds a carrier (`views = [a.view(1) for ...]`: a list
    of carriers).  A list display or comprehension written at the call is
    typed in the parameter's context and needs nothing; a name of another
    list (`list[Parameter]`) keeps plain mypy's verdict.  A keyword given
    a name the rewrite wrapped (`keyword_item(xs, Batch, "tokens")`) is the name."""
    if isinstance(expr, CallExpr):
        expr = unwrapped(expr)
    node = expr.node if isinstance(expr, RefExpr) else None
    typ = node.type if isinstance(node, Var) else None
    return typ is not None and has_carrier_deep(typ)


def plain_tensor_container(typ: Type) -> bool:
    """A type with a list or dict of tensors in it and no SPMD type anywhere."""
    return relaxes_plain(typ) and not has_carrier_deep(typ)


def builds_typeddict(typ: Type) -> bool:
    """Whether `typ` is a TypedDict's class object (the callee of its constructor)."""
    p = get_proper_type(typ)
    return isinstance(p, CallableType) and isinstance(get_proper_type(p.ret_type), TypedDictType)


def typeddict_of_tensors(typ: Type) -> bool:
    """A TypedDict with an item that holds a tensor (a display of it is
    checked item by item: display_parts)."""
    p = get_proper_type(typ)
    return isinstance(p, TypedDictType) and any(has_tensor_deep(t) for t in p.items.values())


def typeddict_with_plain_lists(typ: Type) -> bool:
    """A TypedDict with an item that is a list or dict of plain tensors."""
    p = get_proper_type(typ)
    return isinstance(p, TypedDictType) and any(plain_tensor_container(t) for t in p.items.values())


def relaxed_typeddict_display(api: Any, expr: Expression, formal: Type) -> Optional[Type]:
    """`take({"tokens": views})`, the parameter a TypedDict declaring
    `tokens: List[Tensor]` and views a name holding carriers: mypy checks
    each value of the display against its item, and a list of carriers is
    no list[Tensor].  The TypedDict with each such item made a Sequence /
    Mapping, only where the name fits it once carriers are erased (a tuple
    keeps plain mypy's error); None when no item needs it, or when the keys
    are not the TypedDict's (the relaxed TypedDict is anonymous, so mypy's
    key errors would no longer name the class)."""
    p = get_proper_type(formal)
    if not isinstance(p, TypedDictType) or not isinstance(expr, DictExpr):
        return None
    keys = {k.value for k, _ in expr.items if isinstance(k, StrExpr)}
    if len(keys) != len(expr.items) or not p.required_keys <= keys <= p.items.keys():
        return None  # mypy's own key error, which names the TypedDict, stands
    relaxed = set()
    for key, value in expr.items:
        if not isinstance(key, StrExpr):
            continue
        item = p.items[key.value]
        if plain_tensor_container(item) and fits_plain_name(api, value, item):
            relaxed.add(key.value)
    if not relaxed:
        return None
    # an anonymous TypedDict: mypy rebuilds a named one from its class, items as declared
    fallback = api.named_generic_type("typing._TypedDict", [])
    items = [relax_tensors(api, t) if k in relaxed else t for k, t in p.items.items()]
    return p.copy_modified(item_types=items, fallback=fallback)


def relaxes_plain(typ: Type, depth: int = _DEPTH) -> bool:
    """Whether relax_tensors changes a type that holds no carrier (a library
    signature's): only a list or dict of tensors, somewhere inside, does."""
    if depth <= 0:
        return False
    p = get_proper_type(typ)
    if isinstance(p, (UnionType, TupleType)):
        return any(relaxes_plain(t, depth - 1) for t in p.items)
    if isinstance(p, Instance) and p.args and has_tensor_deep(p, depth):
        return p.type.fullname in _COVARIANT or any(relaxes_plain(t, depth - 1) for t in p.args)
    return False


def tensor_pairs(got: Type, want: Type) -> Optional[List[Tuple[Type, Type]]]:
    """Match a value's type against a declared type that holds tensors.

    Returns the (got, declared) pairs of tensors at the same place (top level,
    tuple items, type arguments of the same class, the tensor alternative of a
    declared Optional, every alternative of a value from two branches), or None
    when the two do not line up or a non-tensor part does not fit; mypy then
    checks the value itself.  Against a declared Union of several tensors the
    declared part of a pair is that Union (the value fits any alternative).
    """
    g, w = get_proper_type(got), get_proper_type(want)
    if isinstance(g, (AnyType, UninhabitedType)):
        return []
    if isinstance(g, UnionType) and (is_tensor(w) or isinstance(w, UnionType)):
        return _all_pairs((item, w) for item in g.items)  # each branch must fit
    if is_tensor(w):
        return [(g, w)] if is_tensor(g) else None
    if isinstance(w, UnionType):
        tensors = [t for t in union_items(w) if is_tensor(t)]
        if len(tensors) > 1 and is_tensor(g):  # a layout that depends on a flag: any alternative
            return [(g, UnionType(tensors))]
        for item in w.items:
            sub = tensor_pairs(g, item)
            if sub is not None:
                return sub
        return None
    if isinstance(w, TupleType):
        if not isinstance(g, TupleType) or len(g.items) != len(w.items):
            return None
        return _all_pairs(zip(g.items, w.items))
    if isinstance(w, Instance) and w.args and has_tensor_deep(w):
        if isinstance(g, TupleType) and w.type.fullname == "builtins.tuple":
            return _all_pairs((item, w.args[0]) for item in g.items)
        if not isinstance(g, Instance) or g.type is not w.type or len(g.args) != len(w.args):
            return None
        return _all_pairs(zip(g.args, w.args))
    return [] if is_subtype(g, w) else None


def _all_pairs(parts: Iterable[Tuple[Type, Type]]) -> Optional[List[Tuple[Type, Type]]]:
    """tensor_pairs of every (got, declared) part, joined; None if one does not line up."""
    out: List[Tuple[Type, Type]] = []
    for g, w in parts:
        sub = tensor_pairs(g, w)
        if sub is None:
            return None
        out += sub
    return out


def union_of(types: List[Type]) -> Type:
    """One type, or the Union of several (alternatives of a value from branches)."""
    return types[0] if len(types) == 1 else UnionType(types)


def display_parts(expr: Expression, declared: Type) -> Optional[List[Tuple[Expression, Type]]]:
    """For a display returned or assigned where tensors are declared, each
    item with the type declared for it, so each is checked and hinted on
    its own: `[a, b]` against a list (their join would lose types), `(a, b)`
    against a tuple of as many items, `{"k": a}` against a TypedDict or a
    dict (the fix wraps the item, not the container); None otherwise."""
    p = get_proper_type(declared)
    if isinstance(p, UnionType):
        found = [display_parts(expr, t) for t in p.items]
        found = [f for f in found if f is not None]
        return found[0] if len(found) == 1 else None
    if isinstance(expr, ListExpr) and isinstance(p, Instance) and len(p.args) == 1 and has_tensor_deep(p.args[0]):
        return [(item, p.args[0]) for item in expr.items]
    if isinstance(expr, TupleExpr) and isinstance(p, TupleType) and len(p.items) == len(expr.items):
        return list(zip(expr.items, p.items)) if has_tensor_deep(p) else None
    keys = [k.value for k, _ in expr.items if isinstance(k, StrExpr)] if isinstance(expr, DictExpr) else None
    if isinstance(expr, DictExpr) and keys is not None and len(keys) == len(expr.items):
        wanted: List[Optional[Type]]
        if isinstance(p, TypedDictType):
            if not p.required_keys <= set(keys):
                return None  # a missing key: mypy's own error
            wanted = [p.items.get(k) for k in keys]
        elif isinstance(p, Instance) and len(p.args) == 2 and has_tensor_deep(p.args[1]):
            wanted = [p.args[1]] * len(expr.items)
        else:
            return None
        if any(w is None for w in wanted) or not any(has_tensor_deep(w) for w in wanted if w is not None):
            return None  # an unknown key: mypy's own error
        return [(v, w) for (_, v), w in zip(expr.items, wanted) if w is not None]
    return None


def callable_of(typ: Optional[Type]) -> Optional[CallableType]:
    """The callable a type is (a function's type), else None."""
    p = get_proper_type(typ) if typ is not None else None
    return p if isinstance(p, CallableType) else None


def with_signature(sig: CallableType, arg_types: List[Type], ret_type: Type) -> CallableType:
    return sig.copy_modified(arg_types=arg_types, ret_type=ret_type)


def with_arg_types(sig: CallableType, arg_types: List[Type], own_result: bool = False) -> CallableType:
    """sig with these parameter types; with own_result, its result type is a
    copy of its own, so that the function hook can tell which item of an
    overload mypy is trying (it passes the result type object on)."""
    if not own_result:
        return sig.copy_modified(arg_types=arg_types)
    ret = sig.ret_type
    return sig.copy_modified(arg_types=arg_types, ret_type=copy_type(ret) if isinstance(ret, ProperType) else ret)


def tuple_items(typ: Type) -> Optional[List[Type]]:
    """The items of a tuple type, else None."""
    p = get_proper_type(typ)
    return list(p.items) if isinstance(p, TupleType) else None


def with_tuple_items(typ: Type, items: List[Type]) -> Type:
    p = get_proper_type(typ)
    return p.copy_modified(items=items) if isinstance(p, TupleType) else typ


def attribute_write_type(ctx: Any, name: str) -> Optional[Type]:
    """What a write to attribute `name` accepts (an attribute hook's context),
    when it is declared in a class body, the class is no record (dataclass,
    attrs, NamedTuple, TypedDict, Protocol) and the declared type is a
    carrier or an Optional carrier: the same with a plain Tensor in the
    carrier's place, so `self.w = nn.Parameter(...)` checks.  In an
    nn.Module subclass, an attribute declared on self in a method
    (`self.w: Annotated[...] = nn.Parameter(...)`) is such a parameter too.
    None otherwise (the declared type stands).  Reads keep the carrier."""
    declared = get_proper_type(ctx.default_attr_type)
    optional = isinstance(declared, UnionType) and len(declared.items) == 2
    if optional:
        items = [get_proper_type(t) for t in declared.items]
        if not any(isinstance(t, NoneType) for t in items):
            return None
        declared = next(t for t in items if not isinstance(t, NoneType))
    if carried(declared) is None:
        return None
    owner = get_proper_type(ctx.type)
    sym = owner.type.get(name) if isinstance(owner, Instance) else None
    var = getattr(sym, "node", None)
    if sym is None or not isinstance(var, Var) or var.info is None or _record(var.info):
        return None
    if sym.implicit and not var.info.has_base(_MODULE):
        return None  # declared on self outside an nn.Module: a field, it keeps its type
    return relax_tensors(ctx.api, ctx.default_attr_type)


_MODULE = "torch.nn.modules.module.Module"


def _record(info: TypeInfo) -> bool:
    """A class whose annotated attributes are fields of a value, not state."""
    return bool(
        info.is_named_tuple
        or info.typeddict_type is not None
        or info.is_protocol
        or "dataclass" in info.metadata
        or "attrs" in info.metadata
    )


def type_arguments(typ: Type) -> List[Type]:
    """The type arguments of an instance type (`Layer[Literal[True]]` -> [Literal[True]])."""
    proper = get_proper_type(typ)
    return list(proper.args) if isinstance(proper, Instance) else []


def literal_bool(typ: Type) -> Optional[bool]:
    """True/False for `Literal[True]`/`Literal[False]`, else None."""
    proper = get_proper_type(typ)
    if isinstance(proper, LiteralType) and isinstance(proper.value, bool):
        return proper.value
    return None
