"""Module parameters: writes to an attribute declared in a class body.

`weight: Annotated[Tensor, Spmd(tp=S(0))]` in the body of an nn.Module
subclass declares a parameter; `__init__` then assigns it a plain
`nn.Parameter(...)`, which holds no SPMD type yet.  Reads of the attribute
give its carrier; a write accepts any Tensor (or None, for an Optional
one), like the assignment to a declared parameter that it is.  The attribute
hook runs for the attributes of user classes; on a write it hands mypy the
declared type with a plain Tensor in the carrier's place
(_mypy.attribute_write_type).  Attributes of records (dataclasses, attrs,
NamedTuple, TypedDict, Protocol) are fields of a value and keep their
declared type, as do attributes first declared on `self` in a method.
A value that already carries an SPMD type (`self.cached = x`) is checked
against the declared one per axis (spmd-assign), as an annotated assignment
is.  After `self.bias = nn.Parameter(...)` an Optional carrier attribute reads
as the carrier: mypy narrows a written attribute to the type of its read
when the value is no subtype of it, so the read of the target answers with
the carrier there.  In an nn.Module subclass, `self.w: Annotated[...] =
nn.Parameter(...)` in a method declares a parameter like the class body does.

The value written there is typed too (HOOKS): `nn.Parameter(x)` written to
a declared attribute is the declared parameter, so it has the declared type
when x is fresh from a factory (`torch.empty(...)`: `*=R, nograd`, the same
local values on every rank, a valid local shard of any type) or of unknown
type; a typed x keeps its own type (with a gradient: a parameter is a leaf
that gets one) and is checked against the declaration.  The write hook only
notes the call; its own hook decides when mypy types it, from x's type
then, so no value is typed ahead of the checker.  Elsewhere
`nn.Parameter(x)` keeps a typed x's type the same way; of a factory's
values it is plain mypy's Parameter, of unknown SPMD type: an undeclared
parameter's layout is what its module's initialization makes it
(fairscale and Megatron copy a rank's slice of a master weight into it),
which no type here says.  torch.nn.init's in-place initializers (vocab.torch_classes.INIT_IN_PLACE) return their argument, type
unchanged.

A descriptor class in the stubs (reads the carrier, `__set__` takes a
Tensor) would say the same to mypy, but mypy type-checks a call of
`__get__` on every read of a descriptor: on the bench codebase, about a
third of what mypy spent on top of its own work (bench/RESULTS.md).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from ..vocab.localtype import R
from ..vocab.spec import Spmd
from ..vocab.torch_classes import INIT_IN_PLACE
from . import _mypy
from .callsite import one_arg
from .carrier import carrier, spmd_of
from .errors import SPMD_ASSIGN
from .groups import written_group
from .guard import default_attr, default_return, guarded
from .rank_arguments import check_rank_value, declared_rank
from .relation import report_against, wants_of


def write_hook(name: str) -> Callable[[Any], _mypy.Type]:
    def hook(ctx: Any) -> _mypy.Type:
        if not ctx.is_lvalue:
            _mypy.restore_parameters(ctx.api)  # `self.x` early in a body: see there
            return _read(ctx, name)
        group = written_group(ctx)  # an attribute declared as the group of an axis
        if group is not None:
            return group
        if declared_rank(ctx.default_attr_type):  # Annotated[int, Spmd(tp=V)]: any int of no other axis
            return _rank_written(ctx, name)
        relaxed = _mypy.attribute_write_type(ctx, name)
        if relaxed is None:  # no SPMD type declared; a list of plain tensors takes a list of carriers
            if _written_carriers(ctx):
                return _mypy.plain_write_type(ctx.api, ctx.default_attr_type) or ctx.default_attr_type
            return ctx.default_attr_type
        written = _mypy.written_value(ctx.api, ctx.context)
        if written is not None:
            _declare_written_parameter(ctx, name, written)
            _check_written_value(ctx, name, written)
        return relaxed

    return guarded(hook, default_attr)


def _rank_written(ctx: Any, name: str) -> _mypy.Type:
    """A write to an attribute declared a rank number: the value's rank axes
    checked (ranks.check_rank_value); mypy is given int, so any int fits."""
    value = _mypy.written_value(ctx.api, ctx.context)
    if value is not None:
        got = _mypy.quietly_typed(ctx.api, value)
        if got is not None:
            check_rank_value(ctx.api, value, got, ctx.default_attr_type, f'Value written to "{name}"', SPMD_ASSIGN)
    return _mypy.relax_rank(ctx.api, ctx.default_attr_type)


def _read(ctx: Any, name: str) -> _mypy.Type:
    """A read; for mypy's read of the target of `self.bias = nn.Parameter(...)`
    (an Optional carrier attribute), the carrier the write narrows it to."""
    declared = ctx.default_attr_type
    present = _mypy.without_none(declared)
    if present is None or present is declared:
        return declared  # most reads: not Optional
    if not _mypy.holds_carrier(present):
        # an Optional list of plain tensors, written a list of carriers
        # (plain_write_type): read as written, as without the plugin
        if _mypy.plain_tensor_container(present) and _written_carriers(ctx):
            return present
        return declared
    value = _mypy.written_value(ctx.api, ctx.context)
    if value is None or _mypy.attribute_write_type(ctx, name) is None:
        return declared
    if _mypy.plain_tensor_call(value):
        return present
    written = _mypy.quietly_typed(ctx.api, value)
    if _mypy.is_tensor(written) and _mypy.carried(written) is None:
        return present  # a plain tensor (nn.Parameter): present from now on
    return declared


def _written_carriers(ctx: Any) -> bool:
    return _mypy.holds_carriers_already(_mypy.written_value(ctx.api, ctx.context))


def _check_written_value(ctx: Any, name: str, written: _mypy.Expression) -> None:
    """A value that already carries an SPMD type (`self.cached = x`) must fit
    the attribute's, per axis, as an annotated assignment must; a plain
    Tensor (`nn.Parameter(...)`) holds none yet and fits."""
    for value in _mypy.branches(written):  # each branch of `a if c else b`
        if _mypy.plain_tensor_call(value) and _declared_for(value) is not None:
            continue  # a parameter: its own hook checks it (_parameter)
        _check_against_declared(ctx.api, value, _mypy.quietly_typed(ctx.api, value), name, ctx.default_attr_type)


def _check_against_declared(api: Any, value: Any, typ: _mypy.Type, name: str, declared: _mypy.Type) -> None:
    for got_t, want_t in _mypy.tensor_pairs(typ, declared) or ():
        got, want = spmd_of(got_t), wants_of(want_t)
        if got is not None and want is not None:
            report_against(api, value, got, want, f"Value written to attribute {name!r}", SPMD_ASSIGN)


# `nn.Parameter(...)` calls written to a declared attribute: id -> (the call,
# the declared carrier, the attribute's name, its declared type).  The write
# hook runs before mypy types the value; the call's own hook (_parameter),
# which runs when mypy types it, decides from x's type then.
_DECLARED: Dict[int, Tuple[object, _mypy.Type, str, _mypy.Type]] = {}


def _declare_written_parameter(ctx: Any, name: str, value: _mypy.Expression) -> None:
    declared = _mypy.without_none(ctx.default_attr_type)
    if declared is None or _mypy.carried(declared) is None:
        return
    for call in _mypy.parameter_calls(value):  # the value, or the branches of `... if c else None`
        if len(_DECLARED) > 4096:
            _DECLARED.clear()
        _DECLARED[id(call)] = (call, declared, name, ctx.default_attr_type)


def _declared_for(call: object) -> Optional[Tuple[object, _mypy.Type, str, _mypy.Type]]:
    hit = _DECLARED.get(id(call))
    return hit if hit is not None and hit[0] is call else None


def _fresh(actual: Optional[Spmd]) -> bool:
    """A factory's result: the same local values on every rank, no gradient."""
    return actual is not None and not actual.axes and actual.rest == R and actual.nograd


