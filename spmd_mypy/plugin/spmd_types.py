"""Reading code written for the runtime checker spmd_types, with our rules.

spmd_types (`import spmd_types as spmd`) writes the same R/I/V/P/S types as
runtime calls instead of annotations.  With its stubs (stubs/torch-spmd/
spmd_types-stubs) its calls have signatures, and this module's hooks type
them:

  spmd.all_reduce/all_gather/reduce_scatter/all_to_all/redistribute/convert/
  reinterpret/shard/invariant_to_replicate(x, axis, src=..., dst=...)
      -> comms.type_collective: our collective's check and result type.
         spmd_types' defaults are filled in (all_gather src=V, reduce_scatter
         dst=V, all_to_all V -> V); its V with gather_dim/scatter_dim k is
         our S(k) (the runtime concatenates/splits on dim k, 0 by default).
  spmd.assert_type(x, {axis: T, ...} | T | PartitionSpec(...), ...)
      -> comms.asserted_type: checked against x's type, then x has the
         asserted type (the statement form is rewritten into `x = ...`
         before analysis: _mypy.spmd_types_tree).
  spmd.mutate_type(x, axis, src=, dst=) -> x with dst on axis (a declared
         change: checked against src).

Axis keys: a string literal, a Literal-typed name, or a member of a str/
StrEnum enum (its literal value) name an axis.  Any other key -- a
ProcessGroup, a name chosen in a loop or a conditional -- is not known
statically: that axis is reported as unchecked (a note) and left as it was,
never an error.  `{**spmd.get_local_type(y), k: T}` is y's type with k
replaced; `spmd.S(e)` with a non-literal dim is unchecked on its axis.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ..vocab.axis import axis_names
from ..vocab.localtype import BY_LETTER, I, R, V, AxisType, Shard
from ..vocab.spec import Spmd
from . import _mypy
from .callsite import one_arg
from .carrier import carrier, spmd_of
from .comms import asserted_type, type_collective
from .errors import SPMD_ARG
from .groups import axis_of
from .spec_argument import enum_alias_value
from .guard import default_return, guarded

_mypy.load("spmd_types_tree")  # the mypy side of this feature (_mypy/__init__.py)

MODULE = "spmd_types."
_LOCAL: Dict[str, AxisType] = {
    **{MODULE + letter: t for letter, t in BY_LETTER.items()},
    **{MODULE + name: BY_LETTER[name[0]] for name in ("Replicate", "Invariant", "Varying", "Partial")},
    **{f"{MODULE}PerMeshAxisLocalSpmdType.{letter}": t for letter, t in BY_LETTER.items()},
}
_SHARD = frozenset({MODULE + "S", MODULE + "Shard"})
_PARTITION_SPEC = MODULE + "PartitionSpec"
_GET_LOCAL_TYPE = MODULE + "get_local_type"

# spmd_types' op -> (our op, src default, dst default, the keyword naming the
# dim its V source/destination concatenates or splits on).
_OPS: Dict[str, Tuple[str, Optional[AxisType], Optional[AxisType], Optional[str]]] = {
    "all_reduce": ("all_reduce", BY_LETTER["P"], None, None),
    "all_gather": ("all_gather", V, None, "gather_dim"),
    "reduce_scatter": ("reduce_scatter", BY_LETTER["P"], V, "scatter_dim"),
    "all_to_all": ("all_to_all", V, V, None),
    "redistribute": ("redistribute", None, None, None),
    "convert": ("convert", None, None, None),
    "reinterpret": ("reinterpret", None, None, None),
    "shard": ("convert", None, None, None),
    "invariant_to_replicate": ("convert", I, R, None),
}

_SUFFIX = " (spmd_types.{op}, read as spmd-mypy's spmd.{ours})"

_IMPLICIT_PARTIAL = (
    "; spmd_types may infer P for a matmul over a sharded dim (implicit Partial), spmd-mypy asks for "
    "the pending sum to be declared with reinterpret(V -> P) where the local products are made"
)


def _varying(typ: _mypy.Type, axis: AxisKey) -> bool:
    """Whether x is V (or S) on some axis of the collective."""
    actual = spmd_of(typ)
    axes = axis_names(axis)
    return actual is not None and any(
        t is not None and (t == V or isinstance(t, Shard)) for t in map(actual.axis_type, axes)
    )


# A value read from an argument that is not known statically: why.
Unknown = str
AxisKey = Union[str, Tuple[str, ...]]
# Reading a typecheck hook's asserts at a call of `.apply`: the hook's
# parameter names -> the call's argument (its expression, its type).
Env = Dict[str, Tuple[_mypy.Expression, _mypy.Type]]


def axis_key(ctx: Any, expr: _mypy.Expression, env: Optional[Env] = None) -> Union[AxisKey, Unknown, None]:
    """The axis an argument names: a name, a tuple of names; else why not (str
    starting with '!').  With `env`, a parameter's name stands for the call's
    argument."""
    name = _mypy.str_value(expr) or _mypy.enum_value(expr)
    if name is not None:
        return name
    names = _mypy.str_tuple(expr)
    if names is not None:
        return names
    if env is not None:
        bound = env.get(_mypy.expr_text(expr))
        if bound is None:
            return "!not a name of the hook's parameters"
        expr, typ = bound
        written = _mypy.str_value(expr) or _mypy.enum_value(expr) or _mypy.str_tuple(expr)
        if written is not None:
            return written
    else:
        typ = _mypy.expression_type(ctx.api, expr)
    declared = axis_of(expr, typ, ctx.api)  # a group declared as an axis (Axis("tp"), the groups setting)
    if declared is not None:
        return declared
    literal = _mypy.literal_str(typ)  # a name typed Literal["tp"]
    if literal is not None:
        return literal
    if _mypy.is_process_group(typ):
        return "!a ProcessGroup"
    return "!not a literal axis name"


def _unchecked(ctx: Any, what: str, key: _mypy.Expression, why: str) -> None:
    text = _mypy.expr_text(key)
    _mypy.note(
        ctx.api,
        f"{what}: axis {text} ({why[1:]}) is not checked statically; name the mesh axis "
        f'with a string ("tp") or a StrEnum member to have it checked',
        ctx.context,
        SPMD_ARG,
    )


def _axis_type(expr: _mypy.Expression) -> Union[AxisType, Unknown, None]:
    """R/I/V/P or S(k) as written; '!...' for S(non-literal); None: not a type."""
    full = _mypy.fullname_of(expr)
    if full in _LOCAL:
        return _LOCAL[full]
    parts = _mypy.call_parts(expr)
    if parts is not None and parts[0] in _SHARD and len(parts[1]) == 1 and not parts[2]:
        dim = _mypy.int_value(parts[1][0])
        return Shard(dim) if dim is not None else "!S(dim) with a dim not known statically"
    return None


def axis_type_of(expr: _mypy.Expression) -> Union[AxisType, Unknown, None]:
    """R/I/V/P or S(k) as spmd_types code writes it (see _axis_type)."""
    return _axis_type(expr)


# -- collectives ---------------------------------------------------------------------


def _keyword_int(ctx: Any, name: str) -> Optional[int]:
    got = one_arg(ctx, name)
    return _mypy.int_value(got[0]) if got is not None else None


def _collective(ctx: Any, op: str) -> _mypy.Type:
    ours, src_default, dst_default, dim_keyword = _OPS[op]
    x, axis_arg = one_arg(ctx, "x"), one_arg(ctx, "axis")
    if x is None or axis_arg is None:
        return ctx.default_return_type
    src_arg, dst_arg = one_arg(ctx, "src"), one_arg(ctx, "dst")
    src = _axis_type(src_arg[0]) if src_arg is not None else src_default
    dst = _axis_type(dst_arg[0]) if dst_arg is not None else dst_default
    axis = axis_key(ctx, axis_arg[0])
    label = f"spmd_types.{op}"
    if isinstance(axis, str) and axis.startswith("!"):
        _unchecked(ctx, label, axis_arg[0], axis)
        return _mypy.replace_tensors(ctx.default_return_type, _mypy.unknown_carrier(ctx.api))
    if not isinstance(src, (str, type(None))) and not isinstance(dst, (str, type(None))) and axis is not None:
        if dim_keyword is not None:  # V concatenated / split on a dim: our S(dim)
            dim = _keyword_int(ctx, dim_keyword)
            if ours == "all_gather" and src == V:
                src = Shard(dim or 0)
            if ours == "reduce_scatter" and dst == V:
                dst = Shard(dim or 0)
        expert = one_arg(ctx, "expert_mode")
        suffix = _SUFFIX.format(op=op, ours=ours)
        if src == BY_LETTER["P"] and _varying(x[1], axis):
            suffix += _IMPLICIT_PARTIAL
        return type_collective(
            ctx, ours, x, axis, src, dst,
            expert is not None and _mypy.is_true(expert[0]),
            suffix=suffix,
        )
    return _mypy.replace_tensors(ctx.default_return_type, _mypy.unknown_carrier(ctx.api))


# -- assert_type and mutate_type -------------------------------------------------------


def _spread(ctx: Any, expr: _mypy.Expression, env: Optional[Env]) -> Optional[Spmd]:
    """The type a `**spmd.get_local_type(y)` spread stands for: y's."""
    parts = _mypy.call_parts(expr)
    if parts is None or parts[0] != _GET_LOCAL_TYPE or len(parts[1]) != 1:
        return None
    if env is not None:
        bound = env.get(_mypy.expr_text(parts[1][0]))
        return spmd_of(bound[1]) if bound is not None else None
    return spmd_of(_mypy.expression_type(ctx.api, parts[1][0]))


