"""Every use of mypy by the plugin, in one module.

The plugin API is not stable across mypy releases and part of what the plugin
needs is internal (the analyzer's current file, binding `self`, the two
checker methods wrapped below).  Everything that touches mypy lives here, so
a mypy upgrade is this file's work.  Tested range: see pyproject.toml.

The carrier: a tensor whose SPMD type is T has the mypy type
`spmd_phantom.SpmdTensor[Literal["<canonical T>"]]` (stubs/torch-spmd).
"""

from __future__ import annotations

import bisect
import re
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from mypy.errorcodes import ErrorCode
from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    AssignmentStmt,
    Block,
    CallExpr,
    ClassDef,
    Context,
    Decorator,
    EllipsisExpr,
    Expression,
    ExpressionStmt,
    FloatExpr,
    ForStmt,
    FuncDef,
    GDEF,
    IfStmt,
    Import,
    ImportFrom,
    IndexExpr,
    MatchStmt,
    MypyFile,
    OpExpr,
    OverloadedFuncDef,
    ReturnStmt,
    Statement,
    TryStmt,
    WhileStmt,
    WithStmt,
    IntExpr,
    ListExpr,
    MemberExpr,
    NameExpr,
    RefExpr,
    SliceExpr,
    StrExpr,
    SymbolTableNode,
    TupleExpr,
    TypeAlias,
    TypeAliasStmt,
    TypeInfo,
    UnaryExpr,
    Var,
)
from mypy.plugin import (
    AnalyzeTypeContext,
    AttributeContext,
    FunctionContext,
    FunctionSigContext,
    MethodContext,
    MethodSigContext,
    Plugin,
    ReportConfigContext,
)
from mypy.typeops import bind_self
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    LiteralType,
    NoneType,
    ProperType,
    TupleType,
    Type,
    TypeAliasType,
    TypeOfAny,
    TypeType,
    UninhabitedType,
    UnionType,
    get_proper_type,
)
from mypy.server.subexpr import get_subexpressions
from mypy.subtypes import is_subtype

from .annotations import Span

__all__ = [
    "Plugin",
    "AnalyzeTypeContext",
    "FunctionContext",
    "MethodContext",
    "MethodSigContext",
    "FunctionSigContext",
    "AttributeContext",
    "CallableType",
    "ReportConfigContext",
    "ErrorCode",
    "Context",
    "Expression",
    "Type",
    "CARRIER",
    "TENSOR",
]

CARRIER = "spmd_phantom.SpmdTensor"
TENSOR = "torch._tensor.Tensor"


def error_code(code: str, description: str) -> ErrorCode:
    return ErrorCode(code, description, "SPMD")


def fail(api: Any, msg: str, context: Context, code: ErrorCode) -> None:
    api.fail(msg, context, code=code)


def note(api: Any, msg: str, context: Context, code: ErrorCode) -> bool:
    """A note at `context` through the checker's or the type analyzer's api;
    False when `api` can take none."""
    method = getattr(api, "note", None)
    if method is None:
        return False
    method(msg, context, code=code)
    return True


def fail_past_filters(api: Any, msg: str, context: Context, code: ErrorCode) -> None:
    """Report an error that mypy's active error filters would swallow.

    mypy checks a reflected operator method with errors filtered and turns any
    error there into "Unsupported operand types" [operator]; the SPMD error is
    the one the user needs, and the operator itself is fine."""
    errors = api.msg.errors
    saved = errors._watchers
    errors._watchers = []
    try:
        api.fail(msg, context, code=code)
    finally:
        errors._watchers = saved


# -- reading types ---------------------------------------------------------------


def _target(typ: Type) -> ProperType:
    """get_proper_type for reading only: an alias without parameters is its
    target itself, where mypy would copy the target on every expansion (the
    aliases users write for annotated tensors are read thousands of times)."""
    while isinstance(typ, TypeAliasType) and not typ.args and typ.alias is not None and not typ.alias.alias_tvars:
        typ = typ.alias.target
    return get_proper_type(typ)


def carried(typ: Optional[Type]) -> Optional[str]:
    """The canonical SPMD string a carrier type holds, else None."""
    if typ is None:
        return None
    p = _target(typ)
    if isinstance(p, Instance) and p.type.fullname == CARRIER and p.args:
        arg = get_proper_type(p.args[0])
        if isinstance(arg, LiteralType) and isinstance(arg.value, str):
            return arg.value
    return None


def is_tensor(typ: Optional[Type]) -> bool:
    """A torch Tensor (carrier or plain)."""
    if typ is None:
        return False
    p = _target(typ)
    return isinstance(p, Instance) and p.type.has_base(TENSOR)


def union_alternatives(typ: Optional[Type]) -> Optional[List[Type]]:
    """The items of a Union whose items are all tensors, else None."""
    if typ is None:
        return None
    p = get_proper_type(typ)
    if isinstance(p, UnionType) and p.items and all(is_tensor(t) for t in p.items):
        return list(p.items)
    return None


def is_any(typ: Optional[Type]) -> bool:
    return typ is not None and isinstance(get_proper_type(typ), AnyType)


def formal_groups(ctx: Any) -> List[Tuple[Optional[str], List[Expression], List[Type]]]:
    """(parameter name, actual expressions, their types) per formal of the callee."""
    names = getattr(ctx, "callee_arg_names", None) or [None] * len(ctx.args)
    return list(zip(names, ctx.args, ctx.arg_types))


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


# -- building carriers -----------------------------------------------------------


