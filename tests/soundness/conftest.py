"""Fixtures of the differential soundness test: the simulated dp x tp mesh, mypy's cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest


@pytest.fixture(scope="module")
def mesh2d() -> Iterator[Any]:
    """A 2 x 2 DeviceMesh ("dp", "tp") over torch's fake process group of 4 simulated ranks.

    Reuses a fake group of 4 that another test module already set up (the
    runtime tests keep one for the session); otherwise owns one for this
    module and destroys it afterwards.
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    owned = False
    if dist.is_initialized():
        if dist.get_world_size() != 4:  # pragma: no cover - another suite's group
            pytest.skip("a process group of another size is initialized in this process")
    else:
        dist.init_process_group("fake", rank=0, world_size=4)
        owned = True
    try:
        yield init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    finally:
        if owned:
            dist.destroy_process_group()


@pytest.fixture(scope="session")
def soundness_mypy_cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mypy's cache for the generated programs, kept between sessions (torch's modules dominate)."""
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("spmd-soundness-mypy-cache"))
    return tmp_path_factory.mktemp("soundness-mypy-cache")
