"""Simulated ranks in one process, for examples, notebooks and tests.

    with spmd.simulate(tp=4) as sim:
        x = sim.per_rank(lambda r: x_full[r * 2 : (r + 1) * 2])   # each rank's shard
        y = spmd.all_gather(x, "tp", src=S(0), dst=R)
        sim.rank(y, 3)                                            # rank 3's tensor

Every rank's tensor lives in this process (torch's simulated-rank mode over
its fake process group), collectives run for real on them, and autograd
works across them.  The mesh's dims are the keyword names, in order; it is
the current mesh inside the block.  The private torch API it uses stays in
runtime/_local.py.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Iterator

import torch.distributed as dist
from torch import Tensor
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from . import _local
from .mesh import set_mesh


class Simulation:
    """The simulated ranks of a `simulate` block."""

    def __init__(self, mesh: DeviceMesh, mode: Any) -> None:
        self.mesh = mesh
        self.world_size = mesh.size()
        self._mode = mode

    def per_rank(self, make: Callable[[int], Tensor]) -> Tensor:
        """A tensor whose value on rank r is make(r)."""
        return _local.rank_map(self._mode, make)

    def rank(self, t: Tensor, r: int) -> Tensor:
        """Rank r's local tensor of `t` (a tensor made inside the block)."""
        return _local.on_rank(t, r)


@contextlib.contextmanager
def simulate(**axes: int) -> Iterator[Simulation]:
    """A mesh of simulated ranks named and sized by `axes` (in order), current
    inside the block.  Starts torch's fake process group of the mesh's size if
    no process group is running (one of that size is reused)."""
    if not axes:
        raise ValueError("spmd.simulate needs at least one mesh axis, e.g. simulate(tp=4)")
    size = math.prod(axes.values())
    if not dist.is_initialized():
        dist.init_process_group("fake", rank=0, world_size=size)
    elif dist.get_world_size() != size:
        raise ValueError(
            f"spmd.simulate({', '.join(f'{k}={v}' for k, v in axes.items())}) needs {size} ranks, "
            f"but a process group of {dist.get_world_size()} is running"
        )
    mesh = init_device_mesh("cpu", tuple(axes.values()), mesh_dim_names=tuple(axes))
    with _local.local_mode(size) as mode, set_mesh(mesh):
        yield Simulation(mesh, mode)