class _Infos:
    """The classes hooks build types from (str, the carrier, Tensor), looked
    up once per owner -- one check pass or one analysed tree, see
    check_owner / analysis_owner -- instead of once per type built: the
    checker builds a carrier for every typed op and the analyzer a Tensor for
    every annotation."""

    __slots__ = ("owner", "str", "carrier", "tensor", "carriers")

    def __init__(self) -> None:
        self.owner: object = None
        self.str: Any = None
        self.carrier: Any = None
        self.tensor: Any = None
        # canonical string -> its carrier type, built once per owner (mypy's
        # types are values: the checker shares them between expressions too)
        self.carriers: Dict[str, Type] = {}


_CHECKER_INFOS = _Infos()
_ANALYZER_INFOS = _Infos()


def _checker_infos(api: Any) -> _Infos:
    infos, owner = _CHECKER_INFOS, check_owner(api)
    if owner is None or owner is not infos.owner:
        infos.owner = None  # stays unset if a lookup fails
        infos.str = api.named_generic_type("builtins.str", []).type
        infos.carrier = api.named_generic_type(CARRIER, [AnyType(TypeOfAny.special_form)]).type
        infos.carriers = {}
        infos.owner = owner
    return infos


def carrier_in_analyzer(ctx: AnalyzeTypeContext, canonical: str) -> Type:
    api = ctx.api
    literal = LiteralType(canonical, fallback=api.named_type("builtins.str", []))
    return api.named_type(CARRIER, [literal])


def carrier_in_checker(api: Any, canonical: str) -> Type:
    infos = _checker_infos(api)
    made = infos.carriers.get(canonical)
    if made is None:
        literal = LiteralType(canonical, fallback=Instance(infos.str, []))
        made = infos.carriers[canonical] = Instance(infos.carrier, [literal])
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


# -- the analyzer ------------------------------------------------------------------


def analyzer_path(ctx: AnalyzeTypeContext) -> Optional[str]:
    sem = getattr(ctx.api, "api", None)
    mod = getattr(sem, "cur_mod_node", None)
    return getattr(mod, "path", None)


def analyzer_lookup(ctx: AnalyzeTypeContext) -> Callable[[str], Optional[str]]:
    def lookup(name: str) -> Optional[str]:
        sym = ctx.api.lookup_qualified(name, ctx.context, suppress_errors=True)  # type: ignore[attr-defined]
        if sym is None:
            return None
        node = sym.node
        return getattr(node, "fullname", None) or sym.fullname

    return lookup


def type_position(ctx: AnalyzeTypeContext) -> Tuple[int, int]:
    return (ctx.type.line, ctx.type.column)


def mark_alias_target(ctx: AnalyzeTypeContext) -> None:
    """Stop mypy from treating `X = Annotated[Tensor, ...]` as an unindexed generic alias."""
    ctx.type.empty_tuple_index = True


# -- expressions in calls (collectives) ------------------------------------------


def fullname_of(expr: Expression) -> Optional[str]:
    if isinstance(expr, RefExpr):
        node = expr.node
        return getattr(node, "fullname", None) or expr.fullname or None
    return None


def str_value(expr: Expression) -> Optional[str]:
    return expr.value if isinstance(expr, StrExpr) else None


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


def callable_of(typ: Optional[Type]) -> Optional[CallableType]:
    """The callable a type is (a function's type), else None."""
    p = get_proper_type(typ) if typ is not None else None
    return p if isinstance(p, CallableType) else None


def with_signature(sig: CallableType, arg_types: List[Type], ret_type: Type) -> CallableType:
    return sig.copy_modified(arg_types=arg_types, ret_type=ret_type)


def tuple_items(typ: Type) -> Optional[List[Type]]:
    """The items of a tuple type, else None."""
    p = get_proper_type(typ)
    return list(p.items) if isinstance(p, TupleType) else None


def with_tuple_items(typ: Type, items: List[Type]) -> Type:
    p = get_proper_type(typ)
    return p.copy_modified(items=items) if isinstance(p, TupleType) else typ


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


def operator_sides(context: Context) -> Optional[Tuple[str, str]]:
    """Source text of the left and right operands of `a op b`, `a op= b`, `a < b`."""
    left = getattr(context, "left", None)
    right = getattr(context, "right", None)
    if left is None:
        left, right = getattr(context, "lvalue", None), getattr(context, "rvalue", None)
    if left is None:
        operands = getattr(context, "operands", None)
        if operands and len(operands) >= 2:
            left, right = operands[0], operands[1]
    if isinstance(left, Expression) and isinstance(right, Expression):
        return expr_text(left), expr_text(right)
    return None


def expr_text(expr: Expression) -> str:
    """A short source-like rendering of an argument, for hints."""
    if isinstance(expr, NameExpr):
        return expr.name
    if isinstance(expr, MemberExpr):
        base = expr_text(expr.expr)
        return f"{base}.{expr.name}"
    if isinstance(expr, CallExpr) and _is_untyped_wrapper(expr) and len(expr.args) == 1:
        return expr_text(expr.args[0])  # the call as written
    if isinstance(expr, CallExpr) and isinstance(expr.callee, (NameExpr, MemberExpr)):
        return f"{expr_text(expr.callee)}(...)"
    if isinstance(expr, IndexExpr):
        return f"{expr_text(expr.base)}[...]"
    return "x"


