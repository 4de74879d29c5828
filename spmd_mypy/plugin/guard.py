"""The plugin never takes mypy down, and never fails silently.

Every hook runs behind `guarded`.  A hook that raises (an unexpected node, a
mypy change) falls back to what mypy would have done without the plugin --
the default type or signature -- and the user sees one `spmd-internal` note
at the line saying that the check was skipped there.  Set the environment
variable SPMD_MYPY_STRICT=1 and the exception propagates instead (mypy then
stops with its internal-error report); the test suite runs that way, so a
fallback anywhere in it is a failing test.

`guarded` is also where the spmd-* errors of spmd_types' unchecked regions
are dropped (_mypy/region_errors.py), and where messages take the user's
vocabulary (`vocabulary = jax` in [spmd_mypy]: Reduced/Unreduced/Invariant/
Varying for R/P/I/V):
the spmd-* errors a hook reported are reworded when it returns
(vocab/aliases.py has the words, _mypy/reword.py the rewriting).  It is also
where an error found while checking one configuration of a configured
function gets that configuration's name (plugin/configurations.py).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, List, Optional, TypeVar

from ..vocab.aliases import DEFAULT_VOCABULARY, reword
from . import _mypy
from .errors import CODES, SPMD_INTERNAL

T = TypeVar("T")

Hook = Callable[[Any], T]

STRICT_ENV = "SPMD_MYPY_STRICT"


def strict_mode(environ: Any = os.environ) -> bool:
    """SPMD_MYPY_STRICT set to anything but "", "0", "false", "no"."""
    return environ.get(STRICT_ENV, "").strip().lower() not in ("", "0", "false", "no")


STRICT = strict_mode()


# The vocabulary messages are reworded into; None: the letters they are written in.
_VOCABULARY: List[Optional[str]] = [None]


def set_vocabulary(name: str) -> None:
    """The `vocabulary` setting (the plugin sets it when mypy loads it)."""
    _VOCABULARY[0] = None if name == DEFAULT_VOCABULARY else name
    _update_bare()


# Whether hooks run bare: no vocabulary to reword messages into, no
# configured function declared so far (flags are only ever added) and no
# unchecked region seen (spmd_types' no_typecheck bodies, whose spmd-*
# errors a watcher drops: _mypy/region_errors.py), the case of most
# projects, where a hook's errors need no mark (a hook call's cost).
_BARE = True


def _update_bare(_flag: Optional[str] = None) -> None:
    global _BARE
    _BARE = _VOCABULARY[0] is None and not _mypy.FLAG_NAMES and not _mypy.any_region()


_mypy.on_new_flag(_update_bare)
_mypy.on_first_region(_update_bare)


def _reworded(vocabulary: str) -> Callable[[str], str]:
    return lambda message: reword(message, vocabulary)


def guarded(fn: Hook[T], fallback: Hook[T]) -> Hook[T]:
    """`fn`, or on an exception `fallback` after reporting the skipped check."""

    def hook(ctx: Any) -> T:
        if _BARE:
            try:
                return fn(ctx)
            except Exception as exc:
                return _skipped(fn, fallback, ctx, exc)
        return _marked(fn, fallback, ctx)

    return hook


def _skipped(fn: Hook[T], fallback: Hook[T], ctx: Any, exc: Exception) -> T:
    """A hook that raised `exc`: re-raised in strict mode, else reported as a
    skipped check and answered by `fallback`."""
    if STRICT:
        raise exc
    report_skipped(ctx, fn, exc)
    return fallback(ctx)


def _marked(fn: Hook[T], fallback: Hook[T], ctx: Any) -> T:
    """guarded's call when messages may be reworded or named by a
    configuration, or dropped in an unchecked region."""
    api = getattr(ctx, "api", None)
    lines = _mypy.region_lines(api) if api is not None else None
    if lines is not None:
        with _mypy.region_errors_dropped(api, lines):
            return _reworded_call(fn, fallback, ctx, api)
    return _reworded_call(fn, fallback, ctx, api)


def _reworded_call(fn: Hook[T], fallback: Hook[T], ctx: Any, api: Any) -> T:
    vocabulary = _VOCABULARY[0]
    configured = bool(_mypy.FLAG_NAMES)  # a configured function exists
    mark = None if vocabulary is None and not configured else _mypy.error_mark(api)
    try:
        return fn(ctx)
    except Exception as exc:
        return _skipped(fn, fallback, ctx, exc)
    finally:
        if vocabulary is not None:
            _mypy.reword_since(mark, CODES, _reworded(vocabulary))
        if configured:
            _name_configuration(api, mark)


def _name_configuration(api: Any, mark: Any) -> None:
    """The errors a hook reported while a configured function is checked for
    one configuration: each names it, or goes when the configuration gives
    every axis it names one rank (plugin/configurations.py)."""
    found = _mypy.current_configuration(api) if mark is not None else None
    if found is not None:
        from ..vocab.configurations import in_configuration  # configured code only

        config, copy = found
        _mypy.configure_since(mark, CODES, lambda message: in_configuration(message, config), copy)


def skipped_text(fn: Any, exc: BaseException) -> str:
    where = f"{getattr(fn, '__module__', '?').rpartition('.')[2]}.{getattr(fn, '__qualname__', '?')}"
    return (
        f"{SPMD_INTERNAL.code}: spmd-mypy skipped its check here after an internal error in {where} "
        f"({type(exc).__name__}: {exc}); please report it with this line"
    )


def report_skipped(ctx: Any, fn: Any, exc: BaseException) -> None:
    """One `spmd-internal` note at the hook's line; on stderr where a hook has
    no line to put it on (the per-file hook)."""
    text = skipped_text(fn, exc)
    context: Optional[Any] = getattr(ctx, "context", None)
    if context is None or not _mypy.note(ctx.api, text, context, SPMD_INTERNAL):
        path = getattr(ctx, "path", None) or "?"
        print(f"{path}: note: {text}", file=sys.stderr)


def default_return(ctx: Any) -> Any:
    return ctx.default_return_type


def default_signature(ctx: Any) -> Any:
    return ctx.default_signature


def default_attr(ctx: Any) -> Any:
    return ctx.default_attr_type


def nothing(ctx: Any) -> None:
    return None
