"""Types of process groups that stand for mesh axes.

`Annotated[ProcessGroup, spmd.Axis("tp")]` becomes
`spmd_phantom.AxisGroup[Literal["tp"]]` (stubs/torch-spmd), a subclass of
ProcessGroup, so the axis travels with the value through attributes,
returns and containers as a tensor's carrier does.  This module builds those
types and reads them back; plugin/groups.py decides what they mean."""

from __future__ import annotations

from typing import Any, List, Optional

from mypy.nodes import AssignmentStmt, CallExpr, Expression, IndexExpr, MemberExpr, NameExpr, StrExpr, TypeInfo, Var
from mypy.plugin import AnalyzeTypeContext
from mypy.types import Instance, LiteralType, NoneType, TupleType, Type, UnionType, get_proper_type

from .tree import PHANTOM_MODULE

GROUP_CARRIER = f"{PHANTOM_MODULE}.AxisGroup"
PROCESS_GROUP = "torch._C._distributed_c10d.ProcessGroup"
DEVICE_MESH = "torch.distributed.device_mesh.DeviceMesh"


def group_in_analyzer(ctx: AnalyzeTypeContext, text: str) -> Type:
    literal = LiteralType(text, fallback=ctx.api.named_type("builtins.str", []))
    return ctx.api.named_type(GROUP_CARRIER, [literal])


def plain_group_in_analyzer(ctx: AnalyzeTypeContext) -> Type:
    """ProcessGroup itself (never through analyze_type, which would ask the hook again)."""
    return ctx.api.named_type(PROCESS_GROUP, [])


def group_in_checker(api: Any, text: str) -> Type:
    literal = LiteralType(text, fallback=api.named_generic_type("builtins.str", []))
    return api.named_generic_type(GROUP_CARRIER, [literal])


def _alternatives(typ: Optional[Type]) -> List[Type]:
    """The alternatives of a type other than None (Optional[X] -> [X])."""
    if typ is None:
        return []
    p = get_proper_type(typ)
    items = p.items if isinstance(p, UnionType) else [p]
    return [t for t in items if not isinstance(get_proper_type(t), NoneType)]


def _is_group_instance(p: Type) -> bool:
    p = get_proper_type(p)
    return isinstance(p, Instance) and isinstance(p.type, TypeInfo) and p.type.has_base(PROCESS_GROUP)


def is_process_group(typ: Optional[Type]) -> bool:
    """A ProcessGroup (declared as an axis or not), possibly Optional."""
    alts = _alternatives(typ)
    return bool(alts) and all(_is_group_instance(t) for t in alts)


def group_text(typ: Optional[Type]) -> Optional[str]:
    """The axes text an AxisGroup type holds ("tp", "dp,tp"), the same for every
    alternative but None; else None (a plain ProcessGroup, Any, other types)."""
    found: Optional[str] = None
    alts = _alternatives(typ)
    for t in alts:
        p = get_proper_type(t)
        if not (isinstance(p, Instance) and p.type.fullname == GROUP_CARRIER and p.args):
            return None
        arg = get_proper_type(p.args[0])
        if not (isinstance(arg, LiteralType) and isinstance(arg.value, str)):
            return None
        if found is not None and found != arg.value:
            return None
        found = arg.value
    return found


def relax_group(typ: Type) -> Type:
    """typ with ProcessGroup in place of each AxisGroup (Optional kept): what a
    write to an attribute declared as the group of an axis accepts."""
    p = get_proper_type(typ)
    if isinstance(p, UnionType):
        return UnionType.make_union([relax_group(t) for t in p.items], p.line, p.column)
    if isinstance(p, Instance) and p.type.fullname == GROUP_CARRIER:
        for base in p.type.mro:
            if base.fullname == PROCESS_GROUP:
                return Instance(base, [])
    return typ


def literal_str(typ: Optional[Type]) -> Optional[str]:
    """The value of a `Literal["tp"]` type (a parameter or Final of that
    type), or of an enum member's literal type (`Axis.TP`, whose LiteralType
    holds the member's name, "TP": its value is the axis)."""
    if typ is None:
        return None
    p = get_proper_type(typ)
    if isinstance(p, Instance) and p.last_known_value is not None:
        p = p.last_known_value
    if not isinstance(p, LiteralType) or not isinstance(p.value, str):
        return None
    if p.fallback.type.is_enum:
        return enum_member_value(p.fallback.type, p.value)
    return p.value


def enum_member_value(info: TypeInfo, name: str) -> Optional[str]:
    """The string value of the member `name` of the enum class `info`: one
    assigned a string literal (its variable's type keeps the literal, in
    mypy's cache too, where the class body is gone), or `auto()` in a
    StrEnum (the lower-cased name); else None."""
    if not info.is_enum:
        return None
    sym = info.names.get(name)
    node = sym.node if sym is not None else None
    if not isinstance(node, Var):
        return None  # a method, a nested class: no member
    t = get_proper_type(node.type) if node.type is not None else None
    if isinstance(t, Instance) and t.last_known_value is not None:
        t = t.last_known_value
    if isinstance(t, LiteralType):
        return t.value if isinstance(t.value, str) and t.fallback.type.fullname == "builtins.str" else None
    if _assigned_auto(info, node, t) and any(b.fullname == "enum.StrEnum" for b in info.mro[1:]):
        return name.lower()
    return None


def _assigned_auto(info: TypeInfo, node: Var, t: Optional[Type]) -> bool:
    """Whether the member's value is `auto()`: its type says so once checked
    (and in the cache); before, the class body does."""
    if isinstance(t, Instance):
        return t.type.fullname == "enum.auto"
    for stmt in info.defn.defs.body:
        if isinstance(stmt, AssignmentStmt) and len(stmt.lvalues) == 1:
            target = stmt.lvalues[0]
            if isinstance(target, NameExpr) and target.name == node.name:
                value = stmt.rvalue
                return (
                    isinstance(value, CallExpr)
                    and isinstance(value.callee, (NameExpr, MemberExpr))
                    and value.callee.name == "auto"
                )
    return False