def call_args(ctx: Any) -> Tuple[Tuple[Optional[str], Expression, Type], ...]:
    """Flatten a Function/MethodContext's actual arguments: (name, expr, type).
    Kept for the last context (a hook asks several times per call)."""
    last = _LAST_CALL_ARGS
    if last[0] is ctx:
        return last[1]
    out: List[Tuple[Optional[str], Expression, Type]] = []
    for names, exprs, types in zip(ctx.arg_names, ctx.args, ctx.arg_types):
        out.extend(zip(names, exprs, types))
    last[0], last[1] = ctx, tuple(out)
    return last[1]


_LAST_CALL_ARGS: List[Any] = [None, ()]


def formal_args(ctx: Any, formal: str) -> List[Tuple[Expression, Type]]:
    """The actual arguments bound to the callee's parameter named `formal`."""
    try:
        i = ctx.callee_arg_names.index(formal)
    except (AttributeError, ValueError):
        return []
    return list(zip(ctx.args[i], ctx.arg_types[i]))


# -- module calls ------------------------------------------------------------------


def forward_signature(ctx: Any) -> Optional[CallableType]:
    """The bound signature of `forward` of the nn.Module subclass being called
    (the first item if forward is overloaded)."""
    receiver = get_proper_type(ctx.type)
    if not isinstance(receiver, Instance):
        return None
    info: TypeInfo = receiver.type
    if not info.has_base("torch.nn.modules.module.Module"):
        return None
    for base in info.mro:
        if base.fullname == "torch.nn.modules.module.Module":
            return None  # forward is not overridden below Module
        node = base.names.get("forward")
        if node is not None:
            sig = get_proper_type(getattr(node.node, "type", None))
            if isinstance(sig, FunctionLike):
                bound = bind_self(sig, receiver)
                return bound.items[0] if bound.items else None
            return None
    return None


def autograd_function_forward(ctx: Any) -> Optional[CallableType]:
    """For `Fn.apply(...)` on a torch.autograd.Function subclass: its static
    `forward` without the leading ctx parameter."""
    p = get_proper_type(ctx.type)
    info: Optional[TypeInfo] = None
    if isinstance(p, FunctionLike) and p.is_type_obj():
        info = p.type_object()
    elif isinstance(p, TypeType) and isinstance(p.item, Instance):
        info = p.item.type
    if info is None or not info.has_base("torch.autograd.function.Function"):
        return None
    for base in info.mro:
        if base.fullname.startswith("torch."):
            return None  # forward not declared by the user
        node = base.names.get("forward")
        if node is not None:
            sig = get_proper_type(getattr(node.node, "type", None))
            if isinstance(sig, CallableType) and sig.arg_types:
                return sig.copy_modified(
                    arg_types=sig.arg_types[1:],
                    arg_kinds=sig.arg_kinds[1:],
                    arg_names=sig.arg_names[1:],
                )
            return None
    return None


# -- module parameters --------------------------------------------------------------


def attribute_write_type(ctx: Any, name: str) -> Optional[Type]:
    """What a write to attribute `name` accepts (an attribute hook's context),
    when it is declared in a class body, the class is no record (dataclass,
    attrs, NamedTuple, TypedDict, Protocol) and the declared type is a
    carrier or an Optional carrier: the same with a plain Tensor in the
    carrier's place, so `self.w = nn.Parameter(...)` checks.  None otherwise
    (the declared type stands).  Reads keep the carrier."""
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
    if sym is None or sym.implicit or not isinstance(var, Var) or var.info is None or _record(var.info):
        return None
    return relax_tensors(ctx.api, ctx.default_attr_type)


class _WrittenValues:
    """lvalue -> rvalue of the member assignments (`self.w = e`) of the file
    the checker is on, indexed on the first write a hook asks about."""

    __slots__ = ("owner", "values")

    def __init__(self) -> None:
        self.owner: object = None
        self.values: Dict[int, Expression] = {}


_WRITTEN = _WrittenValues()


def _index_member_assignments(stmts: List[Statement], values: Dict[int, Expression]) -> None:
    """Every `obj.attr = e` among `stmts`, in nested blocks, functions and classes."""
    for stmt in stmts:
        if isinstance(stmt, AssignmentStmt):
            for lvalue in stmt.lvalues:
                if isinstance(lvalue, MemberExpr):
                    values[id(lvalue)] = stmt.rvalue
        elif isinstance(stmt, Decorator):
            _index_member_assignments(stmt.func.body.body, values)
        elif isinstance(stmt, FuncDef):
            _index_member_assignments(stmt.body.body, values)
        elif isinstance(stmt, OverloadedFuncDef):
            _index_member_assignments([*stmt.items, *([stmt.impl] if stmt.impl else [])], values)
        elif isinstance(stmt, ClassDef):
            _index_member_assignments(stmt.defs.body, values)
        else:
            for block in _sub_blocks(stmt):
                _index_member_assignments(block.body, values)


def written_value(api: Any, lvalue: Context) -> Optional[Expression]:
    """The value assigned to the member expression `lvalue` in a plain
    assignment (None for `+=`, tuple targets and other writes)."""
    owner = check_owner(api)
    if owner is None or owner is not _WRITTEN.owner:
        _WRITTEN.owner, _WRITTEN.values = None, {}
        tree = getattr(api, "tree", None)
        if tree is None:
            return None
        _index_member_assignments(tree.defs, _WRITTEN.values)
        _WRITTEN.owner = owner
    return _WRITTEN.values.get(id(lvalue))


def quietly_typed(api: Any, expr: Expression) -> Type:
    """The type of `expr`, typed ahead of the checker if it has none yet,
    with no message and nothing stored (the checker types it again, and
    reports, where it gets to it)."""
    found = api.lookup_type_or_none(expr)
    if found is not None:
        return found
    with api.msg.filter_errors(), api.local_type_map:
        return api.expr_checker.accept(expr)


