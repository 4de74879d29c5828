"""DTensor's own redistribute, measured: the elements each device receives.

For each transition, torch's `DTensor.redistribute` (torch 2.13) runs on a
fake process group (no data moves; a fake group has one world size per
process group, so each mesh's world is set up and torn down in turn), once as
every rank of the mesh.  A dispatch mode sees every collective DTensor issues
and counts, for this rank, the elements it receives, with the planner's
accounting (vocab/comm_volume.py's table, which the planner reads):

  all_gather        (g-1) * L
  reduce_scatter    (g-1) * L / g
  all_reduce        2 * (g-1) * L / g, rounded up
  all_to_all        (g-1) * L / g

where L is the input's element count on this rank and g the group size.  The
figure is the maximum over the ranks, in units of the full tensor.

One adjustment: on a CPU mesh DTensor replaces its Shard(i) -> Shard(j)
all_to_all by an all_gather and a local chunk, because gloo has no
all_to_all.  That is a fallback of the CPU backend, not DTensor's plan, so
the count takes DTensor's own path (the all_to_all it runs on GPU meshes and
under LocalTensorMode) by answering its "is this a local-tensor run?"
question with yes while counting.

A transition DTensor's placements cannot express with plain Shard/Replicate/
Partial (a dim sharded by several mesh axes out of mesh order) gives None.
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple
from unittest import mock

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from spmd_mypy import P, Spmd
from spmd_mypy.vocab.comm_volume import received_elements
from spmd_mypy.vocab.redistribute_plan import local_shape

__all__ = ["DTensorResult", "dtensor_volumes"]

DTensorResult = Tuple[Fraction, Tuple[str, ...]]  # (max received / N, the collectives, in order)

# Ops that only wait on or wrap a collective's result.
_NOT_COMMUNICATION = ("_c10d_functional.wait_tensor", "_c10d_functional._wrap_tensor_autograd")


def _group_size(group: Any) -> int:
    from torch.distributed.distributed_c10d import _resolve_process_group

    return _resolve_process_group(group).size()


def _received(op: str, args: Sequence[Any]) -> int:
    """The elements this rank receives in one functional collective (comm_volume's table)."""
    n = args[0].numel()
    if op == "all_gather_into_tensor":  # (input, group_size, group)
        return received_elements("all_gather", args[1], n)
    if op == "reduce_scatter_tensor":  # (input, reduce_op, group_size, group)
        return received_elements("reduce_scatter", args[2], n)
    if op == "all_reduce":  # (input, reduce_op, group)
        return received_elements("all_reduce", _group_size(args[2]), n)
    if op == "shard_dim_alltoall":  # (input, gather_dim, shard_dim, group)
        return received_elements("all_to_all", _group_size(args[3]), n)
    raise RuntimeError(f"dtensor_volume: no count for the collective {op}")


class _CountReceived(TorchDispatchMode):
    """Counts what this rank receives in the collectives run under it."""

    def __init__(self) -> None:
        super().__init__()
        self.elements = 0
        self.ops: List[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = str(func)
        if name.startswith(("_c10d_functional.", "_dtensor.", "c10d.")) and not name.startswith(_NOT_COMMUNICATION):
            op = name.split(".")[1]
            self.elements += _received(op, args)
            self.ops.append(op)
        return func(*args, **(kwargs or {}))


def _placements(spmd: Spmd, names: Sequence[str]) -> Optional[List[Any]]:
    """DTensor's placements for a spec-form type (mesh order), or None if it has none."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    assert spmd.spec is not None, "spec form only"
    out: List[Any] = []
    for a in names:
        dim = next((j for j, d in enumerate(spmd.spec.dims) if a in d), None)
        if dim is None:
            out.append(Partial() if spmd.axis_type(a) is P else Replicate())
            continue
        order = [names.index(x) for x in spmd.spec.dims[dim]]
        if order != sorted(order):  # DTensor shards a dim by its mesh axes in mesh order
            return None
        out.append(Shard(dim))
    return out


def _one_rank(
    rows: Sequence[Tuple[str, Spmd, Spmd]], mesh_sizes: Mapping[str, int], shape: Tuple[int, ...]
) -> Dict[str, Optional[Tuple[int, Tuple[str, ...]]]]:
    """Every row's (received elements, collectives) on this rank's mesh."""
    import torch.distributed.tensor._collective_utils as collective_utils
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    names = list(mesh_sizes)
    mesh = init_device_mesh("cpu", tuple(mesh_sizes.values()), mesh_dim_names=tuple(names))
    stride = tuple(math.prod(shape[k + 1 :]) for k in range(len(shape)))
    out: Dict[str, Optional[Tuple[int, Tuple[str, ...]]]] = {}
    for name, src, dst in rows:
        src_p, dst_p = _placements(src, names), _placements(dst, names)
        if src_p is None or dst_p is None:
            out[name] = None
            continue
        local = torch.zeros(local_shape(src, shape, mesh_sizes))
        x = DTensor.from_local(local, mesh, src_p, run_check=False, shape=torch.Size(shape), stride=stride)
        with mock.patch.object(collective_utils, "local_tensor_mode", lambda: object()), _CountReceived() as count:
            y = x.redistribute(mesh, dst_p).to_local()
        assert tuple(y.shape) == local_shape(dst, shape, mesh_sizes), (name, tuple(y.shape))
        out[name] = (count.elements, tuple(count.ops))
    return out


def dtensor_volumes(
    rows: Sequence[Tuple[str, Spmd, Spmd]], mesh_sizes: Mapping[str, int], shape: Tuple[int, ...]
) -> Dict[str, Optional[DTensorResult]]:
    """Per row name: DTensor's max received volume / N and its collectives (None: no placements)."""
    logging.getLogger("torch.distributed.tensor").setLevel(logging.ERROR)  # its "suboptimal" warnings
    if dist.is_initialized():
        raise RuntimeError("dtensor_volume: a process group is already initialized in this process")
    world = math.prod(mesh_sizes.values())
    per_rank = []
    for rank in range(world):
        dist.init_process_group("fake", rank=rank, world_size=world)
        try:
            per_rank.append(_one_rank(rows, mesh_sizes, shape))
        finally:
            dist.destroy_process_group()
    n = math.prod(shape)
    out: Dict[str, Optional[DTensorResult]] = {}
    for name, _, _ in rows:
        got = [r[name] for r in per_rank]
        if any(g is None for g in got):
            out[name] = None
            continue
        out[name] = (Fraction(max(g[0] for g in got if g is not None), n), got[0][1] if got[0] else ())
    return out
