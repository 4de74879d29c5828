"""Overrides that differ from their torch base only by SPMD carriers.

`class ColumnLinear(nn.Linear)` with `def forward(self, input: Annotated[Tensor,
Spmd(tp=R)]) -> ...` narrows the parameter type of nn.Linear.forward, so
mypy reports [override].  To every checker without the plugin the carrier is
a plain Tensor and the override is compatible; and the plugin checks calls
of the subclass against its own forward (Module.__call__ is routed there).
mypy has no hook at its override check, which runs after the method's body
is checked; so a hook that runs in the body (the one of its returns)
compares the two signatures first: when the override is incompatible as
written but compatible with its carriers read as plain Tensors, the
[override] errors mypy is about to report for that method, at the lines its
check reports them, are ignored, as a `# type: ignore[override]` written
there would be.  Any other mismatch (a non-tensor parameter, a missing
argument) changes neither answer and is reported as usual.  (The semantic
analyzer's class hooks run before method signatures are analysed.)
"""

from __future__ import annotations

from typing import Any, List, Optional, Set

from mypy.nodes import Decorator, FuncDef, TypeInfo
from mypy.subtypes import is_subtype
from mypy.typeops import bind_self
from mypy.types import CallableType, Type, get_proper_type
from mypy.typevars import fill_typevars

from .members import holds_carrier
from .tensor_types import relax_tensors

OVERRIDE = "override"


def ignore_carrier_overrides(api: Any, bases: Set[str], method: str) -> None:
    """In the checker, inside the body of `method` of a class: ignore its
    [override] errors against the first class of `bases` in its MRO, when
    carriers cause them."""
    func = api.scope.current_function()
    if not isinstance(func, FuncDef) or func.name != method or not func.info:  # FakeInfo (a module-level def) is falsy
        return
    info: TypeInfo = func.info
    base = next((b for b in info.mro[1:] if b.fullname in bases), None)
    original_node = base.names.get(method) if base is not None else None
    if original_node is None or not isinstance(original_node.node, FuncDef):
        return
    override, original = _bound(func.type, info), _bound(original_node.node.type, info)
    if override is None or original is None:
        return
    if not any(holds_carrier(t) for t in override.arg_types) or _compatible(override, original):
        return
    relaxed = override.copy_modified(arg_types=[relax_tensors(api, t) for t in override.arg_types])
    if not _compatible(relaxed, original):
        return  # wrong for a reason beyond carriers: mypy reports it
    decorated = isinstance(getattr(info.names.get(method), "node", None), Decorator)
    _ignore(api, _error_lines(func, decorated, override, original))


def ignore_unknown_result_overrides(api: Any) -> None:
    """In the checker, inside the body of a method: when the method it
    overrides returns carriers (a boundary that declares its outputs, such as
    a local_map'd forward) and this one returns tensors of unknown SPMD type
    (plain Tensors, which the plugin accepts wherever a typed one is
    expected), its [override] errors are ignored if the override is
    compatible with the original's results read as plain Tensors.  Two
    declared SPMD types that differ stay an error."""
    func = api.scope.current_function()
    if not isinstance(func, FuncDef) or not func.info:
        return
    info: TypeInfo = func.info
    name, node = func.name, None
    for base in info.mro[1:]:  # a loop, not a generator: this runs at every return of a method
        node = base.names.get(name)
        if node is not None:
            break
    target = node.node if node is not None else None
    declared = target.type if isinstance(target, FuncDef) else target.var.type if isinstance(target, Decorator) else None
    original_sig = get_proper_type(declared) if declared is not None else None
    if not isinstance(original_sig, CallableType) or not holds_carrier(original_sig.ret_type):
        return  # most methods: nothing overridden, or no declared result types
    override, original = _bound(func.type, info), _bound(original_sig, info)
    if override is None or original is None or holds_carrier(override.ret_type):
        return
    if _compatible(override, original):
        return
    relaxed = original.copy_modified(ret_type=relax_tensors(api, original.ret_type))
    if not _compatible(override, relaxed):
        return  # wrong for a reason beyond the results' carriers: mypy reports it
    _ignore(api, [func.line])


def _ignore(api: Any, lines: List[int]) -> None:
    """mypy's [override] errors at these lines of the checked file are
    ignored, as a `# type: ignore[override]` written there would be."""
    ignored = api.msg.errors.ignored_lines.setdefault(api.path, {})
    for line in lines:
        codes = ignored.get(line)
        if codes is None:
            ignored[line] = [OVERRIDE]
        elif codes and OVERRIDE not in codes:  # [] is a bare `# type: ignore`: all codes
            codes.append(OVERRIDE)


def _bound(typ: Optional[Type], info: TypeInfo) -> Optional[CallableType]:
    p = get_proper_type(typ) if typ is not None else None
    if not isinstance(p, CallableType) or not p.arg_types:
        return None
    bound = bind_self(p, fill_typevars(info))
    return bound if isinstance(bound, CallableType) else None


def _compatible(override: CallableType, original: CallableType) -> bool:
    return is_subtype(override, original, ignore_pos_arg_names=True)


def _error_lines(func: FuncDef, decorated: bool, override: CallableType, original: CallableType) -> List[int]:
    """Where mypy's check_override reports: each incompatible argument's line
    when the two signatures line up argument for argument and the method is
    undecorated, else the def line."""
    if (
        decorated
        or len(override.arg_types) != len(original.arg_types)
        or override.min_args != original.min_args
    ):
        return [func.line]
    lines = []
    for i, (mine, theirs) in enumerate(zip(override.arg_types, original.arg_types)):
        if not is_subtype(theirs, mine):
            arg = func.arguments[i + 1]  # after self
            lines.append(arg.line if arg.line != -1 else func.line)
    return lines or [func.line]