def _read_dict(ctx: Any, expr: _mypy.Expression, axes: Dict[str, AxisType], label: str, env: Optional[Env]) -> bool:
    """Add a dict display's entries to `axes`; False if it is not one."""
    entries = _mypy.dict_entries(expr)
    if entries is None:
        return False
    spread_axes: set = set()
    written: set = set()
    unnamed = False
    for key, value in entries:
        if key is None:
            spread = _spread(ctx, value, env)
            if spread is not None:
                axes.update(spread.axes)
                spread_axes |= set(spread.axes)
            continue
        name = axis_key(ctx, key, env)
        if not isinstance(name, str) or name.startswith("!"):
            unnamed = True
            if not QUIET[0]:
                _unchecked(ctx, label, key, name if isinstance(name, str) else "!a tuple of axes")
            continue
        written.add(name)
        t = _axis_type(value)
        if isinstance(t, str):
            if not QUIET[0]:
                _mypy.note(
                    ctx.api,
                    f"{label}: {_mypy.expr_text(value)} on axis {name!r} has a dim not known statically; "
                    f"that axis is not checked (write a literal dim, e.g. S(-1), to have it checked)",
                    ctx.context,
                    SPMD_ARG,
                )
            axes.pop(name, None)
        elif t is not None:
            axes[name] = t
    if unnamed:  # a key the checker cannot name may override any axis of a spread
        for a in spread_axes - written:
            axes.pop(a, None)
    return True


