"""Fixtures for the runtime tests: simulated ranks in this process.

`sim` initializes torch's fake process group of world size 4 once per
session and builds the two meshes of the case table; each case then runs
under its own LocalTensorMode(4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator

import pytest

import cases


@dataclass
class SimEnv:
    meshes: Dict[str, Any]


@pytest.fixture(scope="session")
def sim() -> Iterator[SimEnv]:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    if dist.is_initialized():  # pragma: no cover - another plugin set one up
        pytest.skip("a process group is already initialized in this process")
    dist.init_process_group("fake", rank=0, world_size=cases.WORLD)
    try:
        meshes = {}
        for name, (shape, dims) in cases.MESH_SHAPES.items():
            meshes[name] = init_device_mesh("cpu", shape, mesh_dim_names=dims)
        yield SimEnv(meshes)
    finally:
        dist.destroy_process_group()


@pytest.fixture
def no_comms(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every collective of torch.distributed fail if it is called."""
    import torch.distributed as dist

    def forbid(name: str):
        def fail(*args: Any, **kwargs: Any) -> None:
            raise AssertionError(f"torch.distributed.{name} was called")

        return fail

    for name in (
        "all_reduce",
        "all_gather_single",
        "reduce_scatter_single",
        "all_to_all_single",
        "all_gather",
        "all_gather_into_tensor",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "all_to_all",
        "broadcast",
        "barrier",
    ):
        if hasattr(dist, name):
            monkeypatch.setattr(dist, name, forbid(name))
