"""Calls that run a function given to them: activation checkpointing and
functools.partial.

`torch.utils.checkpoint.checkpoint(fn, *args, **kwargs)`: torch leaves `fn`
untyped, so mypy types every checkpointed call as Any and nothing inside a
checkpointed block was checked.  The call runs `fn(*args, **kwargs)` (again
in the backward, with the same arguments), so its hook checks the arguments
against fn's declared types per axis and gives fn's result, as a direct
call of fn would (relation.call_through).  fn may be a function, a bound
method or an nn.Module (its forward); a torch op (`F.gelu`, `torch.relu`)
or a module whose forward is one (nn.GELU, a Linear subclass:
modules.table_forward) is typed by the op's rule.  A starred argument, or
an fn without one signature, leaves mypy's Any.

`functools.partial(fn, *args, **kwargs)`: mypy's own plugin checks the
bound arguments against fn's signature, comparing carriers by their strings
(a value that knows more axes than the parameter names was an [arg-type]
false alarm).  The hook checks them per axis instead and hands mypy's plugin
fn with its SPMD parameters relaxed to plain Tensor; arguments given later,
at the partial's call, meet those relaxed parameters (mypy's check only).
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from ..vocab.opnames import FUNCTION_NAMESPACES
from . import _mypy, modules, ops
from .guard import default_return, guarded
from .relation import call_through, wants_of


def _checkpoint(ctx: Any) -> _mypy.Type:
    found = _mypy.checkpointed(ctx)
    if found is None:
        return ctx.default_return_type
    fn, args = found
    fn_expr, fn_type = _mypy.formal_args(ctx, "function")[0]
    op = _torch_op(fn_expr)
    if op is not None:  # checkpoint(F.gelu, h): the op's rule on the arguments
        formals = [
            (name or (fn.arg_names[i] if i < len(fn.arg_names) else None) or f"arg{i}", expr, typ)
            for i, (name, expr, typ) in enumerate(args)
        ]
        return ops.shared_op_hook(*op)(_mypy.op_call(ctx.api, ctx.context, formals, fn.ret_type))
    if len(args) == 1 and args[0][0] is None:  # checkpoint(self.act, h) of a table module (nn.GELU)
        typed = modules.table_forward(ctx, fn_type, fn_expr, (args[0][1], args[0][2]))
        if typed is not None:
            return typed
    return call_through(ctx, fn, fn.name or "function", args)


def _torch_op(expr: _mypy.Expression) -> Optional[Tuple[str, str]]:
    """(name, namespace) of a torch function the plugin types as an op."""
    full = _mypy.fullname_of(expr) or ""
    for prefix, namespace in FUNCTION_NAMESPACES:
        if full.startswith(prefix) and "." not in full[len(prefix):]:
            return full[len(prefix):], namespace
    return None


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
