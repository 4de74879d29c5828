"""spmd.local_map(fn, in_types=..., out_types=...): a local region with declared types;
spmd.trusted(fn, in_types=..., out_types=...): a trusted boundary (nothing of fn checked).
Each also as a decorator, `@spmd.local_map(in_types=..., out_types=...)` /
`@spmd.trusted(...)` above a def: the hook of the decorator's __call__
retypes the function it decorates the same way (a method's self is not
counted in in_types).

fn's declared parameters are checked against in_types (each parameter sees
the local view of its in_types entry) and its declared results against
out_types, per axis; the call's type is fn's signature retyped by them, so
the caller sees in_types' and out_types' types (a spec form in global code).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from ..vocab.spec import Spmd, mismatches
from . import _mypy
from .annotations import AnnotationError
from .callsite import one_arg
from .carrier import carrier, spmd_of
from .errors import SPMD_ANNOTATION, SPMD_ARG, SPMD_UNTYPED
from .global_mode import GLOBAL_OPS, decode_spmd
from .guard import default_return, guarded

_mypy.load("signatures")  # the mypy side of this feature (_mypy/__init__.py)

_LOCAL_MAP = GLOBAL_OPS + "local_map"
_TRUSTED = "spmd_mypy.runtime.trusted.trusted"


class _Declared(NamedTuple):
    """What a boundary declaration says: the function it retypes (its
    signature and how messages name it), the in_types= and out_types=
    expressions, and how many leading parameters the declaration skips (a
    decorated method's self)."""

    sig: _mypy.CallableType
    name: str
    in_types: Optional[_mypy.Expression]
    out_types: Optional[_mypy.Expression]
    skip: int
    context: _mypy.Context  # where its errors go: the call, or the decorator


def _types_arg(ctx: Any, expr: Optional[_mypy.Expression]) -> Tuple[bool, List[Optional[Spmd]], bool]:
    """(given, the Spmd per item, whether it was a tuple) of in_types= / out_types=."""
    if expr is None:
        return False, [], False
    items = _mypy.display_items(expr)
    exprs = items if items is not None else [expr]
    out: List[Optional[Spmd]] = []
    for e in exprs:
        if _mypy.literal_value(e) is None:
            out.append(None)
        else:
            out.append(decode_spmd(ctx, e))
    return True, out, items is not None


def _called(ctx: Any) -> Optional[_Declared]:
    """The declaration of the call form, `spmd.local_map(fn, in_types=..., out_types=...)`."""
    fn = one_arg(ctx, "fn")
    sig = _mypy.callable_of(fn[1]) if fn is not None else None
    if fn is None or sig is None:
        return None
    return _Declared(sig, _mypy.expr_text(fn[0]), *_types_given(ctx), 0, ctx.context)


def _types_given(ctx: Any) -> Tuple[Optional[_mypy.Expression], Optional[_mypy.Expression]]:
    """The in_types= and out_types= arguments of the call."""
    given = [one_arg(ctx, name) for name in ("in_types", "out_types")]
    return given[0][0] if given[0] else None, given[1][0] if given[1] else None


def _decorating(name: str, what: str) -> Callable[[Any], Optional[_Declared]]:
    """The declaration of the decorator form, `@spmd.<what>(in_types=...,
    out_types=...)` above a def (ctx is the __call__ of what the call of
    `name` without fn returns, on the def); on a class, a note instead."""

    def found(ctx: Any) -> Optional[_Declared]:
        if _on_class(ctx, what):
            return None
        call = _mypy.decorator_call(ctx.context, (name,))
        sig = _mypy.callable_of(ctx.arg_types[0][0]) if ctx.arg_types and ctx.arg_types[0] else None
        if call is None or sig is None:
            return None
        function, method = _mypy.decorated_function(ctx.context)
        in_types, out_types = (_mypy.keyword_arg(call, k) for k in ("in_types", "out_types"))
        return _Declared(sig, function, in_types, out_types, 1 if method else 0, call)

    return found


def _on_class(ctx: Any, what: str) -> bool:
    """Whether the decorator is applied to a class.  `@spmd.trusted(...)`
    there types the class's apply through the statement the rewrite added
    (_applying); any other form leaves the class as it is for the checker,
    and a note says so."""
    cls = _mypy.decorated_class(ctx.context)
    if cls is None:
        return False
    if what == "trusted" and _mypy.has_trusted_apply(ctx.context):
        return True
    _mypy.note(
        ctx.api,
        f"unchecked: @spmd.{what}(...) on the class {cls} does not retype {cls}.apply for the checker; "
        f"declare the call form instead: spmd.{what}({cls}.apply, in_types=..., out_types=...)",
        ctx.context,
        SPMD_UNTYPED,
    )
    return True


def _applying(ctx: Any) -> Optional[_Declared]:
    """The declaration of a class decorated `@spmd.trusted(in_types=...,
    out_types=...)` (an autograd Function), moved by the rewrite to the end
    of its body: `apply = trusted_apply(<decorator>, in_types=...,
    out_types=...)` (_mypy/trusted_classes.py).  apply is typed from
    Callable[..., Any] as the call form types `Fn.apply`; a decorator that is
    not spmd's trusted leaves it that."""
    decorator = ctx.args[0][0] if ctx.args and ctx.args[0] else None
    sig = _mypy.callable_of(ctx.default_return_type)
    if decorator is None or sig is None or _mypy.fullname_of(decorator) != _TRUSTED:
        return None
    cls = _mypy.checked_class_name(ctx.api) or "Function"
    return _Declared(sig, f"{cls}.apply", *_types_given(ctx), 0, ctx.context)


def _boundary(declaration: Callable[[Any], Optional[_Declared]], check: bool) -> Callable[[Any], _mypy.Type]:
    """The hook of one form of a declaration: local_map's (`check`: fn's own
    types checked against the declared ones) or trusted's (nothing of fn
    checked)."""

    def hook(ctx: Any) -> _mypy.Type:
        declared = declaration(ctx)
        return ctx.default_return_type if declared is None else _retyped(ctx, declared, check)

    return hook


def _retyped(ctx: Any, declared: _Declared, check: bool) -> _mypy.Type:
    """The declared function's signature retyped by in_types/out_types; with
    `check`, its own declared parameters and results are checked against
    them (local_map)."""
    default = ctx.default_return_type
    sig, skip = declared.sig, declared.skip
    try:
        has_in, ins, _ = _types_arg(ctx, declared.in_types)
        has_out, outs, out_tuple = _types_arg(ctx, declared.out_types)
    except AnnotationError as e:
        ctx.api.fail(f"Malformed SPMD annotation: {e}", declared.context, code=SPMD_ANNOTATION)
        return default
    arg_types = list(sig.arg_types)
    if not check and has_in and _mypy.takes_var_args(sig) and sig.arg_types and not skip:
        # Fn.apply(*args: Any) -> Any: one positional parameter per in_types
        # entry (a tensor, or the var-arg's type for None), a tensor result
        tensor, rest = _mypy.plain_tensor(ctx.api), sig.arg_types[0]
        arg_types = [tensor if t is not None else rest for t in ins]
        single = has_out and not out_tuple and bool(outs) and outs[0] is not None
        sig = _mypy.positional_signature(sig, arg_types, tensor if single else sig.ret_type)
    for i, t in enumerate(ins):
        if t is not None and i + skip < len(arg_types):
            want = spmd_of(arg_types[i + skip]) if check else None
            if want is not None:  # fn's parameter sees the local view of in_types
                for a, g, w in mismatches(t, want):
                    _mypy.fail(
                        ctx.api,
                        f"spmd.local_map: in_types[{i}] is {g} on axis {a!r}, but "
                        f"{declared.name}'s parameter {i + 1} is {w} there",
                        declared.context,
                        SPMD_ARG,
                    )
            arg_types[i + skip] = _declared_as(ctx, arg_types[i + skip], t)
    ret = sig.ret_type
    if has_out:
        if check:
            _check_local_map_outputs(ctx, declared, ret, outs, out_tuple)
        items = _mypy.tuple_items(ret)
        if out_tuple and items is not None and len(items) == len(outs):
            ret = _mypy.with_tuple_items(
                ret,
                [
                    _mypy.replace_tensors(it, carrier(ctx.api, o)) if o is not None else it
                    for it, o in zip(items, outs)
                ],
            )
        elif not out_tuple and outs and outs[0] is not None:
            ret = _declared_as(ctx, ret, outs[0])
    return _mypy.with_signature(sig, arg_types, ret)


def _declared_as(ctx: Any, typ: _mypy.Type, spmd: Spmd) -> _mypy.Type:
    """`typ` with its tensors of the declared type; a parameter or result
    written without annotation (Any) is the declared tensor."""
    declared = carrier(ctx.api, spmd)
    return declared if _mypy.is_any(typ) else _mypy.replace_tensors(typ, declared)


def _check_local_map_outputs(
    ctx: Any, declared: _Declared, ret: _mypy.Type, outs: List[Optional[Spmd]], out_tuple: bool
) -> None:
    """What fn declares it returns must fit out_types, per axis: the body's
    local result is what the caller receives with out_types' type."""
    items = _mypy.tuple_items(ret) if out_tuple else [ret]
    if items is None and len(outs) == 1:
        items = [ret]  # out_types=(Spmd(...),) for a single result
    if items is None or len(items) != len(outs):
        return
    name = declared.name
    for i, (item, want) in enumerate(zip(items, outs)):
        got = spmd_of(item)
        if got is None or want is None:
            continue
        for a, g, w in mismatches(got, want):
            where = f"out_types[{i}]" if out_tuple else "out_types"
            _mypy.fail(
                ctx.api,
                f"spmd.local_map: {name} returns {g} on axis {a!r}"
                + (f" (result {i})" if len(items) > 1 else "")
                + f", but {where} declares {w} there. Hint: make {where} say {g}, or convert in {name}",
                declared.context,
                SPMD_ARG,
            )


HOOKS: Dict[str, Callable[[Any], _mypy.Type]] = {
    _LOCAL_MAP: guarded(_boundary(_called, check=True), default_return),
    _TRUSTED: guarded(_boundary(_called, check=False), default_return),
    _mypy.TRUSTED_APPLY: guarded(_boundary(_applying, check=False), default_return),
}
# the decorator forms: the __call__ of what the call without fn returns
METHOD_HOOKS: Dict[str, Callable[[Any], _mypy.Type]] = {
    GLOBAL_OPS + "LocalMapDecorator.__call__": guarded(
        _boundary(_decorating(_LOCAL_MAP, "local_map"), check=True), default_return
    ),
    "spmd_mypy.runtime.trusted.TrustedDecorator.__call__": guarded(
        _boundary(_decorating(_TRUSTED, "trusted"), check=False), default_return
    ),
}
