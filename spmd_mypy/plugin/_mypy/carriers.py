"""Reading and building carrier types.

A tensor whose SPMD type is T has the mypy type
`spmd_phantom.SpmdTensor[Literal["<canonical T>"]]` (stubs/torch-spmd).  This
module reads the canonical string back (`carried`), builds carriers in the
analyzer and the checker, and the plain Tensor and phantom generics hooks
hand back."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from mypy.nodes import TypeInfo
from mypy.plugin import AnalyzeTypeContext
from mypy.subtypes import SubtypeContext, SubtypeVisitor
from mypy.state import state
from mypy.typestate import type_state
from mypy.types import (
    AnyType,
    Instance,
    LiteralType,
    ProperType,
    Type,
    TypeAliasType,
    TypeOfAny,
    get_proper_type,
)

from .tree import PHANTOM_MODULE


CARRIER = f"{PHANTOM_MODULE}.SpmdTensor"
TENSOR = "torch._tensor.Tensor"
# `Annotated[nn.Parameter, Spmd(...)]` reads as the same carrier as a Tensor's.
PARAMETER = "torch.nn.parameter.Parameter"


def _target(typ: Type) -> ProperType:
    """get_proper_type for reading only: an alias without parameters is its
    target itself, where mypy would copy the target on every expansion (the
    aliases users write for annotated tensors are read thousands of times)."""
    while isinstance(typ, TypeAliasType) and not typ.args and typ.alias is not None and not typ.alias.alias_tvars:
        typ = typ.alias.target
    return get_proper_type(typ)


def carried(typ: Optional[Type]) -> Optional[str]:
    """The canonical SPMD string a carrier type holds, else None."""
    if typ.__class__ is Instance:  # hooks ask for every operand of every op: most types
        if typ.type.fullname != CARRIER or not typ.args:  # type: ignore[union-attr]
            return None
        arg = typ.args[0]  # type: ignore[union-attr]
        if arg.__class__ is LiteralType:
            value = arg.value  # type: ignore[attr-defined]
            return value if value.__class__ is str else None
    if typ is None:
        return None
    p = _target(typ)
    if isinstance(p, Instance) and p.type.fullname == CARRIER and p.args:
        arg = p.args[0]
        if arg.__class__ is not LiteralType:
            arg = get_proper_type(arg)
        if isinstance(arg, LiteralType) and isinstance(arg.value, str):
            return arg.value
    return None


_TENSOR_CLASSES = frozenset({TENSOR, CARRIER})
def is_tensor(typ: Optional[Type]) -> bool:
    """A torch Tensor (carrier or plain)."""
    if typ is None:
        return False
    p = typ if typ.__class__ is Instance else _target(typ)
    if not isinstance(p, Instance):
        return False
    info = p.type
    return info.fullname in _TENSOR_CLASSES or info.has_base(TENSOR)


def is_carrier(typ: Optional[Type]) -> bool:
    """A tensor of the carrier class: of a known SPMD type, or of an unknown
    one (SpmdTensor[Any])."""
    if typ is None:
        return False
    p = typ if typ.__class__ is Instance else _target(typ)
    return isinstance(p, Instance) and p.type.fullname == CARRIER


def is_any(typ: Optional[Type]) -> bool:
    return typ is not None and isinstance(get_proper_type(typ), AnyType)


def is_python_number(typ: Optional[Type]) -> bool:
    if typ is None:
        return False
    p = get_proper_type(typ)
    if isinstance(p, LiteralType):
        p = p.fallback
    return isinstance(p, Instance) and p.type.fullname in (
        "builtins.int",
        "builtins.float",
        "builtins.bool",
        "builtins.complex",
    )


class _Infos:
    """The classes hooks build types from (str, the carrier, Tensor), looked
    up once per owner -- one check pass or one analysed tree, see
    check_owner / analysis_owner -- instead of once per type built: the
    checker builds a carrier for every typed op and the analyzer a Tensor for
    every annotation."""

    __slots__ = ("owner", "str", "carrier", "tensor", "carriers", "not_awaitable")

    def __init__(self) -> None:
        self.owner: object = None
        self.str: Any = None
        self.carrier: Any = None
        self.tensor: Any = None
        # canonical string -> its carrier type (mypy's types are values: the
        # checker shares them between expressions too); built once per run
        # in the checker, while the classes they are built from stay the
        # same; in the analyzer, the carrier's type arguments, per tree
        self.carriers: Dict[str, Any] = {}
        # records "a carrier is no Awaitable" for mypy (checker only, see below)
        self.not_awaitable: Optional[Callable[[Instance], None]] = None


_CHECKER_INFOS = _Infos()
_ANALYZER_INFOS = _Infos()


def _checker_infos(api: Any) -> _Infos:
    infos, owner = _CHECKER_INFOS, check_owner(api)
    if owner is None or owner is not infos.owner:
        infos.owner = None  # stays unset if a lookup fails
        was = (infos.str, infos.carrier)
        infos.str = api.named_generic_type("builtins.str", []).type
        infos.carrier = api.named_generic_type(CARRIER, [AnyType(TypeOfAny.special_form)]).type
        if was != (infos.str, infos.carrier):
            infos.carriers = {}  # the classes changed (a daemon update): types anew
        infos.not_awaitable = _not_awaitable_recorder(api, infos.carrier)
        infos.owner = owner
    return infos


def _not_awaitable_recorder(api: Any, carrier: TypeInfo) -> Optional[Callable[[Instance], None]]:
    """A function that tells mypy's subtype cache a carrier is no Awaitable.

    For every argument it rejects -- `2.0 * x` tries float.__mul__(x) before
    x.__rmul__ -- mypy asks whether the argument would fit once awaited
    (check_possible_missing_await): a protocol check of the argument against
    typing.Awaitable, answered from its negative cache when that type was
    asked before.  A plain Tensor is asked once; each distinct carrier type
    anew, and on Tensor that check costs about a million instructions
    (TypeInfo.get_method scans every name of Tensor's classes for
    "-redefinition" variants of a missing name): 70 distinct carriers were
    1.3% of a run on the user's code.  The answer is known -- a carrier's
    classes define no __await__ -- so it is recorded with the key mypy's own
    check would record.  None when the carrier's classes do define one."""
    if any("__await__" in cls.names for cls in carrier.mro):
        return None
    awaitable = api.named_generic_type("typing.Awaitable", [AnyType(TypeOfAny.special_form)])
    with state.strict_optional_set(api.options.strict_optional):  # as the checker asks
        kind = SubtypeVisitor.build_subtype_kind(SubtypeContext(options=api.options), False)

    def record(made: Instance) -> None:
        type_state.record_negative_subtype_cache_entry(kind, made, awaitable)

    return record


