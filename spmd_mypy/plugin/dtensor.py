"""DTensor's boundary with local tensors, checked: from_local, to_local, their
gradient placements (issue 14, item 4; pytorch issue 172932's class).

Per mesh axis, a (forward, gradient) placement pair is one local SPMD type
(vocab/placements.py: Replicate()/Replicate() is I, Replicate()/Partial() is
R, Shard(d)/Shard(d) is S(d), Partial()/Replicate() is P), so

  DTensor.from_local(x, mesh, placements, grad_placements=...)
      x must be that type on each axis (a replicated R value handed back a
      complete gradient would be summed twice); the result is a
      PlacedDTensor that remembers its placements per axis;
  distribute_tensor(t, mesh, placements), dt.redistribute(mesh, placements)
      the result remembers its placements;
  dt.to_local(grad_placements=...)
      the local tensor has the type of each pair; a pair with no type is an
      error naming the gradient placement to pass.  A Replicate() axis whose
      gradient placement is left to the default gives I; if the local value
      visibly meets per-rank or R values later in the function (its gradient
      is then each rank's addend), the call is an error naming
      grad_placements=[... Partial() ...], and the value is typed as fixed.

The mesh's dim names: `mesh["tp"]`, `mesh["dp", "tp"]`, else the configured
`axes` when there are as many placements; otherwise the call is unchecked
(a note).  Placements are read from list or tuple displays of Shard(d),
Replicate() and Partial().
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ..vocab.collectives import fix_call, mismatch_consequence
from ..vocab.localtype import R, AxisType, kind
from ..vocab.placements import (
    PARTIAL,
    REPLICATE,
    SHARD,
    Placement,
    PlacementError,
    default_grad,
    grad_fix,
    local_type,
    placements_of,
)
from ..vocab.spec import Spmd, mismatches
from . import _mypy
from .callsite import one_arg
from .carrier import carrier, spmd_of
from .config import Settings
from .errors import SPMD_ARG
from .guard import default_return, guarded

API = "torch.distributed.tensor._api."
_CLASSES = {
    "torch.distributed.tensor.placement_types.Shard": SHARD,
    "torch.distributed.tensor.placement_types.Replicate": REPLICATE,
    "torch.distributed.tensor.placement_types.Partial": PARTIAL,
}
_AXES: List[Tuple[str, ...]] = [()]

Hook = Callable[[Any], _mypy.Type]


def configure(settings: Settings) -> None:
    _AXES[0] = settings.axes


def _placement(expr: _mypy.Expression) -> Optional[Placement]:
    parts = _mypy.call_parts(expr)
    if parts is None or parts[0] not in _CLASSES:
        return None
    which, pos, kws = _CLASSES[parts[0]], parts[1], dict(parts[2])
    if which == SHARD:
        dim = _mypy.int_value(pos[0]) if pos else (_mypy.int_value(kws["dim"]) if "dim" in kws else None)
        return Placement.shard(dim) if dim is not None else None
    op = pos[0] if pos else kws.get("reduce_op")
    if which == PARTIAL and op is not None and _mypy.str_value(op) != "sum":
        return None  # max/min/avg partials: not a pending sum
    return Placement(which)


def _placements(expr: Optional[_mypy.Expression]) -> Optional[List[Placement]]:
    items = _mypy.display_items(expr) if expr is not None else None
    if items is None:
        return None
    read = [_placement(e) for e in items]
    return None if any(p is None for p in read) else read  # type: ignore[return-value]


def _mesh(ctx: Any, expr: Optional[_mypy.Expression], count: int) -> Optional[List[str]]:
    names = _mypy.mesh_names(ctx.api, expr)
    if names is None and _AXES[0] and len(_AXES[0]) == count:
        names = list(_AXES[0])
    return names if names is not None and len(names) == count else None


def _text(names: List[str], placements: List[Placement]) -> str:
    return ", ".join(f"{a}={p}" for a, p in sorted(zip(names, placements)))


def _parse(text: str) -> Tuple[List[str], List[Placement]]:
    names: List[str] = []
    found: List[Placement] = []
    for part in text.split(", "):
        a, _, p = part.partition("=")
        names.append(a)
        kind_, _, dim = p.rstrip(")").partition("(")
        found.append(Placement(kind_, int(dim) if dim else None))
    return names, found


def _listed(placements: List[Placement], i: int, p: Placement) -> str:
    return "[" + ", ".join(str(p if k == i else q) for k, q in enumerate(placements)) + "]"


def _unchecked(ctx: Any, what: str) -> None:
    _mypy.note(
        ctx.api,
        f"unchecked: {what}: the placements or the mesh's dim names are not known statically (write the "
        f'placements as a list of Shard(d)/Replicate()/Partial(), and index the mesh by name: mesh["tp"])',
        ctx.context,
        SPMD_ARG,
    )


def _placed(ctx: Any, names: List[str], placements: List[Placement]) -> _mypy.Type:
    placed = _mypy.placed_dtensor(ctx.api, _text(names, placements))
    return ctx.default_return_type if placed is None else placed


# -- from_local ------------------------------------------------------------------------


def _from_local(ctx: Any) -> _mypy.Type:
    x, placements_arg = one_arg(ctx, "local_tensor"), one_arg(ctx, "placements")
    placements = _placements(placements_arg[0]) if placements_arg is not None else None
    mesh_arg = one_arg(ctx, "device_mesh")
    grad_arg = one_arg(ctx, "grad_placements")
    grads = _placements(grad_arg[0]) if grad_arg is not None else None
    names = _mesh(ctx, mesh_arg[0] if mesh_arg else None, len(placements)) if placements else None
    if x is None or placements is None or names is None or (grad_arg is not None and grads is None):
        if x is not None and spmd_of(x[1]) is not None:
            _unchecked(ctx, "DTensor.from_local")
        return ctx.default_return_type
    actual = spmd_of(x[1])
    for i, (a, f) in enumerate(zip(names, placements)):
        g = grads[i] if grads is not None else default_grad(f)
        said = f"gradient placement {g}" + (" (the default)" if grads is None else "")
        try:
            want = local_type(f, g)
        except PlacementError as e:
            ctx.api.fail(f"DTensor.from_local on axis {a!r}: {e}", ctx.context, code=SPMD_ARG)
            continue
        for _, got, _w in mismatches(actual, Spmd.of({a: want})) if actual is not None else []:
            name = _mypy.expr_text(x[0])
            hint = _from_local_fix(got, want, a, name, placements, grads, i)
            ctx.api.fail(
                f"DTensor.from_local on axis {a!r}: {name} is {got}, but placement {f} with {said} takes {_a(want)}; "
                f"{mismatch_consequence(got, want, a)}. Hint: {hint}",
                ctx.context,
                code=SPMD_ARG,
            )
    return _placed(ctx, names, placements)


def _a(t: AxisType) -> str:
    return f"an {t} value" if str(t) in ("I", "R") else f"a {t} value"


def _from_local_fix(got: AxisType, want: AxisType, a: str, name: str, placements: List[Placement],
                    grads: Optional[List[Placement]], i: int) -> str:
    """The placements that describe a `got` value on axis i: the gradient
    placement alone when the forward one fits, else both; else a conversion."""
    current = grads or [default_grad(p) for p in placements]
    better = grad_fix(got, placements[i])
    if better is not None:
        return f"pass grad_placements={_listed(current, i, better)}"
    try:
        f, g = placements_of(got)
    except PlacementError:
        call = fix_call(got, want, a, name)
        return f"make it {want} first with {call}" if call else f"state which dim {name}'s shards split"
    text = f"pass placements={_listed(placements, i, f)}"
    return text if g == default_grad(f) and grads is None else text + f" and grad_placements={_listed(current, i, g)}"


def _distribute(ctx: Any) -> _mypy.Type:
    """distribute_tensor(t, mesh, placements) / dt.redistribute(mesh, placements)."""
    placements_arg = one_arg(ctx, "placements")
    placements = _placements(placements_arg[0]) if placements_arg is not None else None
    mesh_arg = one_arg(ctx, "device_mesh")
    names = _mesh(ctx, mesh_arg[0] if mesh_arg else None, len(placements)) if placements else None
    if placements is None or names is None:
        return ctx.default_return_type
    return _placed(ctx, names, placements)


# -- to_local ----------------------------------------------------------------------------


def _to_local(ctx: Any) -> _mypy.Type:
    text = _mypy.placed_of(ctx.type)
    if text is None:
        return ctx.default_return_type
    names, placements = _parse(text)
    grad_arg = one_arg(ctx, "grad_placements")
    grads = _placements(grad_arg[0]) if grad_arg is not None else None
    if grad_arg is not None and (grads is None or len(grads) != len(placements)):
        return ctx.default_return_type
    callee = getattr(ctx.context, "callee", None)
    dt = _mypy.expr_text(callee).removesuffix(".to_local") if callee is not None else "dt"
    axes: Dict[str, AxisType] = {}
    for i, (a, f) in enumerate(zip(names, placements)):
        g = grads[i] if grads is not None else default_grad(f)
        try:
            axes[a] = local_type(f, g)
        except PlacementError as e:
            fix = _listed(grads or [default_grad(p) for p in placements], i, default_grad(f))
            ctx.api.fail(
                f"DTensor.to_local on axis {a!r}: {e}. Hint: {dt}.to_local(grad_placements={fix})",
                ctx.context,
                code=SPMD_ARG,
            )
            return _mypy.replace_tensors(ctx.default_return_type, _mypy.unknown_carrier(ctx.api))
        if grads is None and f.kind == REPLICATE:
            _partial_gradient(ctx, a, dt, placements, i, axes)
    return _mypy.replace_tensors(ctx.default_return_type, carrier(ctx.api, Spmd.of(axes)))


def _partial_gradient(ctx: Any, a: str, dt: str, placements: List[Placement], i: int,
                      axes: Dict[str, AxisType]) -> None:
    """A Replicate() axis left to the default gradient placement: the local
    value is I; if it meets per-rank (V, S) or R values later, its gradient is
    each rank's addend, which DTensor would take as the whole gradient."""
    for expr, typ in _mypy.later_partners(ctx.api, ctx.context):
        other = spmd_of(typ)
        t = other.axis_type(a) if other is not None else None
        if t is None or kind(t) not in ("V", "S", "R") or (other is not None and other.nograd):
            continue
        fix = _listed([default_grad(p) for p in placements], i, Placement(PARTIAL))
        ctx.api.fail(
            f"DTensor.to_local on axis {a!r}: {dt} is Replicate() and its gradient placement is left to the "
            f"default, Replicate(), so the local tensor is I; but it meets {_mypy.expr_text(expr)} ({t}) at "
            f"line {expr.line}, so its gradient is each rank's addend (Partial over {a!r}), which DTensor would "
            f"take as the whole gradient. Hint: {dt}.to_local(grad_placements={fix})",
            ctx.context,
            code=SPMD_ARG,
        )
        axes[a] = R  # typed as the fix makes it
        return


FUNCTION_HOOKS: Dict[str, Hook] = {
    API + "DTensor.from_local": guarded(_from_local, default_return),
    API + "distribute_tensor": guarded(_distribute, default_return),
}
PLACED = "spmd_phantom.dtensor.PlacedDTensor."  # methods on a DTensor with known placements
METHOD_HOOKS: Dict[str, Hook] = {
    API + "DTensor.from_local": guarded(_from_local, default_return),
    PLACED + "to_local": guarded(_to_local, default_return),
    PLACED + "redistribute": guarded(_distribute, default_return),
    API + "DTensor.redistribute": guarded(_distribute, default_return),
}
