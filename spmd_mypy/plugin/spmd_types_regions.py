"""spmd_types' unchecked regions and trusted boundaries, typed with our rules.

The rewrite pass (_mypy/spmd_types_regions.py) marks what the runtime checker
does not check and writes the declared types into the checked tree; the hooks
here type what it wrote:

  spmd_types._spmd_unchecked(e)   a value computed in a no_typecheck region:
                                  its tensors are of unknown SPMD type
  spmd_types._spmd_declared(e, T) a boundary's declared type T (local_map's
                                  in/out types, a typecheck hook's asserts
                                  copied into forward): checked against e,
                                  then e has type T
  spmd_types.no_typecheck()       with report_untyped, an spmd-untyped error:
                                  the region is a hole in the checking
  @local_map(...) / @no_typecheck(in_types=, out_types=)
                                  the decorated function is retyped by its
                                  declared types (the decorator's __call__)
  Fn.apply                        for an autograd Function with a
                                  typecheck_forward or spmd_typecheck
                                  staticmethod: the arguments are checked
                                  against the types it asserts on its
                                  parameters, the result has the type it
                                  asserts on the output (read statically,
                                  get_local_type arithmetic included); an
                                  spmd_typecheck(*, ...) returning the output
                                  types (spmd_types.rules) is evaluated on the
                                  call's arguments (spmd_types_rules.py)
  spmd_types._spmd_rule_result(e, "Fn", x=x, ...)
                                  forward's return e, checked against that
                                  hook evaluated on forward's parameters
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ..vocab.spec import Spmd
from . import _mypy, untyped_regions
from . import spmd_types_rules as rules
from .callsite import one_arg
from .carrier import carrier, spmd_of
from .comms import asserted_type
from .errors import SPMD_ARG, SPMD_UNTYPED
from .guard import default_return, guarded
from .spmd_types import QUIET, Env, asserted_of, without_gradient

_mypy.load("spmd_types_regions", "spmd_types_rules")  # the mypy side of this feature (_mypy/__init__.py)

MODULE = "spmd_types."
_BOUNDARIES = (MODULE + "local_map", MODULE + "no_typecheck")

Hook = Callable[[Any], _mypy.Type]


def _unknown(ctx: Any, default: Optional[_mypy.Type] = None) -> _mypy.Type:
    unknown = _mypy.unknown_carrier(ctx.api)
    default = ctx.default_return_type if default is None else default
    return unknown if _mypy.is_any(default) else _mypy.replace_tensors(default, unknown)


def _apply_default(ctx: Any) -> _mypy.Type:
    """What `Fn.apply(...)` returns before its tensors are typed: torch types
    apply as Any, so a forward that declares a tuple of outputs gives that
    tuple (each output typed), else the default."""
    default = ctx.default_return_type
    forward = _mypy.autograd_function_forward(ctx) if _mypy.is_any(default) else None
    if forward is not None and _mypy.tuple_items(forward.ret_type) is not None:
        return forward.ret_type  # several outputs: typed per forward's tuple
    return default


def _read(ctx: Any, exprs: List[_mypy.Expression], label: str, env: Optional[Env] = None,
          quiet: bool = False) -> Optional[Spmd]:
    QUIET[0] = quiet
    try:
        return asserted_of(ctx, exprs, label, env)
    finally:
        QUIET[0] = False


def _declared(ctx: Any) -> _mypy.Type:
    """`_spmd_declared(e, *types, where=..., forward=...)`: e checked against the
    declared type and typed by it (a forward's values carry no gradient)."""
    x = one_arg(ctx, "tensor")
    if x is None or not _mypy.is_tensor(x[1]):
        return ctx.default_return_type
    where_arg, forward_arg = one_arg(ctx, "where"), one_arg(ctx, "forward")
    where = (_mypy.str_value(where_arg[0]) if where_arg else None) or "a declared boundary"
    forward = forward_arg is not None and _mypy.is_true(forward_arg[0])
    if forward:
        _mypy.remember_hooks(ctx.api)  # its module's bodies are freed once checked
    given = _mypy.formal_args(ctx, "types") + _mypy.formal_args(ctx, "partition_spec")
    declared = _read(ctx, [e for e, _ in given], where, quiet=True)
    if declared is None:
        return _unknown(ctx)
    if forward or without_gradient(x[1], spmd_of(x[1])):
        declared = Spmd.of(declared.axes, declared.spec, True, declared.rest)
    return asserted_type(ctx, x, declared, label=where)


def _no_typecheck(ctx: Any) -> _mypy.Type:
    """`spmd.no_typecheck()`: with report_untyped, the region it opens is reported."""
    if untyped_regions.enabled() and not _mypy.call_args(ctx):
        _mypy.fail(
            ctx.api,
            "spmd_types.no_typecheck(): nothing in this region is checked, and each value assigned in it "
            "is of unknown SPMD type after it. Hint: state the types that leave it with "
            "spmd.assert_type(x, {...}) after the region, or make it a trusted boundary with declared types: "
            "@spmd.no_typecheck(in_types=(...), out_types=...)",
            ctx.context,
            SPMD_UNTYPED,
        )
    return ctx.default_return_type


# -- decorated boundaries ----------------------------------------------------------


def _leaf(ctx: Any, expr: _mypy.Expression, label: str) -> Optional[Spmd]:
    """One leaf of in_types/out_types: a dict, a PartitionSpec, (dict, spec), None."""
    if _mypy.none_literal(expr):
        return None
    items = _mypy.tuple_display(expr)
    return _read(ctx, items if items is not None and len(items) == 2 else [expr], label)


def _boundary(ctx: Any) -> _mypy.Type:
    """`@spmd.local_map(in_types=..., out_types=...)` (and no_typecheck with
    types) on a function: its signature with the declared types."""
    default = ctx.default_return_type
    call = _mypy.decorator_call(ctx.context, _BOUNDARIES)
    sig = _mypy.callable_of(ctx.arg_types[0][0]) if ctx.arg_types and ctx.arg_types[0] else None
    if call is None or sig is None:
        return default
    label = f"spmd_types.{_mypy.fullname_of(call.callee).rpartition('.')[2]}"  # type: ignore[union-attr]
    arg_types = list(sig.arg_types)
    in_types = _mypy.keyword_arg(call, "in_types")
    for i, leaf in enumerate(_mypy.tuple_display(in_types) or [] if in_types is not None else []):
        t = _leaf(ctx, leaf, label + " in_types")
        if t is not None and i < len(arg_types):
            arg_types[i] = _mypy.replace_tensors(arg_types[i], carrier(ctx.api, t))
    ret = sig.ret_type
    out_types = _mypy.keyword_arg(call, "out_types")
    if out_types is not None:
        items, leaves = _mypy.tuple_items(ret), _mypy.tuple_display(out_types)
        if items is not None and leaves is not None and len(items) == len(leaves):
            typed = [_leaf(ctx, leaf, label + " out_types") for leaf in leaves]
            ret = _mypy.with_tuple_items(
                ret, [_mypy.replace_tensors(it, carrier(ctx.api, t)) if t else it for it, t in zip(items, typed)]
            )
        else:
            t = _leaf(ctx, out_types, label + " out_types")
            ret = _mypy.replace_tensors(ret, carrier(ctx.api, t) if t else _mypy.unknown_carrier(ctx.api))
            if _mypy.is_any(ret) and t is not None:
                ret = carrier(ctx.api, t)
    return _mypy.with_signature(sig, arg_types, ret)


# -- autograd Functions with a typecheck hook ----------------------------------------


def _apply(ctx: Any, found: Any) -> _mypy.Type:
    cls, hook, asserted, forward_params, func = found
    steps = _mypy.rule_steps(func) if hook == "spmd_typecheck" and asserted.keyword_only else None
    if steps is not None:
        return _rules_apply(ctx, cls, hook, steps, forward_params)
    if asserted.unread:
        _mypy.note(
            ctx.api,
            f"unchecked: {cls}.apply: the body of {cls}.{hook} is not held by mypy here (its module "
            f"was loaded from mypy's cache, which keeps no function bodies), so its asserts are not read; "
            f"the result is of unknown type",
            ctx.context,
            SPMD_ARG,
        )
        return _unknown(ctx, _apply_default(ctx))
    names = forward_params if asserted.keyword_only else asserted.parameters
    env: Env = {}
    for (name, expr, typ), param in zip(_mypy.call_args(ctx), names):
        if name is None:
            env[param] = (expr, typ)
    for param in names:
        types = asserted.inputs.get(param)
        if types is None or param not in env:
            continue
        label = f"{cls}.apply: {cls}.{hook} asserts on {param}"
        want = _read(ctx, types, label, env, quiet=True)
        if want is None or not _mypy.is_tensor(env[param][1]):
            continue
        if without_gradient(env[param][1], spmd_of(env[param][1])):
            want = Spmd.of(want.axes, want.spec, True, want.rest)
        env[param] = (env[param][0], asserted_type(ctx, env[param], want, label=label))
    out: Optional[Spmd] = None
    if asserted.output is not None:
        out = _read(ctx, asserted.output, f"{cls}.apply: {cls}.{hook}'s output", env, quiet=True)
    elif asserted.like is not None and asserted.like[0] in env:
        base = spmd_of(env[asserted.like[0]][1])
        over = _read(ctx, [asserted.like[1]], f"{cls}.{hook}", env, quiet=True) if asserted.like[1] else None
        if base is not None:
            merged: Dict[str, Any] = dict(base.axes)
            merged.update(over.axes if over is not None else {})
            out = Spmd.of(merged, None, base.nograd, base.rest)
    inside = all(_mypy.expr_text(expr) == param for param, (expr, _) in env.items())  # the hook's own call
    default = _apply_default(ctx)
    if out is None and inside:
        return _unknown(ctx, default)
    if out is None:
        _mypy.note(
            ctx.api,
            f"unchecked: {cls}.apply: the output type {cls}.{hook} states is not read statically (an "
            f"assert_type on the result with a dict, a type or a PartitionSpec is); the result is of unknown type",
            ctx.context,
            SPMD_ARG,
        )
        return _unknown(ctx, default)
    result = carrier(ctx.api, out)
    return result if _mypy.is_any(default) else _mypy.replace_tensors(default, result)


def _rules_apply(ctx: Any, cls: str, hook: str, steps: List[Any], forward_params: List[str]) -> _mypy.Type:
    """`Fn.apply(...)` of an spmd_typecheck(*, ...) that returns the output
    types: the hook evaluated on the call's arguments (spmd_types_rules)."""
    env: Env = {}
    positional = iter(forward_params)
    for name, expr, typ in _mypy.call_args(ctx):
        param = name if name is not None else next(positional, None)
        if param is not None:
            env[param] = (expr, typ)
    value = rules.Evaluation(ctx, f"{cls}.apply: {cls}.{hook}", env).run(steps)
    default = _apply_default(ctx)
    typed = rules.output_type(ctx, value, default)
    if typed is None:
        _mypy.note(
            ctx.api,
            f"unchecked: {cls}.apply: the output type {cls}.{hook} returns is not read statically (a return "
            f"of spmd_types.rules calls, assert_type and None tests is); the result is of unknown type",
            ctx.context,
            SPMD_ARG,
        )
        return _unknown(ctx, default)
    return typed


def _rule_result(ctx: Any) -> _mypy.Type:
    """forward's `return e`, rewritten `_spmd_rule_result(e, "Fn", x=x, ...)`: e
    checked against Fn.spmd_typecheck evaluated on forward's parameters."""
    x, cls_arg = one_arg(ctx, "tensor"), one_arg(ctx, "cls")
    cls = _mypy.str_value(cls_arg[0]) if cls_arg is not None else None
    info = _mypy.class_in_file(ctx.api, cls) if cls is not None else None
    _mypy.remember_hooks(ctx.api)  # its module's bodies are freed once checked
    steps = _mypy.rule_steps(_mypy.hook_function(info, "spmd_typecheck")) if info is not None else None
    if x is None or cls is None or steps is None:
        return ctx.default_return_type
    items = _mypy.tuple_items(x[1])
    if all(spmd_of(t) is None for t in (items if items is not None else [x[1]])):
        return x[1]  # nothing known to check (a raw collective wrote it, an unannotated input)
    env: Env = {name: (expr, typ) for name, expr, typ in _mypy.call_args(ctx) if name not in (None, "tensor", "cls")}
    value = rules.Evaluation(ctx, f"{cls}.forward", env, forward=True).run(steps)
    pairs = [(x, value)]
    if isinstance(value, tuple) and items is not None and len(items) == len(value):
        shown = _mypy.tuple_display(x[0]) or [x[0]] * len(items)
        pairs = list(zip(zip(shown, items), value))
    label = f"{cls}.forward's result (spmd_typecheck)"
    for (expr, typ), want in pairs:
        if isinstance(want, Spmd) and _mypy.is_tensor(typ):
            asserted_type(ctx, (expr, typ), Spmd.of(want.axes, want.spec, True, want.rest), label=label)
    return x[1]


def apply_hook(fallback: Hook) -> Hook:
    """`Fn.apply(...)`: typed by Fn's typecheck hook if it has one, else `fallback`."""

    def hook(ctx: Any) -> _mypy.Type:
        found = _mypy.typecheck_hooks_of(ctx.type)
        return fallback(ctx) if found is None else _apply(ctx, found)

    return guarded(hook, default_return)


def forward_unless_hooked(forward: Callable[[Any], Optional[_mypy.CallableType]]) -> Callable[[Any], Any]:
    """report_untyped's view of `Fn.apply`: a Function with a typecheck hook
    declares its types there (None: nothing to report)."""
    return lambda ctx: None if _mypy.typecheck_hooks_of(ctx.type) is not None else forward(ctx)


HOOKS: Dict[str, Hook] = {
    MODULE + "_spmd_unchecked": guarded(_unknown, default_return),
    MODULE + "_spmd_declared": guarded(_declared, default_return),
    MODULE + "no_typecheck": guarded(_no_typecheck, default_return),
    MODULE + "_spmd_rule_result": guarded(_rule_result, default_return),
}
METHOD_HOOKS: Dict[str, Hook] = {
    MODULE + "_Boundary.__call__": guarded(_boundary, default_return),
}