def check_owner(api: Any) -> object:
    """An object that lives for one check pass over one file: the checker's
    scope, made anew per file and on every daemon recheck (TypeChecker.reset)."""
    return getattr(api, "scope", None)


def checked_tree(api: Any) -> object:
    """The tree of the file the checker checks: an owner of the file's facts
    (annotations.look), as the analyzer's is.  mypy parses a file anew when
    it reads it again, so while this object is the same, so are the bytes
    mypy checks (get_additional_deps was handed the same tree)."""
    return getattr(api, "tree", None)


def analysis_owner(ctx: AnalyzeTypeContext) -> object:
    """An object that lives for one parse of one file: the analyzer's tree."""
    return getattr(getattr(ctx.api, "api", None), "cur_mod_node", None)


_ANALYZER_CARRIER_INFOS = _Infos()


def carrier_in_analyzer(ctx: AnalyzeTypeContext, canonical: str, owner: object = None) -> Type:
    """The carrier of `canonical`; `owner` is analysis_owner(ctx) when the
    caller has it.  The classes are looked up once per owner; each carrier is
    a new Instance, as named_type builds it, whose argument -- the literal,
    a value no pass of mypy's changes -- is built once per owner and text
    (an annotation costs one type built, not three)."""
    infos = _ANALYZER_CARRIER_INFOS
    if owner is None:
        owner = analysis_owner(ctx)
    if owner is None or owner is not infos.owner:
        infos.owner = None  # stays unset if a lookup fails
        api = ctx.api
        infos.str = api.named_type("builtins.str", []).type
        infos.carrier = api.named_type(CARRIER, [AnyType(TypeOfAny.special_form)]).type
        infos.carriers = {}
        infos.owner = owner
    args = infos.carriers.get(canonical)
    if args is None:
        args = infos.carriers[canonical] = (LiteralType(canonical, Instance(infos.str, [])),)  # fallback: positional
    return Instance(infos.carrier, args)