def _parameter(ctx: Any) -> _mypy.Type:
    """`nn.Parameter(x)`: the declared type where written to a declared
    attribute and x is fresh or of unknown type, else x's type with a
    gradient (see the module docstring), checked against the declaration
    where written to one."""
    hit = _declared_for(ctx.context)
    x = one_arg(ctx, "data")
    actual = spmd_of(x[1]) if x is not None else None
    if hit is not None and (actual is None or _fresh(actual)):
        return hit[1]
    if actual is None or not _mypy.is_tensor(ctx.default_return_type):
        return ctx.default_return_type
    if hit is None and _fresh(actual):
        # an undeclared parameter of a factory's values: its layout is what its
        # module's initialization makes it (per-rank slices of a master weight,
        # an RNG per tp rank), which no type here says: plain mypy's Parameter,
        # unknown to the rules (gradual typing)
        return ctx.default_return_type
    typed = carrier(ctx.api, Spmd.of(actual.axes, actual.spec, False, actual.rest))
    if hit is not None:
        _check_against_declared(ctx.api, ctx.context, typed, hit[2], hit[3])
    return typed


def _init(ctx: Any) -> _mypy.Type:
    """`nn.init.normal_(w, ...)`: w, written in place."""
    x = one_arg(ctx, "tensor")
    if x is None or spmd_of(x[1]) is None:
        return ctx.default_return_type
    return x[1]


HOOKS: Dict[str, Callable[[Any], _mypy.Type]] = {
    "torch.nn.parameter.Parameter": guarded(_parameter, default_return),
    **{f"torch.nn.init.{name}": guarded(_init, default_return) for name in INIT_IN_PLACE},
}
