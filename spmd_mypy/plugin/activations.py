"""Calls of a value declared `spmd.Activation` (runtime/activation.py).

The declaration says the value is an elementwise nonlinear function of one
tensor; its call is typed by the op rule of such a function (the op tables'
`activation`: nonlinear per axis, pointwise in global code), as
`F.gelu(x)` is.  The rule's messages call the op "the activation"; here
they name the value called (`the activation self.activation_func on axis
'tp' ...`), which the op rule, shared by every such call, does not know.
A feature: imported when mypy first asks for its name.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from ..vocab.opnames import ACTIVATION, display_name
from . import _mypy, global_mode, ops
from .errors import CODES
from .guard import default_return, guarded

CALL = "spmd_mypy.runtime.activation.Activation.__call__"

# the call's operand is its argument, not the receiver (the activation itself)
_RULE = ops.op_hook(ACTIVATION, ACTIVATION, False, global_mode.refine_op)
_NAMED = display_name(ACTIVATION, ACTIVATION) + " "  # how the rule's messages begin


def _call(ctx: Any) -> _mypy.Type:
    mark = _mypy.error_mark(ctx.api)
    try:
        return _RULE(ctx)
    finally:
        callee = getattr(ctx.context, "callee", None)
        text = _mypy.expr_text(callee) if callee is not None else _mypy.UNRENDERED
        if text != _mypy.UNRENDERED:
            named = f"{_NAMED}{text} "
            _mypy.reword_since(mark, CODES, lambda m: named + m[len(_NAMED):] if m.startswith(_NAMED) else m)


METHOD_HOOKS: Dict[str, Callable[[Any], Any]] = {CALL: guarded(_call, default_return)}
