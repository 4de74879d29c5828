"""SPMD types <-> DTensor placements (Shard(d), Replicate(), Partial()), as pure data.

A DTensor describes a value per mesh dim by a forward placement; the local
tensor `to_local()` hands out (and the one `from_local()` takes) also has a
gradient placement, `grad_placements=`: the layout autograd gives the local
gradient when it crosses back into DTensor.  Both together are one local SPMD
type per mesh axis:

    forward       gradient      local type   the local tensor's gradient
    Replicate()   Replicate()   I            complete on every rank
    Replicate()   Partial()     R            each rank's addend, summed by DTensor
    Shard(d)      Shard(d)      S(d)         the shard of dim d
    Partial()     Replicate()   P            the same on every rank (P's gradient is R)

Every other pair is no SPMD type: a Partial value's gradient summed again
(Partial/Partial) counts it once per rank, a shard's gradient is that shard.
torch 2.13's default gradient placement is the forward one, Partial made
Replicate (torch.distributed.tensor._api._normalize_placements_for_grad).
V (varying values that are not the shards of one dim) has no placement.

This module imports neither torch nor mypy; runtime/dtensor.py converts these
values to torch's placement objects, plugin/dtensor.py reads them from code.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from .localtype import I, P, R, AxisType, Shard, kind
from .spec import Spmd

__all__ = [
    "Placement",
    "PlacementError",
    "SHARD",
    "REPLICATE",
    "PARTIAL",
    "default_grad",
    "local_type",
    "placements_of",
    "to_placements",
    "from_placements",
    "grad_fix",
]

SHARD, REPLICATE, PARTIAL = "Shard", "Replicate", "Partial"


class PlacementError(ValueError):
    """A pair of placements, or an SPMD type, with no counterpart; the text says why."""


class Placement:
    """Shard(dim), Replicate() or Partial() (a sum), as a value."""

    __slots__ = ("kind", "dim")
    kind: str
    dim: Optional[int]

    def __init__(self, kind_: str, dim: Optional[int] = None) -> None:
        if kind_ not in (SHARD, REPLICATE, PARTIAL) or (kind_ == SHARD) != (dim is not None):
            raise PlacementError(f"no placement {kind_}({'' if dim is None else dim})")
        object.__setattr__(self, "kind", kind_)
        object.__setattr__(self, "dim", dim)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Placement is immutable")

    @classmethod
    def shard(cls, dim: int) -> "Placement":
        return cls(SHARD, dim)

    def __repr__(self) -> str:
        return f"Shard({self.dim})" if self.kind == SHARD else f"{self.kind}()"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Placement) and (self.kind, self.dim) == (other.kind, other.dim)

    def __hash__(self) -> int:
        return hash((self.kind, self.dim))


_R, _P = Placement(REPLICATE), Placement(PARTIAL)


def default_grad(forward: Placement) -> Placement:
    """torch's gradient placement when grad_placements is left out."""
    return _R if forward.kind == PARTIAL else forward


def local_type(forward: Placement, grad: Placement) -> AxisType:
    """The local SPMD type of a (forward, gradient) placement pair (table above)."""
    if forward.kind == REPLICATE and grad.kind in (REPLICATE, PARTIAL):
        return I if grad.kind == REPLICATE else R
    if forward.kind == SHARD and grad == forward:
        assert forward.dim is not None
        return Shard(forward.dim)
    if forward.kind == PARTIAL and grad.kind == REPLICATE:
        return P
    if forward.kind == PARTIAL:
        why = "the gradient of a pending sum is the same on every rank (Replicate()); summed again it counts once per rank"
    elif forward.kind == SHARD:
        why = f"the gradient of a shard of dim {forward.dim} is that shard, Shard({forward.dim})"
    else:
        why = "a replicated value's gradient is complete (Replicate()) or each rank's addend (Partial())"
    raise PlacementError(f"placement {forward} with gradient placement {grad} is no SPMD type: {why}")


def placements_of(t: AxisType) -> Tuple[Placement, Placement]:
    """(forward, gradient) placements of a local type; PlacementError for V."""
    k = kind(t)
    if k == "I":
        return _R, _R
    if k == "R":
        return _R, _P
    if k == "P":
        return _P, _R
    if isinstance(t, Shard):
        return Placement.shard(t.dim), Placement.shard(t.dim)
    raise PlacementError(
        "V (per-rank values that are not the shards of one dim) has no DTensor placement; "
        "state which dim the ranks' tensors shard (S(dim))"
    )


def _in_mesh_order(spmd: Spmd, mesh_axes: Sequence[str]) -> None:
    """A dim sharded on several axes is DTensor's Shard(d) on each only in mesh order."""
    if spmd.spec is None:
        return
    for d, axes in enumerate(spmd.spec.dims):
        order = [mesh_axes.index(a) for a in axes if a in mesh_axes]
        if order != sorted(order):
            raise PlacementError(
                f"dim {d} is sharded on {', '.join(axes)} (major to minor), not in the mesh's order "
                f"({', '.join(mesh_axes)}): DTensor's Shard({d}) on each of them means mesh order"
            )


def to_placements(spmd: Spmd, mesh_axes: Sequence[str]) -> Tuple[List[Placement], List[Placement]]:
    """(placements, grad_placements) of a type on a mesh whose dims are `mesh_axes`."""
    _in_mesh_order(spmd, mesh_axes)
    forward: List[Placement] = []
    grad: List[Placement] = []
    for a in mesh_axes:
        t = spmd.axis_type(a)
        if t is None:
            raise PlacementError(f"{spmd} does not name mesh axis {a!r}")
        try:
            f, g = placements_of(t)
        except PlacementError as e:
            raise PlacementError(f"axis {a!r}: {e}") from None
        forward.append(f)
        grad.append(g)
    return forward, grad


def from_placements(
    placements: Sequence[Placement], grad_placements: Optional[Sequence[Placement]], mesh_axes: Sequence[str]
) -> Spmd:
    """The per-axis type of a local tensor with these placements (torch's default
    gradient placements when grad_placements is None)."""
    if len(placements) != len(mesh_axes) or (grad_placements is not None and len(grad_placements) != len(mesh_axes)):
        raise PlacementError(f"{len(mesh_axes)} mesh dims ({', '.join(mesh_axes)}) need as many placements")
    grads = list(grad_placements) if grad_placements is not None else [default_grad(p) for p in placements]
    axes: Dict[str, AxisType] = {}
    for a, f, g in zip(mesh_axes, placements, grads):
        try:
            axes[a] = local_type(f, g)
        except PlacementError as e:
            raise PlacementError(f"axis {a!r}: {e}") from None
    return Spmd.of(axes)


def grad_fix(have: AxisType, forward: Placement) -> Optional[Placement]:
    """The gradient placement that makes a local value of type `have` fit a
    forward placement, if one does (R with Replicate(): Partial())."""
    try:
        f, g = placements_of(have)
    except PlacementError:
        return None
    return g if f == forward else None
