"""Typed tensors entering unannotated code, reported on request (issue 13, item 3).

With `report_untyped = true` in [spmd_mypy], each call where a tensor of
known SPMD type enters code that declares none -- an autograd Function's
`.apply` whose `forward` is unannotated, an nn.Module whose `forward` is,
a third-party or unannotated function -- is an spmd-untyped error at the
call, naming the callee and how to declare it.  Nothing is checked inside
such code and its result is unknown; the setting makes those holes visible
(`python -m spmd_mypy.coverage PATHS` lists them per file without it).

The hooks here wrap relation's call hooks; with the setting off they cost
one test per call.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from . import _mypy
from .carrier import spmd_of
from .config import Settings
from .errors import SPMD_UNTYPED

__all__ = ["configure", "declares_spmd", "enabled", "watch_function", "watch_forward"]

Hook = Callable[[Any], _mypy.Type]
_ON: List[bool] = [False]


def configure(settings: Settings) -> None:
    _ON[0] = settings.report_untyped


def enabled() -> bool:
    """Whether report_untyped is set (other features report their own holes)."""
    return _ON[0]


def _typed_argument(ctx: Any) -> Optional[str]:
    """The first argument of known SPMD type, as `x (tp=V)`; None if none."""
    for _, expr, typ in _mypy.call_args(ctx):
        for t in _mypy.element_types(typ) if not _mypy.is_tensor(typ) else [typ]:
            spmd = spmd_of(t)
            if spmd is not None and (spmd.axes or spmd.spec is not None):
                return f"{_mypy.expr_text(expr)} ({spmd})"
    return None


def declares_spmd(sig: Optional[_mypy.CallableType]) -> bool:
    """Whether a parameter or the result of `sig` holds an SPMD type."""
    if sig is None:
        return False
    types = list(sig.arg_types) + [sig.ret_type]
    return any(spmd_of(t) is not None for typ in types for t in _mypy.element_types(typ))


def _report(ctx: Any, what: str, how: str) -> None:
    found = _typed_argument(ctx)
    if found is None:
        return
    callee = getattr(ctx.context, "callee", None)
    name = _mypy.expr_text(callee) if callee is not None else "the callee"
    _mypy.fail(
        ctx.api,
        f"{found} enters {what} {name}, which declares no SPMD types: nothing is checked inside "
        f"it and its result is unknown. Hint: {how}",
        ctx.context,
        SPMD_UNTYPED,
    )


_TRUSTED = "or declare it a trusted boundary: spmd.trusted({0}, in_types=(Spmd(...), ...), out_types=Spmd(...))"


def watch_function(hook: Hook, declared: Callable[[Any], bool]) -> Hook:
    """A user/third-party function's call hook, reporting a typed tensor that
    enters a callee without SPMD annotations (`declared(ctx)` is False)."""

    def watched(ctx: Any) -> _mypy.Type:
        result = hook(ctx)
        if _ON[0] and not declared(ctx):
            callee = getattr(ctx.context, "callee", None)
            name = _mypy.expr_text(callee) if callee is not None else "fn"
            _report(ctx, "the function", "annotate its parameters and return with Annotated[Tensor, Spmd(...)], "
                    + _TRUSTED.format(name))
        return result

    return watched


def watch_forward(
    hook: Hook, forward: Callable[[Any], Optional[_mypy.CallableType]], what: str, trusted_hint: bool
) -> Hook:
    """Module calls and Fn.apply: report a typed tensor entering a `forward`
    without SPMD annotations (`forward(ctx)` gives its signature); with
    `trusted_hint`, the hint offers spmd.trusted(<callee>, ...) too."""

    def watched(ctx: Any) -> _mypy.Type:
        result = hook(ctx)
        if not _ON[0]:
            return result
        sig = forward(ctx)  # None: not a module / Function (any other callable object)
        if sig is not None and not declares_spmd(sig):
            callee = getattr(ctx.context, "callee", None)
            name = _mypy.expr_text(callee) if callee is not None else "fn"
            how = "annotate the parameters and return of its forward with Annotated[Tensor, Spmd(...)]"
            _report(ctx, what, how + (", " + _TRUSTED.format(name) if trusted_hint else ""))
        return result

    return watched
