"""Activation checkpointing: `torch.utils.checkpoint.checkpoint(fn, *args, **kwargs)`.

torch leaves `fn` untyped, so mypy types every checkpointed call as Any and
nothing inside a checkpointed block was checked.  The call runs
`fn(*args, **kwargs)` (again in the backward, with the same arguments), so
its hook checks the arguments against fn's declared types per axis and gives
fn's result, as a direct call of fn would (relation.call_through).  fn may be
a function, a bound method or an nn.Module (its forward).  A starred
argument, or an fn without one signature, leaves mypy's Any.
"""

from __future__ import annotations

from typing import Any

from . import _mypy
from .guard import default_return, guarded
from .relation import call_through


def _checkpoint(ctx: Any) -> _mypy.Type:
    found = _mypy.checkpointed(ctx)
    if found is None:
        return ctx.default_return_type
    fn, args = found
    return call_through(ctx, fn, fn.name or "function", args)


checkpoint_hook = guarded(_checkpoint, default_return)

HOOKS = {_mypy.CHECKPOINT: checkpoint_hook}
