"""Messages in the user's vocabulary: rewording the errors a hook just reported.

mypy's message builder is compiled (no wrapping `fail`), and the plugin
reports through a dozen call sites, so the words are changed after the fact:
`error_mark` remembers how many errors the current file has before a hook
runs, `reword_since` rewrites the messages of the spmd-* errors added after
it, and those an active error watcher holds back (mypy checks a function
body under a watcher that hands its errors on later: the same objects).
Rewording is idempotent, so a held-back error seen twice reads the same.
Only runs when `vocabulary` is not the default (plugin/guard.py).
"""

from __future__ import annotations

from typing import Any, Callable, FrozenSet, Optional, Tuple

__all__ = ["error_mark", "reword_since"]

Mark = Optional[Tuple[Any, int]]


def _errors(api: Any) -> Any:
    """The Errors object behind a checker's or a type analyzer's api."""
    for owner in (api, getattr(api, "api", None), getattr(api, "msg", None)):
        errors = getattr(owner, "errors", None)
        if errors is not None and hasattr(errors, "error_info_map"):
            return errors
    return None


def error_mark(api: Any) -> Mark:
    """(Errors, count of the current file's errors) before a hook runs."""
    errors = _errors(api)
    if errors is None:
        return None
    return errors, len(errors.error_info_map.get(errors.file, ()))


def reword_since(mark: Mark, codes: FrozenSet[str], reword: Callable[[str], str]) -> None:
    """Reword the messages (code in `codes`) the current file got after `mark`."""
    if mark is None:
        return
    errors, count = mark
    # get_watchers() is public; a watcher's held errors are read from its
    # field because filtered_errors() asserts on a watcher that keeps none.
    held = [getattr(w, "_filtered", None) for w in errors.get_watchers()]
    for infos in (errors.error_info_map.get(errors.file, [])[count:], *held):
        for info in infos or ():
            if getattr(info.code, "code", None) in codes:
                info.message = reword(info.message)
