"""reinterpret and convert without `spmd.set_mesh`, on 4 simulated ranks.

A coercion whose steps neither communicate nor need the rank runs with an
axis name and no mesh; a step that needs the communicator (a convert that
takes this rank's piece, a backward that sums over the axis) resolves the
name when it runs, or raises CollectiveError naming set_mesh and the
ProcessGroup form.  Expected values are computed here from the design's
meaning of each coercion (identity on the local tensors; the gradient of
convert(I -> R) summed over the tp group; convert(R -> S(0)) keeps the
rank's chunk), not by the package.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch.distributed._local_tensor import LocalTensorMode

import cases
import spmd_mypy as spmd
from spmd_mypy import CollectiveError, I, P, R, S, V

WORLD = cases.WORLD
TP_OF = {r: r % 2 for r in range(WORLD)}  # the 2d mesh: dp major, tp minor
TP_PEER = {r: r ^ 1 for r in range(WORLD)}  # the other rank of r's tp group


def _per_rank(mode: LocalTensorMode, shape: tuple, seed: int) -> Any:
    values = {r: torch.arange(shape[0] * shape[1], dtype=torch.float64).reshape(shape) * (r + 1) + seed for r in range(WORLD)}
    return values, mode.rank_map(lambda r: values[r].clone())


@pytest.mark.parametrize(
    "op,src,dst,expert",
    [("reinterpret", V, P, False), ("reinterpret", R, P, True), ("reinterpret", R, V, True), ("convert", R, R, False)],
)
def test_local_coercions_run_without_mesh(sim: Any, no_comms: None, op: str, src: Any, dst: Any, expert: bool) -> None:
    assert spmd.current_mesh() is None
    with LocalTensorMode(WORLD) as mode:
        xs, x = _per_rank(mode, (2, 3), 0)
        x.requires_grad_()
        y = getattr(spmd, op)(x, "tp", src=src, dst=dst, expert_mode=expert)
        gs, g = _per_rank(mode, (2, 3), 100)
        y.backward(g)
        for r in range(WORLD):
            torch.testing.assert_close(cases.local(y, r).detach(), xs[r], rtol=0, atol=0)
            torch.testing.assert_close(cases.local(x.grad, r), gs[r], rtol=0, atol=0)


def test_convert_i_to_r_forward_without_mesh_backward_needs_one(sim: Any) -> None:
    with LocalTensorMode(WORLD) as mode:
        xs, x = _per_rank(mode, (2, 3), 0)
        x.requires_grad_()
        y = spmd.convert(x, "tp", src=I, dst=R)  # forward: the identity
        for r in range(WORLD):
            torch.testing.assert_close(cases.local(y, r).detach(), xs[r], rtol=0, atol=0)
        gs, g = _per_rank(mode, (2, 3), 100)
        with pytest.raises(CollectiveError, match=r"spmd.convert on axis 'tp'.*no mesh is set.*set_mesh.*ProcessGroup"):
            y.backward(g, retain_graph=True)
        # The backward sums the gradient over tp: a mesh set by then is used.
        with spmd.set_mesh(sim.meshes["2d"]):
            y.backward(g)
        for r in range(WORLD):
            torch.testing.assert_close(cases.local(x.grad, r), gs[r] + gs[TP_PEER[r]], rtol=0, atol=0)


def test_convert_to_shard_needs_the_rank(sim: Any, no_comms: None) -> None:
    with LocalTensorMode(WORLD) as mode:
        _, x = _per_rank(mode, (2, 3), 0)
        with pytest.raises(CollectiveError, match=r"spmd.convert on axis 'tp' \(src=R, dst=S\(0\)\).*no mesh is set"):
            spmd.convert(x, "tp", src=R, dst=S(0))


def test_convert_to_shard_over_a_process_group_without_mesh(sim: Any) -> None:
    world = dist.group.WORLD
    assert world is not None
    with LocalTensorMode(WORLD) as mode:
        full = torch.arange(8 * 3, dtype=torch.float64).reshape(8, 3)
        x = mode.rank_map(lambda r: full.clone())
        y = spmd.convert(x, world, src=R, dst=S(0))
        for r in range(WORLD):
            torch.testing.assert_close(cases.local(y, r), full[2 * r : 2 * r + 2], rtol=0, atol=0)


def test_collectives_still_need_a_mesh_for_names(sim: Any, no_comms: None) -> None:
    with LocalTensorMode(WORLD) as mode:
        _, x = _per_rank(mode, (2, 3), 0)
        with pytest.raises(CollectiveError, match="no mesh is set"):
            spmd.all_reduce(x, "tp", src=P, dst=R)


def test_with_a_mesh_names_resolve_as_before(sim: Any) -> None:
    with LocalTensorMode(WORLD) as mode:
        xs, x = _per_rank(mode, (4, 3), 0)
        with spmd.set_mesh(sim.meshes["2d"]):
            y = spmd.convert(x, "tp", src=R, dst=S(0))
        for r in range(WORLD):
            t = TP_OF[r]
            torch.testing.assert_close(cases.local(y, r), xs[r][2 * t : 2 * t + 2], rtol=0, atol=0)
