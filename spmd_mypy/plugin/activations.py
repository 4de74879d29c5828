"""Calls of a value declared `spmd.Activation` (runtime/activation.py).

The declaration says the value is an elementwise nonlinear function of one
tensor; its call is typed by the op rule of such a function (the op tables'
`activation`: nonlinear per axis, pointwise in global code), as
`F.gelu(x)` is, and its messages name it "the activation".  A feature:
imported when mypy first asks for its name.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from ..vocab.opnames import ACTIVATION
from . import global_mode, ops

CALL = "spmd_mypy.runtime.activation.Activation.__call__"

METHOD_HOOKS: Dict[str, Callable[[Any], Any]] = {
    # the call's operand is its argument, not the receiver (the activation itself)
    CALL: ops.op_hook(ACTIVATION, ACTIVATION, False, global_mode.refine_op),
}
