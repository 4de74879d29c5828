"""SPMD types <-> DTensor placements at run time (torch's Placement objects).

vocab/placements.py holds the rule (which forward and gradient placements are
which local type); this module converts its values to torch's and back, and
crosses the DTensor boundary with both placements taken from one SPMD type:

    placements, grads = dtensor.placements(Spmd(dp=S(0), tp=R), mesh)
    dt = dtensor.from_local(x, mesh, Spmd(tp=R))   # DTensor.from_local(..., grad_placements=...)
    y = dtensor.to_local(dt, Spmd(tp=R))           # dt.to_local(grad_placements=[Partial()])

The mesh's dims are named by `mesh.mesh_dim_names`.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.placement_types import Placement as TorchPlacement

from ..vocab.placements import PARTIAL, REPLICATE, Placement, PlacementError, from_placements, to_placements
from ..vocab.spec import Spmd

__all__ = ["to_torch", "from_torch", "placements", "spmd_of", "from_local", "to_local"]


def to_torch(p: Placement) -> TorchPlacement:
    if p.kind == REPLICATE:
        return Replicate()
    if p.kind == PARTIAL:
        return Partial()
    return Shard(p.dim)  # type: ignore[arg-type]


def from_torch(p: TorchPlacement, ndim: int = 0) -> Placement:
    """torch's placement as a vocabulary value (a negative Shard dim resolved
    against `ndim`); PlacementError for a strided shard or a non-sum Partial."""
    if type(p) is Shard:
        return Placement.shard(p.dim + ndim if p.dim < 0 else p.dim)
    if type(p) is Replicate:
        return Placement(REPLICATE)
    if type(p) is Partial and p.reduce_op == "sum":
        return Placement(PARTIAL)
    raise PlacementError(f"{p} has no SPMD type (strided shards and non-sum partials are not modelled)")


def _names(mesh: DeviceMesh) -> List[str]:
    names = mesh.mesh_dim_names
    if names is None:
        raise PlacementError("the mesh has no dim names (init_device_mesh(..., mesh_dim_names=...))")
    return list(names)


def placements(spmd: Spmd, mesh: DeviceMesh) -> Tuple[Tuple[TorchPlacement, ...], Tuple[TorchPlacement, ...]]:
    """(placements, grad_placements) of a local tensor of type `spmd` on `mesh`."""
    forward, grad = to_placements(spmd, _names(mesh))
    return tuple(map(to_torch, forward)), tuple(map(to_torch, grad))


def spmd_of(
    forward: Sequence[TorchPlacement], grad: Sequence[TorchPlacement] | None, mesh: DeviceMesh, ndim: int = 0
) -> Spmd:
    """The type of the local tensor of a DTensor with these placements."""
    return from_placements(
        [from_torch(p, ndim) for p in forward],
        None if grad is None else [from_torch(p, ndim) for p in grad],
        _names(mesh),
    )


def from_local(x: torch.Tensor, mesh: DeviceMesh, spmd: Spmd) -> DTensor:
    """DTensor.from_local with the placements and gradient placements of x's type."""
    forward, grad = placements(spmd, mesh)
    return DTensor.from_local(x, mesh, forward, grad_placements=grad)


def to_local(dt: DTensor, spmd: Spmd) -> torch.Tensor:
    """dt.to_local with the gradient placements of the type the local tensor is
    to have; its forward placements must be dt's."""
    forward, grad = placements(spmd, dt.device_mesh)
    if tuple(dt.placements) != forward:
        raise PlacementError(f"the DTensor is placed {tuple(dt.placements)}, not {forward} as {spmd} says")
    return dt.to_local(grad_placements=grad)
