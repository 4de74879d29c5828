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

A descriptor class in the stubs (reads the carrier, `__set__` takes a
Tensor) would say the same to mypy, but mypy type-checks a call of
`__get__` on every read of a descriptor: on the bench codebase, about a
third of what mypy spent on top of its own work (bench/RESULTS.md).
"""

from __future__ import annotations

from typing import Any, Callable

from . import _mypy
from .carrier import spmd_of
from .errors import SPMD_ASSIGN
from .groups import written_group
from .guard import default_attr, guarded
from .relation import report_against, wants_of


def write_hook(name: str) -> Callable[[Any], _mypy.Type]:
    def hook(ctx: Any) -> _mypy.Type:
        if not ctx.is_lvalue:
            _mypy.restore_parameters(ctx.api)  # `self.x` early in a body: see there
            return _read(ctx, name)
        group = written_group(ctx)  # an attribute declared as the group of an axis
        if group is not None:
            return group
        relaxed = _mypy.attribute_write_type(ctx, name)
        if relaxed is None:
            return ctx.default_attr_type
        _check_written_value(ctx, name)
        return relaxed

    return guarded(hook, default_attr)


def _read(ctx: Any, name: str) -> _mypy.Type:
    """A read; for mypy's read of the target of `self.bias = nn.Parameter(...)`
    (an Optional carrier attribute), the carrier the write narrows it to."""
    declared = ctx.default_attr_type
    present = _mypy.without_none(declared)
    if present is None or present is declared or not _mypy.holds_carrier(present):
        return declared  # most reads: not an Optional carrier
    value = _mypy.written_value(ctx.api, ctx.context)
    if value is None or _mypy.attribute_write_type(ctx, name) is None:
        return declared
    if _mypy.plain_tensor_call(value):
        return present
    written = _mypy.quietly_typed(ctx.api, value)
    if _mypy.is_tensor(written) and _mypy.carried(written) is None:
        return present  # a plain tensor (nn.Parameter): present from now on
    return declared


def _check_written_value(ctx: Any, name: str) -> None:
    """A value that already carries an SPMD type (`self.cached = x`) must fit
    the attribute's, per axis, as an annotated assignment must; a plain
    Tensor (`nn.Parameter(...)`) holds none yet and fits."""
    value = _mypy.written_value(ctx.api, ctx.context)
    if value is None or _mypy.plain_tensor_call(value):
        return
    pairs = _mypy.tensor_pairs(_mypy.quietly_typed(ctx.api, value), ctx.default_attr_type)
    for got_t, want_t in pairs or ():
        got, want = spmd_of(got_t), wants_of(want_t)
        if got is not None and want is not None:
            report_against(ctx.api, value, got, want, f"Value written to attribute {name!r}", SPMD_ASSIGN)
