"""Typing calls into megatron-core's tensor_parallel (its stubs: stubs/torch-spmd/megatron-stubs).

A call of a mapping function is typed as the typed collective its row in
vocab/megatron.py names: the input must hold the collective's src on the
tensor-parallel axis, and the result holds its dst there (other axes kept).
A call of a parallel layer (ColumnParallelLinear, RowParallelLinear,
VocabParallelEmbedding) is typed by the layer's flags, which the stubs carry
as the class's type arguments (Literal[True]/Literal[False] from the
constructor's literal flag; `bool` when unknown, as sequence_parallel is
unless the attribute is declared): the input must be one the setting takes,
and the output gets the setting's type.

`group=None` (or no group) is the axis named by `megatron_axis` in the
`[spmd_mypy]` settings (default "tp"), as is a call of
parallel_state.get_tensor_model_parallel_group(); any other group is not a
named axis: one spmd-collective note says the call is unchecked, and its
result is of unknown type (never a guess).

Register: the function-hook and method-hook tables take HOOKS (its keys are
function fullnames, class fullnames for the constructors, and
`<class>.__call__`/`<class>.forward` for the layers' calls).
"""

from __future__ import annotations

import configparser
import os
from typing import Any, Callable, Dict, Optional, Tuple

from ..vocab.localtype import AxisType, Shard, V
from ..vocab.megatron import (
    DEFAULT_AXIS,
    GIVEN,
    LAYER_MODULES,
    LAYERS,
    TP_GROUP_GETTERS,
    Collective,
    Layer,
    Mapping,
    by_fullname,
    collective_for,
    layer_rows,
)
from . import _mypy
from .carrier import carrier, spmd_of
from .comms import after, type_collective
from .errors import SPMD_ARG, SPMD_COLLECTIVE
from .guard import default_return, guarded
from .callsite import in_spmd_file, unknown_in_spmd_file

Hook = Callable[[Any], _mypy.Type]

# -- the axis: [spmd_mypy] megatron_axis -------------------------------------------

_AXES: Dict[Optional[str], str] = {}


def configured_axis(config_file: Optional[str]) -> str:
    """`megatron_axis` from the [spmd_mypy] section (or [tool.spmd_mypy]); "tp" by default."""
    if config_file in _AXES:
        return _AXES[config_file]
    value: Any = None
    if config_file and os.path.exists(config_file):
        try:
            if config_file.endswith(".toml"):
                import tomllib

                with open(config_file, "rb") as f:
                    value = tomllib.load(f).get("tool", {}).get("spmd_mypy", {}).get("megatron_axis")
            else:
                parser = configparser.ConfigParser()
                parser.read(config_file, encoding="utf-8")
                value = parser.get("spmd_mypy", "megatron_axis", fallback=None)
        except Exception:
            value = None
    axis = _AXES[config_file] = str(value).strip() if value and str(value).strip() else DEFAULT_AXIS
    return axis


def _axis(ctx: Any) -> str:
    return configured_axis(getattr(getattr(ctx.api, "options", None), "config_file", None))


def _unchecked(ctx: Any, what: str) -> _mypy.Type:
    _mypy.note(ctx.api, f"unchecked: {what}", ctx.context, SPMD_COLLECTIVE)
    return unknown_in_spmd_file(ctx, ctx.default_return_type)


# -- shared: does a value fit ----------------------------------------------------------


def _fits(have: AxisType, want: AxisType) -> bool:
    """`have` on the axis is what `want` asks for (V stands for any shard)."""
    if isinstance(want, Shard) or want is V:
        return have == want or have is V or (want is V and isinstance(have, Shard))
    return have == want


# -- the mapping functions ---------------------------------------------------------------


def _group_axis(ctx: Any, group: Optional[Tuple[_mypy.Expression, _mypy.Type]]) -> Optional[str]:
    """The axis a group argument names: None when it is not a named axis."""
    if group is None or _mypy.fullname_of(group[0]) == "builtins.None":
        return _axis(ctx)
    parts = _mypy.call_parts(group[0])
    if parts is not None and parts[0] in TP_GROUP_GETTERS:
        return _axis(ctx)
    return None


def _flags(ctx: Any, row: Mapping) -> Optional[Dict[str, object]]:
    """Literal values of the row's flag arguments; None if one is not a literal."""
    flags: Dict[str, object] = {}
    for param, value in dict(cond for cond, _ in row.variants).items():
        got = _mypy.formal_args(ctx, param)
        if not got:
            continue
        expr = got[0][0]
        if _mypy.fullname_of(expr) == "builtins.None":
            flags[param] = None
        elif value is GIVEN:
            flags[param] = GIVEN
        elif _mypy.is_true(expr) or _mypy.is_false(expr):
            flags[param] = _mypy.is_true(expr)
        else:
            return None
    return flags


def _mapping_call(ctx: Any, row: Mapping) -> _mypy.Type:
    default = ctx.default_return_type
    x = _mypy.formal_args(ctx, row.tensor)
    if not x or not in_spmd_file(ctx):
        return default
    group = _mypy.formal_args(ctx, row.group)
    axis = _group_axis(ctx, group[0] if group else None)
    name = row.name
    if axis is None:
        return _unchecked(
            ctx,
            f"{name}: the group is not a named axis (group=None and "
            f"get_tensor_model_parallel_group() are the '{_axis(ctx)}' axis)",
        )
    flags = _flags(ctx, row)
    typed = collective_for(row, flags) if flags is not None else None
    if typed is None:
        return _unchecked(ctx, f"{name}: its flags are not literals, or select no single collective")
    return _typed_collective(ctx, name, x[0], axis, typed)


