"""Calls of untyped library collectives (torch.distributed.nn.functional):
a call's result type swapped for typing, star arguments, tuples of tensors,
and the qualified name of an attribute such as `ReduceOp.SUM`.

A feature's submodule: plugin/dist_nn.py loads it with
`_mypy.load("collective_calls")`.
"""

from __future__ import annotations

from typing import Any, Optional

from mypy.nodes import ARG_STAR, ARG_STAR2, Expression, MemberExpr, RefExpr
from mypy.types import Type

__all__ = ["has_star_args", "member_fullname", "tensor_tuple", "with_default_return"]


def with_default_return(ctx: Any, typ: Type) -> Any:
    """The same call's context, with `typ` as the type mypy would give its
    result (an untyped callee's Any replaced by a Tensor, for the hooks that
    type a tensor result)."""
    return ctx._replace(default_return_type=typ)


def has_star_args(ctx: Any) -> bool:
    """Whether the call passes `*args` or `**kwargs` (its arguments cannot be
    bound to parameters by name)."""
    return any(k == ARG_STAR or k == ARG_STAR2 for kinds in ctx.arg_kinds for k in kinds)


def tensor_tuple(api: Any, item: Type) -> Type:
    """tuple[item, ...]: a tuple of tensors of unknown length."""
    return api.named_generic_type("builtins.tuple", [item])


def member_fullname(expr: Expression) -> Optional[str]:
    """The qualified name of a name or attribute chain: `ReduceOp.SUM` ->
    "torch._C._distributed_c10d.ReduceOp.SUM" (mypy leaves a class
    attribute's reference without a fullname); None when the chain does not
    start at a name mypy resolved."""
    if isinstance(expr, RefExpr) and expr.fullname:
        return expr.fullname
    if isinstance(expr, MemberExpr):
        base = member_fullname(expr.expr)
        return f"{base}.{expr.name}" if base is not None else None
    return None