def _record(info: TypeInfo) -> bool:
    """A class whose annotated attributes are fields of a value, not state."""
    return bool(
        info.is_named_tuple
        or info.typeddict_type is not None
        or info.is_protocol
        or "dataclass" in info.metadata
        or "attrs" in info.metadata
    )


# -- signatures at call sites ------------------------------------------------------


def typed_before(api: Any, expr: Expression) -> Type:
    """The type the checker gave `expr` already (typed again if it has none)."""
    found = api.lookup_type_or_none(expr)
    return found if found is not None else expression_type(api, expr)


def expression_type(api: Any, expr: Expression) -> Type:
    return api.get_expression_type(expr)


def with_arg_types(sig: CallableType, arg_types: List[Type]) -> CallableType:
    return sig.copy_modified(arg_types=arg_types)


_COVARIANT = {"builtins.list": "typing.Sequence", "builtins.dict": "typing.Mapping"}


def relax_tensors(api: Any, typ: Type) -> Type:
    """typ with every carrier made a plain Tensor and every list/dict of tensors made
    a Sequence/Mapping (lists are invariant: list[SpmdTensor[...]] is no list[Tensor])."""
    p = get_proper_type(typ)
    if carried(p) is not None or (isinstance(p, Instance) and p.type.fullname == CARRIER):
        return plain_tensor_like(p)
    if isinstance(p, UnionType):
        return UnionType([relax_tensors(api, t) for t in p.items], p.line, p.column)
    if isinstance(p, TupleType):
        return p.copy_modified(items=[relax_tensors(api, t) for t in p.items])
    if isinstance(p, Instance) and p.args and has_tensor_deep(p):
        args = [relax_tensors(api, t) for t in p.args]
        target = _COVARIANT.get(p.type.fullname)
        if target is not None:
            return api.named_generic_type(target, args)
        return p.copy_modified(args=args)
    return typ


def has_tensor_deep(typ: Type) -> bool:
    p = get_proper_type(typ)
    if is_tensor(p):
        return True
    if isinstance(p, (UnionType, TupleType)):
        return any(has_tensor_deep(t) for t in p.items)
    if isinstance(p, Instance):
        return any(has_tensor_deep(t) for t in p.args)
    return False


def element_types(typ: Type) -> List[Type]:
    """The tensor types a parameter or value holds: itself, Optional's item,
    list/tuple/Sequence elements, dict values."""
    p = get_proper_type(typ)
    if is_tensor(p):
        return [p]
    if isinstance(p, (UnionType, TupleType)):
        return [e for t in p.items for e in element_types(t)]
    if isinstance(p, Instance) and p.args:
        return [e for t in p.args[-1:] for e in element_types(t)]
    return []


def display_items(expr: Expression) -> Optional[List[Expression]]:
    """The items of a list or tuple display `[a, b]` / `(a, b)`, else None."""
    if isinstance(expr, (ListExpr, TupleExpr)):
        return list(expr.items)
    return None


def plain_tensor_like(carrier: Type) -> Type:
    """The plain Tensor a carrier type derives from (found in its MRO)."""
    p = get_proper_type(carrier)
    if isinstance(p, Instance):
        for base in p.type.mro:
            if base.fullname == TENSOR:
                return Instance(base, [])
    return carrier


def unknown_carrier(api: Any) -> Type:
    """SpmdTensor[Any]: a tensor of unknown SPMD type that fits any annotation."""
    return Instance(_checker_infos(api).carrier, [AnyType(TypeOfAny.special_form)])


def stdlib_modules() -> frozenset:
    """Top-level modules of typeshed's standard library (mypy will not let a
    user module shadow one)."""
    try:
        from mypy.modulefinder import load_stdlib_py_versions

        return frozenset(m.partition(".")[0] for m in load_stdlib_py_versions(None))
    except Exception:
        return frozenset()


def checker_path(api: Any) -> Optional[str]:
    """The file the checker is checking now."""
    return getattr(api, "path", None)


def check_owner(api: Any) -> object:
    """An object that lives for one check pass over one file: the checker's
    scope, made anew per file and on every daemon recheck (TypeChecker.reset)."""
    return getattr(api, "scope", None)


def analysis_owner(ctx: AnalyzeTypeContext) -> object:
    """An object that lives for one parse of one file: the analyzer's tree."""
    return getattr(getattr(ctx.api, "api", None), "cur_mod_node", None)


# -- where the annotations are ------------------------------------------------------

_MAY_BE_TYPE = (IndexExpr, OpExpr, StrExpr, MemberExpr, NameExpr)