def _typed_collective(
    ctx: Any, name: str, x: Tuple[_mypy.Expression, _mypy.Type], axis: str, typed: Collective
) -> _mypy.Type:
    """The typed collective the function runs (comms.type_collective): its
    code splits or gathers one fixed dim, so an S(i) src takes exactly S(i)."""
    suffix = f" ({name}, read as spmd-mypy's spmd.{typed.op})"
    return type_collective(ctx, typed.op, x, axis, typed.src, typed.dst, suffix=suffix, exact_shards=True)


def _mapping_hook(row: Mapping) -> Hook:
    return guarded(lambda ctx: _mapping_call(ctx, row), default_return)


# -- the parallel layers -------------------------------------------------------------------


def _known_flags(ctx: Any, layer: Layer) -> Tuple[Optional[bool], ...]:
    args = _mypy.type_arguments(ctx.type)
    known = [_mypy.literal_bool(a) for a in args[: len(layer.flags)]]
    known += [None] * (len(layer.flags) - len(known))
    if layer.call_flag is not None:
        override = _mypy.formal_args(ctx, layer.call_flag)
        if override and (_mypy.is_true(override[0][0]) or _mypy.is_false(override[0][0])):
            known[0] = _mypy.is_true(override[0][0])
        elif override and _mypy.fullname_of(override[0][0]) != "builtins.None":
            known[0] = None  # a runtime choice
    return tuple(known)


def _layer_call(ctx: Any, layer: Layer) -> _mypy.Type:
    default = ctx.default_return_type
    x = _mypy.formal_args(ctx, "input_")
    if not x or not in_spmd_file(ctx):
        return default
    axis = _axis(ctx)
    known = _known_flags(ctx, layer)
    rows = layer_rows(layer, known)
    actual = spmd_of(x[0][1])
    have = actual.axis_type(axis) if actual is not None else None
    if have is not None:
        taking = [row for row in rows if any(_fits(have, t) for t in row[0])]
        if not taking:
            takes = " or ".join(dict.fromkeys(str(t) for row in rows for t in row[0]))
            setting = ", ".join(f"{f}={k}" for f, k in zip(layer.flags, known) if k is not None)
            ctx.api.fail(
                f"{layer.name}({setting}) takes {takes} on axis {axis!r}, "
                f"but {_mypy.expr_text(x[0][0])} is {have} there",
                ctx.context,
                code=SPMD_ARG,
            )
            return unknown_in_spmd_file(ctx, default)
        rows = tuple(taking)
    outputs = set(row[1] for row in rows)
    if len(outputs) != 1:
        return unknown_in_spmd_file(ctx, default)  # the output depends on a flag not known here
    typed = carrier(ctx.api, after(actual, (axis,), outputs.pop()))
    items = _mypy.tuple_items(default)
    if items:  # (output, bias): the bias is left as it is
        return _mypy.with_tuple_items(default, [_mypy.replace_tensors(items[0], typed), *items[1:]])
    return _mypy.replace_tensors(default, typed)


def _layer_hook(layer: Layer) -> Hook:
    return guarded(lambda ctx: _layer_call(ctx, layer), default_return)


def _construction(ctx: Any, layer: Layer) -> _mypy.Type:
    group = _mypy.formal_args(ctx, "tp_group")
    if group and in_spmd_file(ctx) and _group_axis(ctx, group[0]) is None:
        _mypy.note(
            ctx.api,
            f"unchecked: {layer.name}: the group is not a named axis (tp_group=None is the "
            f"'{_axis(ctx)}' axis); its calls are still typed on '{_axis(ctx)}'",
            ctx.context,
            SPMD_COLLECTIVE,
        )
    return ctx.default_return_type


def _construction_hook(layer: Layer) -> Hook:
    return guarded(lambda ctx: _construction(ctx, layer), default_return)


def _hooks() -> Dict[str, Hook]:
    hooks: Dict[str, Hook] = {full: _mapping_hook(row) for full, row in by_fullname().items()}
    for layer in LAYERS:
        call, built = _layer_hook(layer), _construction_hook(layer)
        for module in LAYER_MODULES:
            hooks[f"{module}.{layer.name}"] = built
            hooks[f"{module}.{layer.name}.__call__"] = call
            hooks[f"{module}.{layer.name}.forward"] = call
    hooks[_TP_RANK] = guarded(_tp_rank, default_return)
    return hooks


_TP_RANK = "megatron.core.parallel_state.get_tensor_model_parallel_rank"


def _tp_rank(ctx: Any) -> _mypy.Type:
    """get_tensor_model_parallel_rank(): a rank number on the Megatron axis (ranks.py)."""
    from .ranks import rank_type  # a feature of its own

    return rank_type(ctx.api, (_axis(ctx),), ctx.default_return_type)


HOOKS: Dict[str, Hook] = _hooks()
