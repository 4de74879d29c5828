"""Python builtins that run tensor ops: `abs(x)` and `sum([loss, aux])`.

`abs(x)` calls x.__abs__, which torch binds by assignment (no hook runs):
it is typed by torch.abs's rule.

typeshed types `sum(xs)` as the join of the items' types (`| Literal[0]`),
and the join of two carriers of different SPMD types is a carrier of no
type, so `sum([p, r])` of a Partial and a Replicate value was of unknown
type and its error unreported.  A list, tuple or set display is summed as
Python does, `0 + items[0] + items[1] + ...`: the zero start adds nothing,
and the items are the operands of one add (linear in all of them), reported
with `sum(...)` as its name, its hint converting the items at fault.
Any other iterable keeps mypy's answer (the items' one type, or unknown).
"""

from __future__ import annotations

from typing import Any

from . import _mypy, ops
from .guard import default_return, guarded


def _builtin_sum(ctx: Any) -> _mypy.Type:
    args = _mypy.call_args(ctx)
    if len(args) != 1 or not _mypy.has_tensor(ctx.default_return_type):
        return ctx.default_return_type  # a start value, or the overload of numbers: mypy's answer
    items = _mypy.display_items(args[0][1])
    if not items:
        return ctx.default_return_type
    typed = [(item, _mypy.typed_before(ctx.api, item)) for item in items]
    if not all(t is not None and _mypy.is_tensor(t) for _, t in typed):
        return ctx.default_return_type
    if not any(_mypy.carried(t) is not None for _, t in typed):
        return ctx.default_return_type  # plain tensors: mypy's own answer, as without the plugin
    formals = [("input" if k == 0 else f"other{k}", item, typ) for k, (item, typ) in enumerate(typed)]
    with _mypy.errors_held(ctx.api) as held:  # one linear op of all the items: hints name them
        total = ops.shared_op_hook("add", "torch")(_mypy.op_call(ctx.api, ctx.context, formals, _mypy.plain_tensor(ctx.api)))
    # mypy tries sum's overloads with errors filtered, and an error there
    # would make it reject the overload: they go past the filters
    call = _mypy.expr_text(ctx.context)
    for message, code in held:
        if code is not None:
            _mypy.fail_past_filters(ctx.api, message.replace("torch.add on axis", f"{call} on axis", 1), ctx.context, code)
    return total


HOOKS = {
    "builtins.abs": ops.shared_op_hook("abs", "torch"),
    "builtins.sum": guarded(_builtin_sum, default_return),
}