def annotation_spans(tree: object, marked: Optional[Sequence[int]] = None) -> Optional[List[Span]]:
    """Where the source of `tree` writes types: parameter and return
    annotations, annotated assignments, values that may be type aliases.
    None when a position is missing (the caller then parses the file itself).
    Reads the unanalyzed types and the values as parsed, which semantic
    analysis leaves in place (the Tensor hook asks during it).  The same walk
    as annotations._annotation_roots, on mypy's nodes.

    `marked`, sorted line numbers: only statements whose lines include one are
    walked (the caller wants the types written on those lines; most function
    bodies then need no walk at all)."""
    if not isinstance(tree, MypyFile):
        return None
    out: List[Span] = []

    def wanted(statements: List[Statement]) -> List[Statement]:
        if marked is None:
            return statements
        return [st for st in statements if _touches(st, marked)]

    def add(node: Any) -> bool:
        end_line, end_column = node.end_line, node.end_column
        if node.line < 1:
            return True  # not written (an unannotated parameter)
        if end_line is None or end_column is None:
            return False
        out.append((node.line, node.column, end_line, end_column))
        return True

    stack: List[Statement] = list(reversed(wanted(tree.defs)))
    while stack:
        st = stack.pop()
        if isinstance(st, Decorator):
            st = st.func
        if isinstance(st, OverloadedFuncDef):
            stack.extend(reversed([*st.items, *([st.impl] if st.impl is not None else [])]))
        elif isinstance(st, FuncDef):
            sig = st.unanalyzed_type
            if isinstance(sig, CallableType):
                for t in (*sig.arg_types, sig.ret_type):
                    if not add(t):
                        return None
            stack.extend(reversed(wanted(st.body.body)))
        elif isinstance(st, ClassDef):
            stack.extend(reversed(wanted(st.defs.body)))
        elif isinstance(st, AssignmentStmt):
            if st.unanalyzed_type is not None and not add(st.unanalyzed_type):
                return None
            if isinstance(st.rvalue, _MAY_BE_TYPE) and not add(st.rvalue):
                return None
        elif isinstance(st, TypeAliasStmt):
            return None  # `type X = ...`: rare; the caller parses the file
        else:
            for block in _sub_blocks(stmt=st):
                stack.extend(reversed(wanted(block.body)))
    return out


def _touches(st: Statement, marked: Sequence[int]) -> bool:
    """Whether the statement's lines include a marked line (unknown end: yes)."""
    first, last = st.line, st.end_line
    if isinstance(st, Decorator):
        first = min([first, st.func.line, *(d.line for d in st.decorators)])
        last = st.func.end_line if last is None else max(last, st.func.end_line or last)
    if last is None or first < 1:
        return True
    i = bisect.bisect_left(marked, first)
    return i < len(marked) and marked[i] <= last


# -- declared values: returns and annotated assignments ------------------------------
#
# mypy checks `return e` and `y: T = e` itself, by equality of carriers, and
# offers no plugin hook there.  Before semantic analysis the plugin rewrites
# those statements of a file that uses spmd, when the declared type may hold
# a tensor, into `return <RETURNED>(e)` / `y: T = <ASSIGNED>(e)`: calls of two
# stub functions whose function hooks compare per axis and then hand mypy the
# declared type.  The rewrite is idempotent (mypy may reuse a parsed tree).

PHANTOM_MODULE = "spmd_phantom"
_PHANTOM_ALIAS = "_spmd_phantom_"
RETURNED = "spmd_phantom.returned"
ASSIGNED = "spmd_phantom.assigned"

