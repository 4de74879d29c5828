"""Configurations on mypy's tree: each configured function checked once per
configuration, by mypy's own machinery for type variables with values.

Before analysis (rewrites.py), a function decorated with
`@spmd.configurations(...)`, or a method of a class so decorated, gets a first
statement

    __spmd_configuration__: _spmd_phantom_.Configuration = _spmd_phantom_.configuration()

When the analyzer reaches that annotation (the function's signature is
analysed by then), `configuration_variable` answers a type variable whose
values are the configurations' labels (`Literal['sequence_parallel=True']`)
and adds it to the function's type variables.  mypy then checks the body
once per value, as it does for any function generic in such a variable
(expand_typevars): in each copy the statement's declared type is one label,
which `current` reads; the marker call's hook runs first in each copy
(plugin/configurations.py) and types the flag parameters there.  The
variable appears in no parameter, so callers never see it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from mypy.nodes import (
    AssignmentExpr,
    ComparisonExpr,
    AssignmentStmt,
    CallExpr,
    ClassDef,
    Decorator,
    DictExpr,
    Expression,
    FuncDef,
    IntExpr,
    ListExpr,
    MemberExpr,
    NameExpr,
    RefExpr,
    Statement,
    StrExpr,
    TupleExpr,
    UnaryExpr,
)
from mypy.types import AnyType, CallableType, LiteralType, NoneType, Type, TypeOfAny, TypeVarId, TypeVarType, UnboundType

from .tree import PHANTOM_ALIAS, PHANTOM_MODULE

if TYPE_CHECKING:
    from mypy.server.subexpr import get_subexpressions

    from ...vocab.configurations import Configuration, DeclarationError, Flag, configurations, merge


def _declarations() -> None:
    """The declarations' vocabulary and mypy's subexpression walk, imported with
    the first configured function (most projects have none)."""
    global Configuration, DeclarationError, Flag, configurations, get_subexpressions, merge
    if "merge" not in globals():
        from mypy.server.subexpr import get_subexpressions

        from ...vocab.configurations import Configuration, DeclarationError, Flag, configurations, merge

DECORATORS = frozenset({"spmd_mypy.runtime.configurations.configurations", "spmd_mypy.configurations"})
MARKER_TYPE = f"{PHANTOM_MODULE}.Configuration"
MARKER_CALL = f"{PHANTOM_MODULE}.configuration"
MARKER_NAME = "__spmd_configuration__"
CONSTRUCTORS = frozenset({"__init__", "__new__", "__post_init__"})  # they store the flags: checked once
_RAW_ID = -7001  # the variable's id in its function's namespace (mypy numbers from -1)


class Declared:
    """A configured function: its declarations (the decorators' calls, class
    first), and what they read as (configurations, or why they cannot be read)."""

    def __init__(self, func: FuncDef, calls: List[CallExpr]) -> None:
        self.func = func  # held: ids stay valid
        self.calls = calls
        self.configs: List[Configuration] = []
        self.error: Optional[str] = None
        self.ties: Dict[Tuple[str, str], Expression] = {}  # (flag, repr(value)) -> its Spmd(...)
        try:
            flags: List[Flag] = []
            for call in calls:
                flags = merge(flags, [_flag(name, value, self.ties) for name, value in zip(call.arg_names, call.args)])
            self.configs = configurations(flags)
        except DeclarationError as exc:
            self.error = str(exc)

    def ties_of(self, config: Configuration) -> List[Expression]:
        """The layouts the configuration's flag values are tied to."""
        found = (self.ties.get((name, repr(value))) for name, value in config.settings)
        return [t for t in found if t is not None]

    def ours(self) -> bool:
        """Every declaration calls spmd.configurations (known once analysed)."""
        return all(isinstance(c.callee, RefExpr) and c.callee.fullname in DECORATORS for c in self.calls)


_DECLARED: Dict[int, Declared] = {}  # id(FuncDef) -> its declaration
FLAG_NAMES: Dict[str, None] = {}  # every flag name declared so far (ordered set)
_LISTENERS: List[Any] = []  # called with a flag name the first time it is declared


def on_new_flag(listener: Any) -> None:
    _LISTENERS.append(listener)


def _decorator_call(expr: Expression) -> Optional[CallExpr]:
    if not isinstance(expr, CallExpr):
        return None
    callee = expr.callee
    name = callee.name if isinstance(callee, (NameExpr, MemberExpr)) else None
    return expr if name == "configurations" else None


def _calls(decorators: Sequence[Expression]) -> List[CallExpr]:
    return [c for c in map(_decorator_call, decorators) if c is not None]


