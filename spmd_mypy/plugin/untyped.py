"""Calls of torch.special, torch.linalg, torch.fft and torch.unique, which torch leaves untyped.

torch assigns these modules' functions from an untyped extension module, so
mypy types every one of them as Any: a call runs no plugin hook, and its Any
result fits every annotation (an I value through torch.special.expit would
fit a P return).  In files that use spmd, the plugin wraps each call whose
callee names a function of opclasses.UNTYPED_FUNCTIONS in the identity stub
`spmd_phantom.untyped(...)` (_mypy.wrap_untyped_calls, chosen by
opclasses.untyped_function from the file's imports).
This module is that stub's hook: it types the real call from the op tables,
like any torch function.  The result is a tensor, or, for the torch.linalg
functions that return a named tuple, the stub's generic named tuple of the
same name (spmd_phantom.linalg_qr[...]) with every field of the result's
type.  A wrapped call of anything else keeps its own type.
"""

from __future__ import annotations

from typing import Any

from ..vocab.opclasses import UNTYPED_TUPLE_FLAGS, untyped_function
from . import _mypy, ops
from .guard import default_return, guarded


def _untyped(ctx: Any) -> _mypy.Type:
    default = ctx.default_return_type
    found = _mypy.untyped_call(ctx)
    if found is None or not _mypy.is_any(default):
        return default  # not a wrapped call, or torch typed it after all
    fullname, call = found
    name = untyped_function(fullname)
    if name is None:
        return default  # a local name that shadows torch, or another attribute
    result = ops.shared_op_hook(name, "torch")(_mypy.call_context(ctx.api, call, _mypy.plain_tensor(ctx.api)))
    if name in UNTYPED_TUPLE_FLAGS and _tuple_asked(call, UNTYPED_TUPLE_FLAGS[name]):
        return default  # checked above; a tuple the tables do not type
    named_tuple = _mypy.phantom_generic(ctx.api, name.replace(".", "_"), result)
    return named_tuple if named_tuple is not None else result


def _tuple_asked(call: Any, flags: tuple) -> bool:
    """Whether the call may ask for a tuple: an argument after the input
    written positionally, or a flag of `flags` not literally False."""
    parts = _mypy.call_parts(call)
    if parts is None:
        return True
    _, positional, keywords = parts
    return len(positional) > 1 or any(k in flags and not _mypy.is_false(e) for k, e in keywords)


untyped_hook = guarded(_untyped, default_return)
HOOKS = {_mypy.UNTYPED: untyped_hook}
