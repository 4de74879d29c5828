"""Overrides that differ from their torch base only by SPMD carriers.

`class ColumnLinear(nn.Linear)` with `def forward(self, input: Annotated[Tensor,
Spmd(tp=R)]) -> ...` narrows the parameter type of nn.Linear.forward, so
mypy reports [override].  To every checker without the plugin the carrier is
a plain Tensor and the override is compatible; and the plugin checks calls
of the subclass against its own forward (Module.__call__ is routed there).
mypy has no hook at its override check, so after the class's semantic
analysis (a base-class hook) this module compares the two signatures itself:
when the override is incompatible as written but compatible with its
carriers read as plain Tensors, the [override] errors mypy is about to
report for that method (at the lines its check reports them) are ignored,
as a `# type: ignore[override]` written there would.  Any other mismatch (a
non-tensor parameter, a missing argument) changes neither answer and is
reported as usual.
"""

from __future__ import annotations

from typing import Any, List, Optional, Set

from mypy.nodes import Decorator, FuncDef, TypeInfo
from mypy.plugin import ClassDefContext
from mypy.subtypes import is_subtype
from mypy.typeops import bind_self
from mypy.types import CallableType, Instance, Type, get_proper_type
from mypy.typevars import fill_typevars

from .members import holds_carrier
from .tensor_types import relax_tensors

OVERRIDE = "override"


class _Names:
    """The semantic analyzer's named_type under the checker's name (relax_tensors)."""

    def __init__(self, api: Any) -> None:
        self.api = api

    def named_generic_type(self, name: str, args: List[Type]) -> Instance:
        return self.api.named_type(name, args)


def ignore_carrier_overrides(ctx: ClassDefContext, bases: Set[str], method: str) -> None:
    """Ignore the [override] errors of `method` of the class `ctx` defines
    against the first class of `bases` in its MRO, when carriers cause them."""
    info: TypeInfo = ctx.cls.info
    base = next((b for b in info.mro[1:] if b.fullname in bases), None)
    node = info.names.get(method)
    if base is None or node is None or method not in base.names:
        return
    func = node.node.func if isinstance(node.node, Decorator) else node.node
    original_node = base.names[method].node
    if not isinstance(func, FuncDef) or not isinstance(original_node, FuncDef):
        return
    override, original = _bound(func.type, info), _bound(original_node.type, info)
    if override is None or original is None:
        return
    if not any(holds_carrier(t) for t in override.arg_types) or _compatible(override, original):
        return
    relaxed = override.copy_modified(arg_types=[relax_tensors(_Names(ctx.api), t) for t in override.arg_types])
    if not _compatible(relaxed, original):
        return  # wrong for a reason beyond carriers: mypy reports it
    tree = ctx.api.modules.get(ctx.api.cur_mod_id)
    if tree is None:
        return
    for line in _error_lines(func, node.node, override, original):
        codes = tree.ignored_lines.get(line)
        if codes is None:
            tree.ignored_lines[line] = [OVERRIDE]
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


def _error_lines(func: FuncDef, node: Any, override: CallableType, original: CallableType) -> List[int]:
    """Where mypy's check_override reports: each incompatible argument's line
    when the two signatures line up argument for argument and the method is
    undecorated, else the def line."""
    if (
        isinstance(node, Decorator)
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