_NOT_TENSOR_NAMES = frozenset(
    "None int float str bool bytes complex object Any dict list tuple set frozenset type "
    "Dict List Tuple Set FrozenSet Type Optional Union Literal Callable Iterator Iterable "
    "Generator AsyncIterator AsyncGenerator Awaitable Coroutine Sequence Mapping "
    "MutableMapping MutableSequence Self NoReturn Never TypeGuard TypeIs ClassVar Final TypeAlias "
    "typing builtins collections abc".split()
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _may_hold_tensor(annotation: Optional[Type]) -> bool:
    """Syntactic test on an unanalysed annotation: False when every name in it
    is a builtin or typing name that cannot hold a tensor."""
    if annotation is None:
        return False
    names = set(_IDENT.findall(str(annotation)))
    return not names <= _NOT_TENSOR_NAMES


def _is_phantom_call(expr: Expression, callee: Optional[str] = None) -> bool:
    """A call the rewrite made: of the stub module's `callee` (any function if None)."""
    func = expr.callee if isinstance(expr, CallExpr) else None
    return (
        isinstance(func, MemberExpr)
        and isinstance(func.expr, NameExpr)
        and func.expr.name == _PHANTOM_ALIAS
        and (callee is None or func.name == callee.rsplit(".", 1)[1])
    )


def _wrap(expr: Expression, callee: str) -> Expression:
    if _is_phantom_call(expr):
        return expr  # already rewritten
    func = MemberExpr(NameExpr(_PHANTOM_ALIAS), callee.rsplit(".", 1)[1])
    call = CallExpr(func, [expr], [ARG_POS], [None])
    for node in (func, func.expr, call):
        node.set_line(expr.line, expr.column, expr.end_line, expr.end_column)
    return call


def _route_block(stmts: List[Statement], wrap_returns: bool, in_function: bool) -> None:
    """Wrap the returns (if `wrap_returns`) and, inside functions, the annotated
    assignments of `stmts`; recurse into nested statements and definitions.
    Module-level assignments are left to mypy: the module's top level may be
    analysed before any hook could rewrite it (see route_in_analyzer)."""
    for stmt in stmts:
        if isinstance(stmt, ReturnStmt):
            if wrap_returns and stmt.expr is not None:
                stmt.expr = _wrap(stmt.expr, RETURNED)
        elif isinstance(stmt, AssignmentStmt):
            if (
                in_function
                and len(stmt.lvalues) == 1
                and isinstance(stmt.lvalues[0], NameExpr)
                and stmt.unanalyzed_type is not None
                and not stmt.is_final_def
                and _may_hold_tensor(stmt.unanalyzed_type)
                and type(stmt.rvalue).__name__ != "TempNode"  # `y: T` without a value
            ):
                stmt.rvalue = _wrap(stmt.rvalue, ASSIGNED)
        elif isinstance(stmt, (FuncDef, Decorator, OverloadedFuncDef)):
            _route_function(stmt)
        elif isinstance(stmt, ClassDef):
            for inner in stmt.defs.body:  # class-body assignments are attributes
                if isinstance(inner, (FuncDef, Decorator, OverloadedFuncDef, ClassDef)):
                    _route_block([inner], False, False)
        else:
            for block in _sub_blocks(stmt):
                _route_block(block.body, wrap_returns, in_function)


def _route_function(node: Statement) -> None:
    if isinstance(node, OverloadedFuncDef):
        parts: List[Statement] = list(node.items)
        if node.impl is not None:
            parts.append(node.impl)
        for part in parts:
            _route_function(part)
        return
    func = node.func if isinstance(node, Decorator) else node
    if not isinstance(func, FuncDef):
        return
    sig = func.unanalyzed_type
    ret = sig.ret_type if isinstance(sig, CallableType) else None
    wrap = _may_hold_tensor(ret) and not func.is_generator and not func.is_coroutine
    _route_block(func.body.body, wrap, True)


def _sub_blocks(stmt: Statement) -> List[Block]:
    if isinstance(stmt, IfStmt):
        return [*stmt.body, *([stmt.else_body] if stmt.else_body else [])]
    if isinstance(stmt, (WhileStmt, ForStmt)):
        return [stmt.body, *([stmt.else_body] if stmt.else_body else [])]
    if isinstance(stmt, WithStmt):
        return [stmt.body]
    if isinstance(stmt, TryStmt):
        extra = [b for b in (stmt.else_body, stmt.finally_body) if b is not None]
        return [stmt.body, *stmt.handlers, *extra]
    if isinstance(stmt, MatchStmt):
        return list(stmt.bodies)
    if isinstance(stmt, Block):
        return [stmt]
    return []


def _leads_module(stmt: Statement) -> bool:
    """A docstring or a __future__ import: they stay first."""
    if isinstance(stmt, ExpressionStmt):
        return isinstance(stmt.expr, StrExpr)
    return isinstance(stmt, ImportFrom) and stmt.id == "__future__"


def route_declared_values(tree: Any, untyped: Optional[Callable[[str], Optional[str]]] = None) -> None:
    """Rewrite returns and annotated assignments of `tree` (see above), and,
    given `untyped`, the calls whose callee it names (wrap_untyped_calls).

    The import of the stub goes in first, so that a rewrite interrupted by an
    unexpected node never leaves a call to an unbound name."""
    if not isinstance(tree, MypyFile) or tree.is_stub or not tree.defs:
        return
    if not any(isinstance(d, Import) and (PHANTOM_MODULE, _PHANTOM_ALIAS) in d.ids for d in tree.defs):
        imp = Import([(PHANTOM_MODULE, _PHANTOM_ALIAS)])
        at = 0
        while at < len(tree.defs) and _leads_module(tree.defs[at]):
            at += 1
        imp.set_line(tree.defs[at].line if at < len(tree.defs) else 1, 0)
        imp.is_top_level = True
        tree.defs.insert(at, imp)
        tree.imports.append(imp)
    _route_block(tree.defs, False, False)
    if untyped is not None:
        wrap_untyped_calls(tree, tree, untyped)
    _ROUTED[tree.path] = (tree, None)


def routed_in_analyzer(ctx: AnalyzeTypeContext) -> bool:
    """Whether the tree being analysed is routed whole already (route_in_analyzer
    has nothing to do): the check before any other work, as hooks fire per Tensor."""
    return _routed_whole(getattr(getattr(ctx.api, "api", None), "cur_mod_node", None))


def _routed_whole(tree: object) -> bool:
    done = _ROUTED.get(getattr(tree, "path", ""))
    return done is not None and done[0] is tree and done[1] is None


def route_in_analyzer(ctx: AnalyzeTypeContext, untyped: Optional[Callable[[str], Optional[str]]] = None) -> None:
    """The same rewrite, from a type-analyze hook during semantic analysis.

    mypy parses a cached module that turned stale (a dependency's interface
    changed) without calling get_additional_deps, so this is the only
    chance there.  Only code whose body is not analysed yet is rewritten:
    every function during the module's top-level pass (function bodies are
    analysed after it), else the function whose signature is being analysed.
    The stub module is bound in the module's names, as the import would.
    Each tree and function is walked once (the hooks fire per Tensor)."""
    sem = getattr(ctx.api, "api", None)
    tree = getattr(sem, "cur_mod_node", None)
    if sem is None or not isinstance(tree, MypyFile) or tree.is_stub:
        return
    if _routed_whole(tree):
        return  # the whole tree is routed already
    if _PHANTOM_ALIAS not in tree.names:
        phantom = sem.modules.get(PHANTOM_MODULE)
        if phantom is None:
            return
        tree.names[_PHANTOM_ALIAS] = SymbolTableNode(GDEF, phantom, module_public=False)
    if not sem.recurse_into_functions:
        _route_block(tree.defs, False, False)
        if untyped is not None:  # function bodies only: the top level is analysed
            for func in _functions_of(tree.defs):
                wrap_untyped_calls(tree, func.body, untyped)
        _ROUTED[tree.path] = (tree, None)
        return
    stmt = sem.statement
    if not isinstance(stmt, (FuncDef, Decorator, OverloadedFuncDef)):
        return
    done = _ROUTED.get(tree.path)
    if done is None or done[0] is not tree:
        done = _ROUTED[tree.path] = (tree, set())
    funcs = done[1]
    if funcs is not None and id(stmt) not in funcs:
        funcs.add(id(stmt))
        _route_function(stmt)
        if untyped is not None:
            for func in _functions_of([stmt]):
                wrap_untyped_calls(tree, func.body, untyped)


# path -> (the tree last routed, None when all of it is, else the ids of the
# functions routed one by one).  Holding the tree keeps those ids valid.
_ROUTED: Dict[str, Tuple[Any, Optional[set]]] = {}


def _functions_of(stmts: List[Statement]) -> Iterable[FuncDef]:
    """The outermost functions among `stmts` and in the classes there
    (nested functions are part of their enclosing function's body)."""
    for stmt in stmts:
        if isinstance(stmt, Decorator):
            yield stmt.func
        elif isinstance(stmt, FuncDef):
            yield stmt
        elif isinstance(stmt, OverloadedFuncDef):
            yield from _functions_of([*stmt.items, *([stmt.impl] if stmt.impl else [])])
        elif isinstance(stmt, ClassDef):
            yield from _functions_of(stmt.defs.body)
        else:
            for block in _sub_blocks(stmt):
                yield from _functions_of(block.body)


# -- calls torch leaves untyped ----------------------------------------------------
# torch.special, torch.linalg and torch.fft are Any to mypy (torch assigns their
# functions from an untyped extension module), so their calls run no hook.  In a
# file that uses spmd, each call whose callee names one of them -- judged from
# the file's imports, before names are bound -- becomes `<UNTYPED>(call)`,
# in place.  The stub function is the identity; its hook (untyped.py) reads the
# real callee's fullname and types the call, or keeps its type.

UNTYPED = "spmd_phantom.untyped"
_TORCH = "torch"


def _torch_bindings(tree: MypyFile) -> Dict[str, str]:
    """Names the file's imports bind to torch and its submodules and functions
    -> the dotted path each stands for (`import torch.special as S`: S -> torch.special)."""
    out: Dict[str, str] = {}
    for imp in tree.imports:
        if isinstance(imp, Import):
            for module, alias in imp.ids:
                if module == _TORCH or module.startswith(_TORCH + "."):
                    if alias:
                        out[alias] = module
                    else:
                        out[_TORCH] = _TORCH
        elif isinstance(imp, ImportFrom) and imp.relative == 0:
            if imp.id == _TORCH or imp.id.startswith(_TORCH + "."):
                for name, alias in imp.names:
                    out[alias or name] = f"{imp.id}.{name}"
    return out


def _dotted(expr: Expression, bindings: Dict[str, str]) -> Optional[str]:
    if isinstance(expr, NameExpr):
        return bindings.get(expr.name)
    if isinstance(expr, MemberExpr):
        base = _dotted(expr.expr, bindings)
        return None if base is None else f"{base}.{expr.name}"
    return None


def _is_untyped_wrapper(expr: Expression) -> bool:
    return _is_phantom_call(expr, UNTYPED)


def wrap_untyped_calls(tree: MypyFile, node: Any, wanted: Callable[[str], Optional[str]]) -> None:
    """Wrap the calls in `node` whose callee's dotted path `wanted` maps to a name
    (idempotent: the call inside a wrapper is never wrapped again)."""
    bindings = _torch_bindings(tree)
    if not bindings:
        return
    exprs = [e for e in get_subexpressions(node) if isinstance(e, CallExpr)]
    inside = {id(e.args[0]) for e in exprs if _is_untyped_wrapper(e) and e.args}
    for call in exprs:
        if id(call) in inside or _is_untyped_wrapper(call):
            continue
        path = _dotted(call.callee, bindings)
        if path is None or wanted(path) is None:
            continue
        # In place: the call's parent is unknown, so the call node becomes
        # the wrapper and a copy of it goes inside.
        inner = CallExpr(call.callee, call.args, call.arg_kinds, call.arg_names)
        inner.set_line(call.line, call.column, call.end_line, call.end_column)
        wrapper = _wrap(inner, UNTYPED)
        assert isinstance(wrapper, CallExpr)
        call.callee, call.args = wrapper.callee, wrapper.args
        call.arg_kinds, call.arg_names = wrapper.arg_kinds, wrapper.arg_names


def untyped_call(ctx: Any) -> Optional[Tuple[str, CallExpr]]:
    """(fullname of the real callee, the real call) in the hook of the wrapper."""
    if len(ctx.args) != 1 or len(ctx.args[0]) != 1:
        return None
    inner = ctx.args[0][0]
    if not isinstance(inner, CallExpr) or not isinstance(inner.callee, RefExpr):
        return None
    return inner.callee.fullname, inner


def call_context(api: Any, call: CallExpr, default_return: Type) -> FunctionContext:
    """A FunctionContext for a call whose callee mypy could not type: one group
    per actual argument, named by its keyword, typed as the checker typed it."""
    types = [typed_before(api, a) for a in call.args]
    return FunctionContext(
        arg_types=[[t] for t in types],
        arg_kinds=[[k] for k in call.arg_kinds],
        callee_arg_names=list(call.arg_names),
        arg_names=[[n] for n in call.arg_names],
        default_return_type=default_return,
        args=[[a] for a in call.args],
        context=call,
        api=api,
    )


def _class(api: Any, fullname: str) -> Optional[TypeInfo]:
    module, _, name = fullname.rpartition(".")
    tree = api.modules.get(module)
    sym = tree.names.get(name) if tree is not None else None
    return sym.node if sym is not None and isinstance(sym.node, TypeInfo) else None


def plain_tensor(api: Any) -> Type:
    info = _class(api, TENSOR)
    return Instance(info, []) if info is not None else AnyType(TypeOfAny.special_form)


def phantom_generic(api: Any, name: str, arg: Type) -> Optional[Type]:
    """spmd_phantom.<name>[arg], or None if the stub has no such class."""
    info = _class(api, f"{PHANTOM_MODULE}.{name}")
    return Instance(info, [arg]) if info is not None else None


def type_context(api: Any) -> Optional[Type]:
    """The type the checker expects of the expression being checked."""
    stack = api.expr_checker.type_context
    return stack[-1] if stack else None


def declared_return(api: Any) -> Optional[Type]:
    """The declared return type of the function being checked.  (The type
    context is not enough: mypy retries a returned call without context.)"""
    stack = api.return_types
    return stack[-1] if stack else None


def recheck(api: Any, expr: Expression, context: Optional[Type]) -> Type:
    """Type `expr` again, in the context mypy would have given it."""
    return api.expr_checker.accept(expr, context)


def tensor_pairs(got: Type, want: Type) -> Optional[List[Tuple[Type, Type]]]:
    """Match a value's type against a declared type that holds tensors.

    Returns the (got, declared) pairs of tensors at the same place (top level,
    tuple items, type arguments of the same class, the tensor alternative of a
    declared Union, every alternative of a value from two branches), or None
    when the two do not line up or a non-tensor part does not fit; mypy then
    checks the value itself.
    """
    g, w = get_proper_type(got), get_proper_type(want)
    if isinstance(g, (AnyType, UninhabitedType)):
        return []
    if isinstance(g, UnionType) and (is_tensor(w) or isinstance(w, UnionType)):
        return _all_pairs((item, w) for item in g.items)  # each branch must fit
    if is_tensor(w):
        return [(g, w)] if is_tensor(g) else None
    if isinstance(w, UnionType):
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


def alias_holding_carrier(plugin: Any, fullname: str) -> Optional[bool]:
    """Is `fullname` a non-generic type alias of a type that holds a carrier
    (`Act = Annotated[Tensor, Spmd(tp=V)]`)?  None: not known yet (its module
    is not analysed, or its target is not ready)."""
    return _is_carrier_alias(_node_of(plugin, fullname))


def _node_of(plugin: Any, fullname: str) -> Any:
    try:
        sym = plugin.lookup_fully_qualified(fullname)
    except Exception:
        return None
    return getattr(sym, "node", None)


def _is_carrier_alias(node: Any) -> Optional[bool]:
    """alias_holding_carrier for the node a name stands for."""
    if node is None:
        return None
    if not isinstance(node, TypeAlias) or node.alias_tvars:
        return False
    return _holds_carrier(node.target, 4) or None


def _holds_carrier(typ: Type, depth: int) -> bool:
    """A carrier at the top, in a Union/tuple item or a type argument (bounded:
    aliases may be recursive)."""
    if depth < 0:
        return False
    p = get_proper_type(typ)
    if carried(p) is not None:
        return True
    if isinstance(p, (UnionType, TupleType)):
        return any(_holds_carrier(t, depth - 1) for t in p.items)
    if isinstance(p, Instance):
        return any(_holds_carrier(t, depth - 1) for t in p.args)
    return False


def module_path(plugin: Any, module: str) -> Optional[str]:
    modules = getattr(plugin, "_modules", None) or {}
    tree = modules.get(module)
    return getattr(tree, "path", None)


def alias_reference(plugin: Any, ctx: AnalyzeTypeContext, fullname: str) -> Optional[Type]:
    """A bare reference to a non-generic alias that holds a carrier; None
    when `fullname` is no such alias (any more: the daemon re-analyses edits).

    An alias of a carrier itself (`Act = Annotated[Tensor, Spmd(tp=V)]`) is
    the carrier, as mypy inlines `A = Tensor`: mypy would otherwise expand
    the alias again wherever it looks at a value of its type (tens of
    thousands of times in a cold run of the bench codebase, where without
    the plugin it expands none).  Other aliases stay aliases.  Either way
    the alias is recorded as used, as mypy does, so the daemon re-checks
    the users of an edited alias."""
    node = _node_of(plugin, fullname)
    if not _is_carrier_alias(node):
        return None
    used = getattr(ctx.api, "aliases_used", None)
    if isinstance(used, set):
        used.add(fullname)
    target = node.target
    if isinstance(target, Instance) and carried(target) is not None:
        return Instance(target.type, target.args, line=ctx.context.line, column=ctx.context.column)
    return TypeAliasType(node, [], line=ctx.context.line, column=ctx.context.column)


def default_type(ctx: AnalyzeTypeContext) -> Type:
    """mypy's own analysis of the type a type-analyze hook was asked about
    (which asks for the hook again: the caller makes sure it gets none)."""
    return ctx.api.analyze_type(ctx.type)


def list_display_element(expr: Expression, declared: Type) -> Optional[Tuple[List[Expression], Type]]:
    """For `[a, b]` returned or assigned where a list of tensors is declared:
    the items and the declared element type (their join would lose types)."""
    p = get_proper_type(declared)
    if isinstance(p, UnionType):
        found = [list_display_element(expr, t) for t in p.items]
        found = [f for f in found if f is not None]
        return found[0] if len(found) == 1 else None
    if (
        isinstance(expr, ListExpr)
        and isinstance(p, Instance)
        and len(p.args) == 1
        and has_tensor_deep(p.args[0])
    ):
        return list(expr.items), p.args[0]
    return None


def union_of(types: List[Type]) -> Type:
    """One type, or the Union of several (alternatives of a value from branches)."""
    return types[0] if len(types) == 1 else UnionType(types)