def carrier_in_checker(api: Any, canonical: str) -> Type:
    infos = _checker_infos(api)
    made = infos.carriers.get(canonical)
    if made is None:
        literal = LiteralType(canonical, fallback=Instance(infos.str, []))
        made = infos.carriers[canonical] = Instance(infos.carrier, [literal])
        if infos.not_awaitable is not None:
            infos.not_awaitable(made)
    return made


def plain_tensor_in_analyzer(ctx: AnalyzeTypeContext, owner: object = None) -> Type:
    """A plain Tensor; `owner` is analysis_owner(ctx) when the caller has it."""
    infos = _ANALYZER_INFOS
    if owner is None:
        owner = analysis_owner(ctx)
    if owner is None or owner is not infos.owner:
        infos.owner = None
        infos.tensor = get_proper_type(ctx.api.named_type(TENSOR, [])).type  # type: ignore[attr-defined]
        infos.owner = owner
    return Instance(infos.tensor, [])


def plain_parameter_in_analyzer(ctx: AnalyzeTypeContext, owner: object = None) -> Type:
    """nn.Parameter itself (never through analyze_type, which would ask the hook again)."""
    return ctx.api.named_type(PARAMETER, [])


def unknown_carrier(api: Any) -> Type:
    """SpmdTensor[Any]: a tensor of unknown SPMD type that fits any annotation."""
    return Instance(_checker_infos(api).carrier, [AnyType(TypeOfAny.special_form)])


def plain_tensor_like(carrier: Type) -> Type:
    """The plain Tensor a carrier type derives from (found in its MRO)."""
    p = get_proper_type(carrier)
    if isinstance(p, Instance):
        for base in p.type.mro:
            if base.fullname == TENSOR:
                return Instance(base, [])
    return carrier


def _class(api: Any, fullname: str) -> Optional[TypeInfo]:
    module, _, name = fullname.rpartition(".")
    tree = api.modules.get(module)
    sym = tree.names.get(name) if tree is not None else None
    return sym.node if sym is not None and isinstance(sym.node, TypeInfo) else None


def plain_tensor(api: Any) -> Type:
    info = _class(api, TENSOR)
    return Instance(info, []) if info is not None else AnyType(TypeOfAny.special_form)


def with_tensor_default(ctx: Any, form: str) -> Any:
    """The call's context with a Tensor ("tensor") or a tuple of Tensors
    ("tuple") as mypy's default result: a method torch leaves unannotated
    (vocab.opnames.UNTYPED_TENSOR_METHODS) has Any there."""
    tensor = plain_tensor(ctx.api)
    typ = ctx.api.named_generic_type("builtins.tuple", [tensor]) if form == "tuple" else tensor
    return ctx._replace(default_return_type=typ)


def phantom_generic(api: Any, name: str, arg: Type) -> Optional[Type]:
    """spmd_phantom.<name>[arg], or None if the stub has no such class."""
    info = _class(api, f"{PHANTOM_MODULE}.{name}")
    return Instance(info, [arg]) if info is not None else None