# True while reading a copy of asserts the user wrote elsewhere (a forward
# body, a typecheck hook): its notes were given where they are written.
QUIET = [False]


def _read_spec(ctx: Any, expr: _mypy.Expression, axes: Dict[str, AxisType]) -> bool:
    """PartitionSpec(e0, e1, ...): each dim sharded on one named axis is S(dim)
    there, on several axes V on each."""
    parts = _mypy.call_parts(expr)
    if parts is None or parts[0] != _PARTITION_SPEC:
        return False
    for dim, entry in enumerate(parts[1]):
        one = _named_axis(ctx, entry)
        if one is not None:
            axes[one] = Shard(dim)
        items = _mypy.display_items(entry) if one is None else None  # (DP, CP): sharded on both
        for name in (_named_axis(ctx, item) for item in items or ()):
            if name is not None:
                axes[name] = V
    return True


def _named_axis(ctx: Any, expr: _mypy.Expression) -> Optional[str]:
    """The axis a string, a str enum's member or an alias of one names."""
    return _mypy.str_value(expr) or _mypy.enum_value(expr) or enum_alias_value(ctx.api, expr)


def asserted_of(
    ctx: Any, exprs: List[_mypy.Expression], label: str, env: Optional[Env] = None,
    unread: Optional[List[_mypy.Expression]] = None,
) -> Optional[Spmd]:
    """The type assert_type's type arguments `exprs` state (dicts, a bare
    type, a PartitionSpec); None if they are not read statically (the
    argument not read is then added to `unread`, when given)."""
    axes: Dict[str, AxisType] = {}
    bare: Optional[AxisType] = None
    for expr in exprs:
        if _read_dict(ctx, expr, axes, label, env) or _read_spec(ctx, expr, axes):
            continue
        whole = _spread(ctx, expr, env)  # spmd.get_local_type(y): y's types
        if whole is not None:
            axes.update(whole.axes)
            if whole.rest is not None:
                bare = whole.rest  # `*=R`: every axis
            elif not whole.axes and unread is not None:
                unread.append(expr)  # y's type names no axis: nothing to assert
            continue
        t = _axis_type(expr)
        if t is not None and not isinstance(t, str):
            bare = t
        elif _mypy.fullname_of(expr) != "builtins.None":
            if unread is not None:
                unread.append(expr)
            return None  # an SpmdType or a name: not read statically
    if not axes and bare is None:
        return None
    return Spmd.of(axes, rest=bare)