def mesh_group_axis(api: Any, expr: Expression) -> Optional[str]:
    """The mesh dim a DeviceMesh's group is asked by name for:
    `mesh.get_group("tp")`, `mesh.get_group(mesh_dim="tp")`, `mesh["tp"].get_group()`
    (the runtime reads such a group as that dim: runtime/mesh.py); else None."""
    if not isinstance(expr, CallExpr) or not isinstance(expr.callee, MemberExpr) or expr.callee.name != "get_group":
        return None
    receiver = expr.callee.expr
    found = api.lookup_type_or_none(receiver)
    mesh = get_proper_type(found if found is not None else api.get_expression_type(receiver))
    if not isinstance(mesh, Instance) or mesh.type.fullname != DEVICE_MESH:
        return None
    if not expr.args:  # a mesh of the one dim it was indexed by
        index = receiver.index if isinstance(receiver, IndexExpr) else None
        return index.value if isinstance(index, StrExpr) else None
    arg, name = expr.args[0], expr.arg_names[0]
    if len(expr.args) == 1 and name in (None, "mesh_dim") and isinstance(arg, StrExpr):
        return arg.value
    return None


# -- rank numbers (RankOf[Literal["<canonical>"]]) ----------------------------------

RANK_CARRIER = f"{PHANTOM_MODULE}.RankOf"
_SLICE = "builtins.slice"


def rank_in_checker(api: Any, text: str) -> Type:
    """The int type of a rank number whose operand type is `text` (a canonical string)."""
    literal = LiteralType(text, fallback=api.named_generic_type("builtins.str", []))
    return api.named_generic_type(RANK_CARRIER, [literal])


def rank_texts(typ: Optional[Type], depth: int = 0) -> List[str]:
    """The canonical strings of the rank numbers a call argument's type holds:
    a RankOf itself, or one inside a slice (`x[r * n:(r + 1) * n]`) or a tuple
    of indices (`x[:, r]`)."""
    if typ is None or depth > 3:
        return []
    p = get_proper_type(typ)
    if isinstance(p, Instance):
        name = p.type.fullname
        if name == RANK_CARRIER:
            text = literal_str(p.args[0]) if p.args else None
            return [text] if text is not None else []
        if name == _SLICE:
            return [t for a in p.args for t in rank_texts(a, depth + 1)]
        return []
    if isinstance(p, TupleType):
        return [t for a in p.items for t in rank_texts(a, depth + 1)]
    return []


def argument_rank_texts(arg_types: List[List[Type]]) -> List[str]:
    """rank_texts of a call's arguments, a RankOf or a tuple holding one
    (`f(rank, n)`, `f((rank, n))`); most calls hold none, and most argument
    types are an Instance of another class: the first test."""
    found: List[str] = []
    for types in arg_types:
        for typ in types:
            if typ.__class__ is Instance and typ.type.fullname != RANK_CARRIER:  # type: ignore[attr-defined]
                continue
            found += rank_texts(typ)
    return found


def with_rank_ints(typ: Type, rank: Type, depth: int = 0) -> Type:
    """`typ` with each plain int in it (itself, a tuple's item, a Union's
    alternative) made `rank`; a RankOf and anything else kept."""
    if is_plain_int(typ):
        return rank
    p = get_proper_type(typ)
    if depth >= 3:
        return typ
    if isinstance(p, TupleType):
        return p.copy_modified(items=[with_rank_ints(t, rank, depth + 1) for t in p.items])
    if isinstance(p, UnionType):
        return UnionType([with_rank_ints(t, rank, depth + 1) for t in p.items], p.line, p.column)
    return typ


def is_plain_int(typ: Optional[Type]) -> bool:
    """`int` itself (not a RankOf, a bool or a Literal)."""
    p = get_proper_type(typ) if typ is not None else None
    return isinstance(p, Instance) and p.type.fullname == "builtins.int" and p.last_known_value is None


def rank_in_analyzer(ctx: AnalyzeTypeContext, text: str) -> Type:
    """rank_in_checker in an annotation (`Annotated[int, Spmd(tp=V)]`)."""
    literal = LiteralType(text, fallback=ctx.api.named_type("builtins.str", []))
    return ctx.api.named_type(RANK_CARRIER, [literal])


def declared_rank_text(typ: Optional[Type]) -> Optional[str]:
    """The canonical string of a parameter declared a rank number (RankOf,
    or Optional of one); "" for a plain int (one value on every rank); None
    for any other type."""
    p = get_proper_type(typ) if typ is not None else None
    if isinstance(p, UnionType):
        found = [declared_rank_text(t) for t in p.items if not isinstance(get_proper_type(t), NoneType)]
        return found[0] if len(found) == 1 else None
    if is_plain_int(p):
        return ""
    texts = rank_texts(p) if isinstance(p, Instance) and p.type.fullname == RANK_CARRIER else []
    return texts[0] if texts else None


def relax_rank(api: Any, typ: Type) -> Type:
    """A parameter declared a rank number (or Optional of one) as the int it
    is to mypy, so any int is passed (its axes are checked by the hook)."""
    p = get_proper_type(typ)
    if isinstance(p, UnionType):
        return UnionType([relax_rank(api, t) for t in p.items], p.line, p.column)
    if isinstance(p, Instance) and p.type.fullname == RANK_CARRIER:
        return api.named_generic_type("builtins.int", [])
    return typ
