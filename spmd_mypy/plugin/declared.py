"""Returns and annotated assignments: values checked against a declared type.

mypy compares a returned or assigned carrier with the declared one by string
equality and has no plugin hook at either place.  So, before semantic
analysis, `_mypy.route_declared_values` rewrites `return e` and
`y: Annotated[...] = e` of a file that uses spmd into calls of two stub
functions, `spmd_phantom.returned(e)` / `spmd_phantom.assigned(e)`, whose
hooks are here.  A hook reads the declared type from the checker's type
context and compares each tensor the value holds with the declared tensor at
the same place, per axis, with the same relation as arguments
(`vocab.spec.mismatches`): unknown axes and unknown tensors fit.  It reports
spmd-return / spmd-assign with the fix, then gives mypy the declared type.
When the value does not line up with the declared type (a non-tensor part,
another shape), the value is typed again in the declared context and mypy
reports the mismatch itself, as without the plugin.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from . import _mypy, modules
from .carrier import spmd_of
from .errors import SPMD_ASSIGN, SPMD_RETURN
from .groups import declared_group
from .guard import guarded
from .rank_arguments import check_rank_value, declared_rank
from .relation import report_against, wants_of


def _check(ctx: Any, declared: Any, what: str, code: _mypy.ErrorCode) -> _mypy.Type:
    if not ctx.args or not ctx.args[0] or declared is None:
        return ctx.default_return_type
    expr, got = ctx.args[0][0], ctx.arg_types[0][0]
    group = declared_group(ctx.api, expr, got, declared)  # a ProcessGroup declared as an axis
    if group is not None:
        return group
    if declared_rank(declared):  # Annotated[int, Spmd(tp=V)]: any int of no other axis fits
        check_rank_value(ctx.api, expr, got, declared, what, code)
        return declared
    if not _mypy.has_tensor_deep(declared) and not _mypy.typeddict_of_tensors(declared):
        return _mypy.recheck(ctx.api, expr, declared)
    parts = _mypy.display_parts(expr, declared)
    if parts is not None:  # [a, b], (a, b), {"k": a}: each item on its own
        typed = [(item, _mypy.expression_type(ctx.api, item), want) for item, want in parts]
        found = [(item, typ, _mypy.tensor_pairs(typ, want)) for item, typ, want in typed]
    else:
        found = [(expr, got, _mypy.tensor_pairs(got, declared))]
    if any(pairs is None for _, _, pairs in found) or not any(pairs for _, _, pairs in found):
        return _mypy.recheck(ctx.api, expr, declared)
    for where, typ, pairs in found:
        branch = _mypy.union_alternatives(typ) is not None  # a value from branches: the fix is per branch
        inside = _mypy.container_kind(typ)  # a tuple or dict: no call wraps the whole of it
        for got_t, want_t in pairs or ():
            got_s, want_s = spmd_of(got_t), wants_of(want_t)
            if got_s is not None and want_s is not None:
                report_against(ctx.api, where, got_s, want_s, what, code, branch=branch, inside=inside)
    return declared


def _returned(ctx: Any) -> _mypy.Type:
    return _check(ctx, _mypy.declared_return(ctx.api), "Returned value", SPMD_RETURN)


def _assigned(ctx: Any) -> _mypy.Type:
    return _check(ctx, _mypy.type_context(ctx.api), "Assigned value", SPMD_ASSIGN)


def _reassigned(ctx: Any) -> _mypy.Type:
    """`ys = xs`, ys declared a list or dict of plain tensors and xs a name
    holding carriers that fits it as plain mypy sees it: xs's type with its
    carriers erased, the type plain mypy gives xs (and narrows ys to, an
    Optional included).  Anything else keeps its own type, and mypy checks
    it and narrows as usual."""
    value = _value(ctx)
    declared = _mypy.type_context(ctx.api)
    if (
        declared is not None
        and _mypy.plain_tensor_container(declared)
        and _mypy.holds_carriers_already(ctx.args[0][0])
        and _mypy.fits_as_plain(ctx.api, value, declared)
    ):
        return _mypy.erase_carriers(ctx.api, value)
    return value


def _keyword_item(ctx: Any) -> _mypy.Type:
    """`Batch(tokens=xs)`, rewritten `keyword_item(xs, Batch, "tokens")`
    (route_items), the callee a TypedDict's class: the value checked per
    axis against the item, as an assigned value is, when the item declares
    an SPMD type; a name relaxed as a re-assignment is where the item is a
    list of plain tensors.  Otherwise the value typed as without the
    rewrite: a name's own type, anything else typed again in mypy's context
    (the stub's parameter, `object`, gave it none)."""
    types, value = ctx.arg_types, ctx.args[0][0]
    if len(types) == 3 and types[1] and _mypy.builds_typeddict(types[1][0]):
        item = _mypy.type_context(ctx.api)
        if item is not None and _mypy.has_carrier_deep(item):
            key = _mypy.str_value(ctx.args[2][0]) if ctx.args[2] else None
            return _check(ctx, item, f'TypedDict item "{key}"', SPMD_ASSIGN)
        if _mypy.is_name(value):
            return _reassigned(ctx)
    if _mypy.is_name(value):
        return _value(ctx)
    return _mypy.recheck(ctx.api, value, _mypy.type_context(ctx.api))


def _value(ctx: Any) -> _mypy.Type:
    # On a failure mypy checks the value itself, as without the plugin.
    return ctx.arg_types[0][0] if ctx.arg_types and ctx.arg_types[0] else ctx.default_return_type


# A refinement of a declared-value hook (global mode's exact_declared): the
# hook and what the value is ("Returned value") -> the refined hook.
Refine = Callable[[Callable[[Any], _mypy.Type], str], Callable[[Any], _mypy.Type]]


def _fits_as_is(ctx: Any, declared: Optional[_mypy.Type]) -> bool:
    """Whether the value's type is the declared carrier itself, the common
    case: it fits per axis and, in global code, spec for spec, so there is
    nothing to check or report."""
    types = ctx.arg_types
    if not types or not types[0]:
        return False
    want = _mypy.carried(declared)
    return want is not None and _mypy.carried(types[0][0]) == want


def _returned_as_declared(ctx: Any) -> Optional[_mypy.Type]:
    declared = _mypy.declared_return(ctx.api)
    return declared if _fits_as_is(ctx, declared) else None


def _assigned_as_declared(ctx: Any) -> Optional[_mypy.Type]:
    declared = _mypy.type_context(ctx.api)
    return declared if _fits_as_is(ctx, declared) else None


def _forgiving(ctx: Any) -> None:
    """At a return: mypy checks a method's override after its body, so the
    carrier-only overrides of a forward are forgiven here (modules.py)."""
    modules.forgive_carrier_overrides(ctx.api)


def _first(
    quick: Callable[[Any], Optional[_mypy.Type]],
    hook: Callable[[Any], _mypy.Type],
    before: Optional[Callable[[Any], None]] = None,
) -> Callable[[Any], _mypy.Type]:
    """`quick`'s answer, else the full hook's (the checks and the global-mode
    refinement); `before` runs first, on both ways."""

    def first(ctx: Any) -> _mypy.Type:
        if before is not None:
            before(ctx)
        found = quick(ctx)
        return found if found is not None else hook(ctx)

    return guarded(first, _value)


def hooks(refine: Optional[Refine] = None) -> Dict[str, Callable[[Any], _mypy.Type]]:
    """The function hooks of the two stub functions the rewrite calls, by fullname.
    A value whose type is the declared carrier itself is answered first
    (_fits_as_is): about 60K instructions of checks a return saved."""
    table = {
        _mypy.RETURNED: (guarded(_returned, _value), "Returned value", _returned_as_declared, _forgiving),
        _mypy.ASSIGNED: (guarded(_assigned, _value), "Assigned value", _assigned_as_declared, None),
    }
    return {
        **{
            name: _first(quick, refine(hook, what) if refine is not None else hook, before)
            for name, (hook, what, quick, before) in table.items()
        },
        _mypy.REASSIGNED: guarded(_reassigned, _value),
        _mypy.KEYWORD_ITEM: guarded(_keyword_item, _value),
    }
