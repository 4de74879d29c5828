"""spmd.local_map(fn, in_types=..., out_types=...): a local region with declared types;
spmd.trusted(fn, in_types=..., out_types=...): a trusted boundary (nothing of fn checked).

fn's declared parameters are checked against in_types (each parameter sees
the local view of its in_types entry) and its declared results against
out_types, per axis; the call's type is fn's signature retyped by them, so
the caller sees in_types' and out_types' types (a spec form in global code).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ..vocab.spec import Spmd, mismatches
from . import _mypy
from .annotations import AnnotationError
from .callsite import one_arg
from .carrier import carrier, spmd_of
from .errors import SPMD_ANNOTATION, SPMD_ARG
from .global_mode import GLOBAL_OPS, decode_spmd
from .guard import default_return, guarded

_mypy.load("signatures")  # the mypy side of this feature (_mypy/__init__.py)


def _types_arg(ctx: Any, formal: str) -> Tuple[bool, List[Optional[Spmd]], bool]:
    """(given, the Spmd per item, whether it was a tuple) of in_types= / out_types=."""
    got = one_arg(ctx, formal)
    if got is None:
        return False, [], False
    items = _mypy.display_items(got[0])
    exprs = items if items is not None else [got[0]]
    out: List[Optional[Spmd]] = []
    for e in exprs:
        if _mypy.literal_value(e) is None:
            out.append(None)
        else:
            out.append(decode_spmd(ctx, e))
    return True, out, items is not None


def _local_map(ctx: Any) -> _mypy.Type:
    return _retyped(ctx, check=True)


def _trusted(ctx: Any) -> _mypy.Type:
    """spmd.trusted(fn, in_types=..., out_types=...): retyped, nothing of fn checked."""
    return _retyped(ctx, check=False)


def _retyped(ctx: Any, check: bool) -> _mypy.Type:
    """fn's signature retyped by in_types/out_types; with `check`, fn's own
    declared parameters and results are checked against them (local_map)."""
    default = ctx.default_return_type
    fn = one_arg(ctx, "fn")
    sig = _mypy.callable_of(fn[1]) if fn is not None else None
    if sig is None:
        return default
    try:
        has_in, ins, _ = _types_arg(ctx, "in_types")
        has_out, outs, out_tuple = _types_arg(ctx, "out_types")
    except AnnotationError as e:
        ctx.api.fail(f"Malformed SPMD annotation: {e}", ctx.context, code=SPMD_ANNOTATION)
        return default
    arg_types = list(sig.arg_types)
    if not check and has_in and _mypy.takes_var_args(sig) and sig.arg_types:
        # Fn.apply(*args: Any) -> Any: one positional parameter per in_types
        # entry (a tensor, or the var-arg's type for None), a tensor result
        tensor, rest = _mypy.plain_tensor(ctx.api), sig.arg_types[0]
        arg_types = [tensor if t is not None else rest for t in ins]
        single = has_out and not out_tuple and bool(outs) and outs[0] is not None
        sig = _mypy.positional_signature(sig, arg_types, tensor if single else sig.ret_type)
    for i, t in enumerate(ins):
        if t is not None and i < len(arg_types):
            want = spmd_of(arg_types[i]) if check else None
            if want is not None:  # fn's parameter sees the local view of in_types
                for a, g, w in mismatches(t, want):
                    _mypy.fail(
                        ctx.api,
                        f"spmd.local_map: in_types[{i}] is {g} on axis {a!r}, but "
                        f"{_mypy.expr_text(fn[0]) if fn else 'fn'}'s parameter {i + 1} is {w} there",
                        ctx.context,
                        SPMD_ARG,
                    )
            arg_types[i] = _mypy.replace_tensors(arg_types[i], carrier(ctx.api, t))
    ret = sig.ret_type
    if has_out:
        if check:
            _check_local_map_outputs(ctx, fn[0] if fn else None, ret, outs, out_tuple)
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
            ret = _mypy.replace_tensors(ret, carrier(ctx.api, outs[0]))
    del has_in
    return _mypy.with_signature(sig, arg_types, ret)


def _check_local_map_outputs(
    ctx: Any, fn: Any, ret: _mypy.Type, outs: List[Optional[Spmd]], out_tuple: bool
) -> None:
    """What fn declares it returns must fit out_types, per axis: the body's
    local result is what the caller receives with out_types' type."""
    items = _mypy.tuple_items(ret) if out_tuple else [ret]
    if items is None and len(outs) == 1:
        items = [ret]  # out_types=(Spmd(...),) for a single result
    if items is None or len(items) != len(outs):
        return
    name = _mypy.expr_text(fn) if fn is not None else "fn"
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
                ctx.context,
                SPMD_ARG,
            )


HOOKS: Dict[str, Callable[[Any], _mypy.Type]] = {
    GLOBAL_OPS + "local_map": guarded(_local_map, default_return),
    "spmd_mypy.runtime.trusted.trusted": guarded(_trusted, default_return),
}
