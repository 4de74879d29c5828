"""Every case of the table on real ranks: 4 spawned processes, gloo on 127.0.0.1.

The workers are spawned once for the module (tests/gloo_harness.py: the
spawn, the queue and the teardown trap).  Each builds both meshes, runs
every case of cases.py forward and backward (or records the exception of a
rejected form), and sends its per-rank results back as plain Python data.
One parametrized test per case compares the results with the reference.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest
import torch

import cases
from gloo_harness import GlooRun, gloo_available, plain, spawn_and_collect, tensor_of

pytestmark = pytest.mark.gloo

WORLD = cases.WORLD
DEADLINE_S = 120.0  # the whole run; it takes a few seconds


def _cases() -> List[cases.Case]:
    return list(cases.CASES)


def _setup(rank: int) -> Tuple[Dict[str, Any], Any]:
    """Both meshes of the case table; the 2-D mesh's layout is reported."""
    from torch.distributed.device_mesh import init_device_mesh

    meshes = {
        name: init_device_mesh("cpu", shape, mesh_dim_names=dims)
        for name, (shape, dims) in cases.MESH_SHAPES.items()
    }
    return meshes, meshes["2d"].mesh.tolist()


def _run_case(case: cases.Case, rank: int, meshes: Dict[str, Any]) -> Tuple[Any, ...]:
    import spmd_mypy as spmd

    if case.rejected:
        x = cases.inputs(case)[rank].clone().requires_grad_()
        kw = cases.api_kwargs(case, rank)
        try:
            if case.mesh is None:
                cases.call(case, x, cases.axis_arg(case, meshes), kw)
            else:
                with spmd.set_mesh(meshes[case.mesh]):
                    cases.call(case, x, cases.axis_arg(case, meshes), kw)
        except spmd.CollectiveError as e:
            return ("raised", type(e).__name__, str(e))
        return ("returned",)
    exp = cases.expected(case)
    x = exp.inputs[rank].clone().requires_grad_()
    kw = cases.api_kwargs(case, rank)
    with spmd.set_mesh(meshes[case.mesh]):
        y = cases.call(case, x, cases.axis_arg(case, meshes), kw)
        y.backward(exp.grads[rank].clone())
    assert x.grad is not None
    return ("ok", plain(y), plain(x.grad))


@pytest.fixture(scope="module")
def gloo_run() -> GlooRun:
    if not gloo_available():
        pytest.skip("this torch has no gloo backend")
    return spawn_and_collect(_setup, _run_case, _cases, world=WORLD, deadline_s=DEADLINE_S)


def test_gloo_workers_ran(gloo_run: GlooRun) -> None:
    gloo_run.check()
    assert gloo_run.setup_info == {r: [[0, 1], [2, 3]] for r in range(WORLD)}
    assert set(gloo_run.results) == {c.id for c in cases.CASES}
    assert gloo_run.exitcodes == [0] * WORLD, gloo_run.exitcodes


@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.id)
def test_gloo_case(gloo_run: GlooRun, case: cases.Case) -> None:
    per_rank = gloo_run.per_rank(case.id)
    if case.rejected:
        for r in range(WORLD):
            kind = per_rank[r][0]
            assert kind == "raised", f"rank {r}: the rejected form was accepted"
            exc = _collective_error(per_rank[r][2])
            cases.check_rejection(exc, case)
        return
    exp = cases.expected(case)
    for r in range(WORLD):
        _, y, gx = per_rank[r]
        _exact(_float64(y), exp.outputs[r], f"{case.id}: forward on rank {r}")
        _exact(_float64(gx), exp.input_grads[r], f"{case.id}: backward on rank {r}")


def _float64(p: Any) -> torch.Tensor:
    out = tensor_of(p)
    assert out is not None and out.dtype == torch.float64, f"result {p[:2]}"
    return out


def _collective_error(msg: str) -> Exception:
    from spmd_mypy import CollectiveError

    return CollectiveError(msg)


def _exact(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert tuple(actual.shape) == tuple(expected.shape), (
        f"{what}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    )
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=lambda m: f"{what}: {m}")
