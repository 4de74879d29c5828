"""The plugin never takes mypy down: every hook runs behind `guarded`.

A hook that fails (an unexpected node, a mypy change) falls back to what
mypy would have done without the plugin: the default type or signature.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

T = TypeVar("T")

Hook = Callable[[Any], T]


def guarded(fn: Hook[T], fallback: Hook[T]) -> Hook[T]:
    def hook(ctx: Any) -> T:
        try:
            return fn(ctx)
        except Exception:
            return fallback(ctx)

    return hook


def default_return(ctx: Any) -> Any:
    return ctx.default_return_type


def default_signature(ctx: Any) -> Any:
    return ctx.default_signature


def default_attr(ctx: Any) -> Any:
    return ctx.default_attr_type


def nothing(ctx: Any) -> None:
    return None
