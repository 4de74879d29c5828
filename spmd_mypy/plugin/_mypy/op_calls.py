"""What the op hooks' quick lane reads of a call, in one pass (plugin/op_lane.py).

The lane runs for most op calls of annotated code, so what it needs of the
call -- is the result one tensor, and is every argument a carrier, a Python
number or something that holds no tensor -- is read here in one function,
without the general readers' steps (carriers.carried, argument_kind) for
each argument.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from mypy.types import Instance, LiteralType

from ...vocab.opclasses import SCALAR
from .carriers import CARRIER, TENSOR

_TENSORS = frozenset({TENSOR, CARRIER})
_NUMBERS = frozenset({"builtins.int", "builtins.float", "builtins.bool", "builtins.complex"})
# Arguments that hold no tensor and are no operand: a string, a dtype, ...
_INERT = frozenset({"builtins.str", "torch.dtype", "torch.memory_format", "torch.device", "torch.layout"})


def simple_operands(ctx: Any, receiver: bool, scalars: bool) -> Optional[Tuple[object, ...]]:
    """For a call whose result is one tensor and whose arguments are all
    carriers, Python numbers or inert values (not `out=`): its operands in
    the order the rules take them (the receiver first, then the arguments
    by parameter), each a carrier's canonical string or SCALAR (a number,
    an operand only when `scalars`); None for any other call, or one
    without a carrier operand, or with a PS/PSA one."""
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
    for names, types in zip(ctx.arg_names, ctx.arg_types):
        for name, typ in zip(names, types):
            if typ.__class__ is not Instance or name == "out":
                return None
            full = typ.type.fullname
            if full == CARRIER:
                text = _literal_text(typ)
                if text is None:
                    return None
                out.append(text)
                carriers = True
            elif full in _NUMBERS:
                if scalars:
                    out.append(SCALAR)
            elif full not in _INERT:
                return None
    return tuple(out) if carriers else None


def _literal_text(typ: Any) -> Optional[str]:
    """A carrier Instance's canonical string (None: not a carrier, SpmdTensor[Any],
    or a PS/PSA value, which the lane leaves to the general path)."""
    if typ.__class__ is not Instance or typ.type.fullname != CARRIER or not typ.args:
        return None
    arg = typ.args[0]
    if arg.__class__ is not LiteralType or not isinstance(arg.value, str) or "PS" in arg.value:
        return None
    return arg.value
