"""Calls of a torch op through a value: `self.act = F.gelu`, then `self.act(x)`.

Megatron's MLP stores its activation (`self.activation_func =
config.activation_func`), so do nanotron's and HF-style modules, and a
function may bind one to a local (`act = F.silu`).  mypy types such a call
with the callable type of the op itself, which names its definition, but
asks the plugin's hooks by the callee's own name: the short name of a value
(`act`), or `module.Class.act` for an attribute.  The hook of that name is
the user-call hook; through_value puts before it a look at the definition
of the callee's type: where it is a torch function, that function's own hook
types the call, as if `F.gelu(x)` were written, so `self.act(p)` of a P
value is the same error.  A callee typed `Callable[[Tensor], Tensor]` names
no definition and stays the user-call hook's (its result an unknown tensor).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from . import _mypy
from .guard import default_return, guarded

Hook = Callable[[Any], Any]

# a torch function's fullname -> its hook (built once), for calls through values
_BY_DEFINITION: Dict[str, Hook] = {}


def through_value(fallback: Hook, build: Callable[[str], Optional[Hook]], torch_prefixes: Tuple[str, ...]) -> Hook:
    """`fallback` (the user-call hook of the callee's name), unless the
    callee's type is a torch function's: then that function's hook, made by
    `build` from its fullname."""

    def hook(ctx: Any) -> Any:
        full = _mypy.callee_definition(ctx)
        if full is None or not full.startswith(torch_prefixes):
            return fallback(ctx)
        op = _BY_DEFINITION.get(full)
        if op is None:
            op = _BY_DEFINITION[full] = build(full) or fallback
        return op(ctx)

    return guarded(hook, default_return)  # the look at the callee's type too