def _literal(expr: Expression) -> object:
    if isinstance(expr, NameExpr) and expr.name in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.name]
    if isinstance(expr, IntExpr):
        return expr.value
    if isinstance(expr, UnaryExpr) and expr.op == "-" and isinstance(expr.expr, IntExpr):
        return -expr.expr.value
    if isinstance(expr, StrExpr):
        return expr.value
    raise DeclarationError("a flag's values are literals (True, False, an int, a string, None)")


def _flag(name: Optional[str], value: Expression, ties: Dict[Tuple[str, str], Expression]) -> Flag:
    if name is None:
        raise DeclarationError("flags are keyword arguments: spmd.configurations(sequence_parallel=(True, False))")
    if isinstance(value, (TupleExpr, ListExpr)):
        return Flag(name, tuple(_literal(v) for v in value.items))
    if isinstance(value, DictExpr):  # {True: Spmd(tp=S(0)), False: Spmd(tp=I)}: values tied to layouts
        keys = []
        for key, spec in value.items:
            if key is None:
                raise DeclarationError(f"{name}={{value: Spmd(...), ...}}: no ** in a flag's layouts")
            keys.append(_literal(key))
            ties[(name, repr(keys[-1]))] = spec
        return Flag(name, tuple(keys))
    callee = value.callee if isinstance(value, CallExpr) else None
    called = callee.name if isinstance(callee, (NameExpr, MemberExpr)) else None
    if isinstance(value, CallExpr) and called == "axis_enabled":
        if len(value.args) != 1 or not isinstance(value.args[0], StrExpr):
            raise DeclarationError(f"{name}=spmd.axis_enabled(\"ep\"): the axis the flag turns on")
        return Flag(name, (True, False), value.args[0].value)
    if isinstance(value, CallExpr) and called == "axis_size":
        if not value.args or not isinstance(value.args[0], StrExpr) or len(value.args) < 2:
            raise DeclarationError(f"{name}=spmd.axis_size(\"tp\", 1, 4): the axis, then the sizes")
        sizes = tuple(_literal(v) for v in value.args[1:])
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in sizes):
            raise DeclarationError(f"{name}: an axis size is a positive int")
        return Flag(name, sizes, value.args[0].value)
    raise DeclarationError(
        f"write {name}=(value, ...), the values the flag takes, or {name}={{value: Spmd(...), ...}}, "
        f"each value tied to its layout, in the decorator itself"
    )


def mark_configured(stmts: Sequence[Statement], outer: Sequence[Expression] = ()) -> None:
    """Insert the marker statement in every configured function among `stmts`
    (and the methods of configured classes there); `outer`: the decorators of
    the class `stmts` belong to, when they are one method."""
    for stmt in stmts:
        if isinstance(stmt, ClassDef):
            mark_configured(stmt.defs.body, stmt.decorators)
        elif isinstance(stmt, (Decorator, FuncDef)):
            func = stmt.func if isinstance(stmt, Decorator) else stmt
            calls = _calls(outer) + (_calls(stmt.original_decorators) if isinstance(stmt, Decorator) else [])
            if calls and id(func) not in _DECLARED and func.body.body and func.name not in CONSTRUCTORS:
                _mark(func, calls)


def _mark(func: FuncDef, calls: List[CallExpr]) -> None:
    _declarations()
    declared = _DECLARED[id(func)] = Declared(func, calls)
    for config in declared.configs[:1]:
        for name, _ in config.settings:
            if name not in FLAG_NAMES:
                FLAG_NAMES[name] = None
                for listener in _LISTENERS:
                    listener(name)
    flag_names = {name for config in declared.configs[:1] for name, _ in config.settings}
    _bind_flag_calls(func.body, flag_names)
    first = calls[-1]  # the marker's messages go to the declaration
    callee = MemberExpr(NameExpr(PHANTOM_ALIAS), MARKER_CALL.rsplit(".", 1)[1])
    call = CallExpr(callee, [], [], [])
    target = NameExpr(MARKER_NAME)
    marker = AssignmentStmt([target], call, UnboundType(f"{PHANTOM_ALIAS}.Configuration"), new_syntax=True)
    for node in (callee, callee.expr, call, target, marker):
        node.set_line(first.line, first.column)
    func.body.body.insert(0, marker)


def _bind_flag_calls(body: Any, names: Any) -> None:
    """`get_world_size() == 1` becomes `(__spmd_get_world_size__ := get_world_size()) == 1`:
    mypy narrows a comparison of a name, never of a call, so the call's
    Literal value (its flag's, per configuration) decides the branch."""
    for expr in get_subexpressions(body):
        if not isinstance(expr, ComparisonExpr):
            continue
        for i, operand in enumerate(expr.operands):
            callee = operand.callee if isinstance(operand, CallExpr) else None
            name = callee.name if isinstance(callee, (NameExpr, MemberExpr)) else None
            if name in names:
                target = NameExpr(f"__spmd_{name}__")
                bound = AssignmentExpr(target, operand)
                for node in (target, bound):
                    node.set_line(operand.line, operand.column, operand.end_line, operand.end_column)
                expr.operands[i] = bound


