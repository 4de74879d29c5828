"""Exact specs at arguments, returns and annotated assignments in global code.

The per-axis check (mismatches) lets S(i) stand for S(j) and V: locally all
are per-rank pieces.  In global code the dim counts, so these hooks add the
exact comparison (global_mode.spec_mismatch: spec against spec, or the S
dims of each global axis where a side is in per-axis form) around
relation's argument hook and declared.py's return / assignment hooks."""

from __future__ import annotations

from typing import Any, Callable

from ..vocab.spec import mismatches
from . import _mypy, relation
from .carrier import spmd_of
from .errors import SPMD_GLOBAL
from .global_mode import scope_of, spec_mismatch
from .global_per_axis import unplaced, unplaced_message
from .guard import STRICT, guarded, nothing, report_skipped


def exact_arguments(inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Wrap a user-function argument hook (relation.argument_hook): in global
    code, an argument must match its declared type's spec exactly, or its S
    dims where a side is in per-axis form (the per-axis check lets S(i)
    stand for S(j))."""

    check = guarded(_exact_arguments, nothing)

    def hook(ctx: Any) -> Any:
        check(ctx)
        return inner(ctx)

    return hook


def _exact_arguments(ctx: Any) -> None:
    sig = relation.pending_signature(ctx)
    scope = scope_of(ctx) if sig is not None else None
    if scope is None or sig is None:
        return
    for i, formal in enumerate(sig.arg_types):
        want = spmd_of(formal)
        if want is None or i >= len(ctx.args):
            continue
        for expr, typ in zip(ctx.args[i], ctx.arg_types[i]):
            got = spmd_of(typ)
            if got is None or mismatches(got, want):
                continue
            exact = spec_mismatch(got, want, scope)
            if exact is not None:
                message = _mismatch(f"Argument {i + 1}", "expected", _mypy.expr_text(expr), got, want, exact, scope)
                _mypy.fail(ctx.api, message, expr, SPMD_GLOBAL)


def _mismatch(what: str, verb: str, name: str, got: Any, want: Any, exact: Any, scope: Any) -> str:
    """The error of a value (`name`) whose spec or dims differ from those
    declared: a redistribute fixes it, unless it is a per-axis V that names
    no dim (global_per_axis.unplaced)."""
    place = unplaced(got, want, scope.has)
    if place is not None:
        return unplaced_message(what, want, *place, verb)
    return (
        f"{what} is {exact[0]} where {exact[1]} is {verb}: in global code the spec must match. "
        f"Hint: spmd.redistribute({name}, src={got!r}, dst={want!r})"
    )


def exact_declared(inner: Callable[[Any], Any], what: str) -> Callable[[Any], Any]:
    """Wrap declared.py's return / assignment hook the same way."""

    def hook(ctx: Any) -> Any:
        declared = inner(ctx)
        try:  # as guarded() would, without building a wrapper per call
            _exact_declared(ctx, declared, what)
        except Exception as exc:
            if STRICT:
                raise
            report_skipped(ctx, _exact_declared, exc)
        return declared

    return hook


def _exact_declared(ctx: Any, declared: Any, what: str) -> None:
    scope = scope_of(ctx)
    if scope is not None and ctx.arg_types and ctx.arg_types[0]:
        got, want = spmd_of(ctx.arg_types[0][0]), spmd_of(declared)
        if got is not None and want is not None and not mismatches(got, want):
            exact = spec_mismatch(got, want, scope)
            if exact is not None:
                value = ctx.args[0][0] if ctx.args and ctx.args[0] else None
                name = _mypy.expr_text(value) if value is not None else "x"
                _mypy.fail(ctx.api, _mismatch(what, "declared", name, got, want, exact, scope), ctx.context, SPMD_GLOBAL)
