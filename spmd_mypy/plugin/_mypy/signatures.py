"""Building call signatures from declared types (spmd.trusted and
spmd.local_map, in the call form and the decorator form), and finding a
decorator's declaration on the function it decorates."""

from __future__ import annotations

from typing import List, Optional, Tuple

from mypy.nodes import ARG_POS, CallExpr, ClassDef, Decorator, RefExpr
from mypy.types import CallableType, Type

from .expressions import expr_text
from .trusted_classes import has_trusted_apply  # noqa: F401  (bound in _mypy by load("signatures"))
from .typecheck_hooks import keyword_arg  # noqa: F401  (bound in _mypy by load("signatures"))


def positional_signature(sig: CallableType, arg_types: List[Type], ret_type: Type) -> CallableType:
    """`sig` with exactly these positional parameters and this result, for a
    callee taking `*args` (an autograd Function's `.apply`)."""
    return sig.copy_modified(
        arg_types=arg_types,
        arg_kinds=[ARG_POS] * len(arg_types),
        arg_names=[None] * len(arg_types),
        ret_type=ret_type,
        is_ellipsis_args=False,  # from Callable[..., Any]: the parameters are these
    )


def takes_var_args(sig: CallableType) -> bool:
    return sig.is_var_arg or sig.is_kw_arg


def decorator_call(context: object, names: Tuple[str, ...]) -> Optional[CallExpr]:
    """The call of one of the functions `names` that made the decorator
    being applied: among a decorated function's decorators (the context
    mypy gives the decorator's `__call__`), or called at once
    (`spmd.trusted(in_types=...)(fn)`)."""
    if isinstance(context, CallExpr) and _calls(context.callee, names):
        return context.callee  # type: ignore[return-value]
    if not isinstance(context, Decorator):
        return None
    for d in context.decorators:
        if _calls(d, names):
            return d  # type: ignore[return-value]
    return None


def _calls(expr: object, names: Tuple[str, ...]) -> bool:
    return isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr) and expr.callee.fullname in names


def decorated_function(context: object) -> Tuple[str, bool]:
    """(the name, whether it is a method taking self or cls first) of the
    function a decorator is applied to: the decorated def, or the argument
    of a decorator called at once."""
    if isinstance(context, Decorator):
        func = context.func
        return func.name, bool(func.info) and not func.is_static
    args = getattr(context, "args", None)
    return (expr_text(args[0]) if args else "fn"), False


def decorated_class(context: object) -> Optional[str]:
    """The name of the class a class decorator is applied to (the context
    mypy gives its `__call__`), else None."""
    return context.name if isinstance(context, ClassDef) else None


def checked_class_name(api: object) -> Optional[str]:
    """The name of the class whose body (not a method's) the checker is in."""
    scope = getattr(api, "scope", None)
    info = scope.active_class() if scope is not None else None
    return getattr(info, "name", None)
