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
            if exact is None:
                continue
            place = unplaced(got, want, scope.has)
            message = (
                unplaced_message(f"Argument {i + 1}", want, *place, "expected")
                if place is not None
                else f"Argument {i + 1} is {exact[0]} where {exact[1]} is expected: in "
                f"global code the spec must match. Hint: "
                f"spmd.redistribute({_mypy.expr_text(expr)}, src={got!r}, dst={want!r})"
            )
            _mypy.fail(ctx.api, message, expr, SPMD_GLOBAL)


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
                place = unplaced(got, want, scope.has)
                message = (
                    unplaced_message(what, want, *place, "declared")
                    if place is not None
                    else f"{what} is {exact[0]} where {exact[1]} is declared: in global code the spec "
                    f"must match. Hint: spmd.redistribute({name}, src={got!r}, dst={want!r})"
                )
                _mypy.fail(ctx.api, message, ctx.context, SPMD_GLOBAL)