def configuration_variable(sem: Any) -> Type:
    """The marker's annotation, analysed: the function's configuration variable
    (added to its type variables), or Any when it is not configured."""
    stack = getattr(sem, "function_stack", None) or []
    func: Any = stack[-1] if stack else None
    declared = _DECLARED.get(id(func))
    sig = getattr(func, "type", None)
    if declared is None or declared.error is not None or not declared.ours() or not isinstance(sig, CallableType):
        return AnyType(TypeOfAny.special_form)
    for var in sig.variables:
        if isinstance(var, TypeVarType) and var.id.raw_id == _RAW_ID:
            return var
    str_type = sem.named_type("builtins.str")
    var = TypeVarType(
        f"{MARKER_NAME}_T",
        f"{func.fullname}.{MARKER_NAME}_T",
        TypeVarId(_RAW_ID, namespace=func.fullname),
        [LiteralType(c.label, str_type) for c in declared.configs],
        sem.object_type(),
        AnyType(TypeOfAny.from_omitted_generics),
    )
    func.type = sig.copy_modified(variables=[*sig.variables, var])
    return var


def declared_in(api: Any) -> Optional[Declared]:
    """The declaration of the configured function being checked, or of the
    one a function being checked is nested in; None if neither."""
    scope = getattr(api, "scope", None)
    for node in reversed(getattr(scope, "stack", None) or ()):
        found = _DECLARED.get(id(node))
        if found is not None:
            return found
    return None


def current(api: Any) -> Optional[Tuple[Configuration, Any]]:
    """(the configuration being checked, the copy of the function checked for
    it), or None outside a configured function."""
    declared = declared_in(api)
    if declared is None or declared.error is not None:
        return None
    copies = getattr(declared.func, "expanded", None)
    if not copies:
        return None
    copy = copies[-1]
    first = copy.body.body[0] if copy.body.body else None
    label = getattr(getattr(first, "type", None), "value", None) if isinstance(first, AssignmentStmt) else None
    for config in declared.configs:
        if config.label == label:
            return config, copy
    return None


def literal_of(api: Any, value: object) -> Type:
    """The type a flag reads as: Literal[True], Literal[4], Literal['x'], None."""
    if value is None:
        return NoneType()
    name = "builtins.bool" if isinstance(value, bool) else "builtins.int" if isinstance(value, int) else "builtins.str"
    return LiteralType(value, api.named_generic_type(name, []))  # type: ignore[arg-type]


def set_parameter_types(copy: Any, types: Dict[str, Type]) -> None:
    """Parameters of the copy being checked, retyped (a flag parameter)."""
    for arg in copy.arguments:
        if arg.variable.name in types:
            arg.variable.type = types[arg.variable.name]


def configure_since(mark: Any, codes: Any, transform: Any, func: Any) -> None:
    """Rewrite the spmd-* errors (code in `codes`) the current file got after
    `mark` (reword.error_mark) with `transform`; an error it maps to None is
    dropped.  Errors an active watcher holds back are rewritten there too,
    those at the lines of `func` (the configured function)."""
    if mark is None:
        return
    errors, count = mark
    first, last = func.line, func.end_line or func.line
    held = [getattr(w, "_filtered", None) for w in errors.get_watchers()]
    for infos, start in ((errors.error_info_map.get(errors.file, []), count), *((h, 0) for h in held)):
        if not infos:
            continue
        keep = infos[:start]
        for info in infos[start:]:
            if getattr(info.code, "code", None) in codes and first <= info.line <= last:
                message = transform(info.message)
                if message is None:
                    continue
                info.message = message
            keep.append(info)
        infos[:] = keep


def parameter_types(copy: Any) -> List[Tuple[int, str, Optional[Type]]]:
    """(index, name, type) of each parameter of the copy being checked."""
    return [(i, a.variable.name, a.variable.type) for i, a in enumerate(copy.arguments)]


def declared_parameter(func: Any, index: int) -> Optional[Type]:
    """The parameter's type as the (generic) function declares it."""
    sig = func.type
    return sig.arg_types[index] if isinstance(sig, CallableType) and index < len(sig.arg_types) else None


def return_type(api: Any) -> Optional[Type]:
    """The return type the checker holds returns of the current body to."""
    types = getattr(api, "return_types", None)
    return types[-1] if types else None


def set_return_type(api: Any, typ: Type) -> None:
    api.return_types[-1] = typ

