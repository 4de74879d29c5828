"""spmd.simulate: simulated ranks in one process through the public API only."""

from __future__ import annotations

import pytest
import torch

import spmd_mypy as spmd
from spmd_mypy import P, R, S, V


def test_gather_and_reduce_on_a_simulated_mesh() -> None:
    full = torch.arange(8.0).reshape(4, 2)
    with spmd.simulate(tp=4) as sim:
        x = sim.per_rank(lambda r: full[r : r + 1].clone())
        gathered = spmd.all_gather(x, "tp", src=S(0), dst=R)
        summed = spmd.all_reduce(spmd.reinterpret(x, "tp", src=V, dst=P), "tp", src=P, dst=R)
        for r in range(4):
            assert torch.equal(sim.rank(x, r), full[r : r + 1])
            assert torch.equal(sim.rank(gathered, r), full)
            assert torch.equal(sim.rank(summed, r), full.sum(0, keepdim=True))
        assert sim.world_size == 4


def test_a_two_dim_mesh_names_its_axes_in_order() -> None:
    with spmd.simulate(dp=2, tp=2) as sim:
        assert sim.mesh.mesh_dim_names == ("dp", "tp")
        assert spmd.current_mesh() is sim.mesh


def test_rank_of_a_plain_tensor_is_an_error() -> None:
    plain = torch.zeros(2)  # made outside the block: one tensor, not one per rank
    with spmd.simulate(tp=4) as sim:
        with pytest.raises(TypeError, match="not a tensor of simulated ranks"):
            sim.rank(plain, 0)


def test_a_mesh_of_another_size_than_the_running_group_is_an_error() -> None:
    with spmd.simulate(tp=4):
        pass  # makes sure a group of 4 runs (or reuses the suite's)
    with pytest.raises(ValueError, match="needs 8 ranks"):
        with spmd.simulate(dp=2, tp=4):
            pass