_INTEGER_TENSORS = frozenset(
    f"torch._C.{n}Tensor" for n in ("Long", "Int", "Short", "Char", "Byte", "Bool")
)


def without_gradient(typ: _mypy.Type, actual: Optional[Spmd]) -> bool:
    """An integer tensor (labels, ids: declared LongTensor & co., or an integer
    result) carries no gradient, so I and R mix for it as spmd_types allows."""
    return (actual is not None and actual.nograd) or _mypy.instance_fullname(typ) in _INTEGER_TENSORS


def _unread_reason(expr: _mypy.Expression) -> str:
    """Why an assert_type's type argument is not read, and how to have it read."""
    parts = _mypy.call_parts(expr)
    if parts is not None and parts[0] == _GET_LOCAL_TYPE and len(parts[1]) == 1:
        y = _mypy.expr_text(parts[1][0])
        return (f"the type of {y} is not known statically here, so this assertion is not checked; "
                f"annotate {y} or assert its type first")
    return (f"{_mypy.expr_text(expr)} is not read statically, so this assertion is not checked; write the "
            f"types at the call, or bind them to a name in this function first (with nothing they read "
            f"bound again before the assert)")


def _assert_type(ctx: Any) -> _mypy.Type:
    x = one_arg(ctx, "tensor")
    if x is None or not _mypy.is_tensor(x[1]):
        return ctx.default_return_type
    given = _mypy.formal_args(ctx, "types") + _mypy.formal_args(ctx, "partition_spec")
    unread: List[_mypy.Expression] = []
    asserted = asserted_of(ctx, [e for e, _ in given], "spmd_types.assert_type", unread=unread)
    if asserted is None:
        if unread:
            _mypy.note(ctx.api, f"spmd_types.assert_type: {_unread_reason(unread[0])}", ctx.context, SPMD_ARG)
        return ctx.default_return_type
    if without_gradient(x[1], spmd_of(x[1])):
        asserted = Spmd.of(asserted.axes, asserted.spec, True, asserted.rest)
    return asserted_type(ctx, x, asserted, label="spmd_types.assert_type")


def _mutate_type(ctx: Any) -> _mypy.Type:
    x, axis_arg = one_arg(ctx, "tensor"), one_arg(ctx, "axis")
    src_arg, dst_arg = one_arg(ctx, "src"), one_arg(ctx, "dst")
    if x is None or axis_arg is None or src_arg is None or dst_arg is None:
        return ctx.default_return_type
    axis = axis_key(ctx, axis_arg[0])
    src, dst = _axis_type(src_arg[0]), _axis_type(dst_arg[0])
    if not isinstance(axis, str) or axis.startswith("!") or not isinstance(src, (Shard, type(R))):
        if isinstance(axis, str) and axis.startswith("!"):
            _unchecked(ctx, "spmd_types.mutate_type", axis_arg[0], axis)
        return ctx.default_return_type
    if not isinstance(dst, (Shard, type(R))):
        return ctx.default_return_type
    asserted_type(ctx, x, Spmd.of({axis: src}), label="spmd_types.mutate_type (src)")  # checked
    actual = spmd_of(x[1])
    merged = dict(actual.axes) if actual is not None else {}
    merged[axis] = dst  # a declared change: the result is dst there
    return _mypy.replace_tensors(ctx.default_return_type, carrier(ctx.api, Spmd.of(merged)))


def _hook(fn: Callable[[Any], _mypy.Type]) -> Callable[[Any], _mypy.Type]:
    return guarded(fn, default_return)


def _collective_hook(op: str) -> Callable[[Any], _mypy.Type]:
    return _hook(lambda ctx: _collective(ctx, op))


HOOKS: Dict[str, Callable[[Any], _mypy.Type]] = {
    **{MODULE + op: _collective_hook(op) for op in _OPS},
    MODULE + "assert_type": _hook(_assert_type),
    MODULE + "mutate_type": _hook(_mutate_type),
}
