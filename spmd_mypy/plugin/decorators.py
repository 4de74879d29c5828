"""torch's signature-keeping decorators (vocab/torch_decorators.py): typed as
giving back the function they decorate.

torch leaves `custom_fwd`, `custom_bwd`, `torch.autocast(...)` as a
decorator, `torch.compiler.disable` and the like untyped, so mypy typed a
function or forward decorated with one as Any: the module's calls, the
autograd Function's `.apply` and the function's calls went unchecked.  The
decorator applied to a function gives that function's type; called to make
a decorator (`custom_fwd(device_type="cuda")`), it gives `def [F] (F) -> F`,
which mypy then applies to the function as any other decorator.  In a file
that never mentions spmd, mypy's Any stays (plain mypy's verdicts there).
"""

from __future__ import annotations

from typing import Any, Dict

from ..vocab.torch_decorators import CALL_PARAMETER, CALLABLE_CLASSES, FUNCTIONS
from . import _mypy
from .callsite import in_spmd_file
from .guard import Hook, default_return, guarded


def _keeping(formal: str) -> Hook:
    def hook(ctx: Any) -> _mypy.Type:
        if not in_spmd_file(ctx):
            return ctx.default_return_type
        given = _mypy.given_function(ctx, formal)
        return given if given is not None else _mypy.identity_decorator(ctx.api)

    return guarded(hook, default_return)


def _applied(ctx: Any) -> _mypy.Type:
    if not in_spmd_file(ctx):
        return ctx.default_return_type
    given = _mypy.given_function(ctx, CALL_PARAMETER)
    return given if given is not None else ctx.default_return_type


FUNCTION_HOOKS: Dict[str, Hook] = {name: _keeping(formal) for name, formal in FUNCTIONS.items()}
METHOD_HOOKS: Dict[str, Hook] = {f"{cls}.__call__": guarded(_applied, default_return) for cls in CALLABLE_CLASSES}
