"""Calls that run a function given to them: activation checkpointing and
functools.partial.

`torch.utils.checkpoint.checkpoint(fn, *args, **kwargs)`: torch leaves `fn`
untyped, so mypy types every checkpointed call as Any and nothing inside a
checkpointed block was checked.  The call runs `fn(*args, **kwargs)` (again
in the backward, with the same arguments), so its hook checks the arguments
against fn's declared types per axis and gives fn's result, as a direct
call of fn would (relation.call_through).  fn may be a function, a bound
method or an nn.Module (its forward).  A starred argument, or an fn without
one signature, leaves mypy's Any.

`functools.partial(fn, *args, **kwargs)`: mypy's own plugin checks the
bound arguments against fn's signature, comparing carriers by their strings
(a value that knows more axes than the parameter names was an [arg-type]
false alarm).  The hook checks them per axis instead and hands mypy's plugin
fn with its SPMD parameters relaxed to plain Tensor; arguments given later,
at the partial's call, meet those relaxed parameters (mypy's check only).
"""

from __future__ import annotations

from typing import Any

from . import _mypy
from .guard import default_return, guarded
from .relation import call_through, wants_of


def _checkpoint(ctx: Any) -> _mypy.Type:
    found = _mypy.checkpointed(ctx)
    if found is None:
        return ctx.default_return_type
    fn, args = found
    return call_through(ctx, fn, fn.name or "function", args)


def _partial(ctx: Any) -> _mypy.Type:
    found = _mypy.partial_parts(ctx)
    if found is None:
        return _mypy.mypys_partial(ctx)
    fn, bound = found
    wants = [wants_of(t) for t in fn.arg_types]
    if all(w is None for w in wants):
        return _mypy.mypys_partial(ctx)
    call_through(ctx, fn, fn.name or "function", bound)  # the bound arguments, per axis
    relaxed = [_mypy.relax_tensors(ctx.api, t) if w is not None else t for w, t in zip(wants, fn.arg_types)]
    return _mypy.mypys_partial(ctx, _mypy.with_arg_types(fn, relaxed))


HOOKS = {
    _mypy.CHECKPOINT: guarded(_checkpoint, default_return),
    _mypy.PARTIAL: guarded(_partial, _mypy.mypys_partial),
}
