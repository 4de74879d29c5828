"""Rejections under torch.compile, and all_reduce(op="max"/"min"), on simulated ranks.

Under torch.compile a rejected call fails while Dynamo traces it, before any
communication: with fullgraph=True torch reports it as an "Observed
exception" whose text carries the CollectiveError and its exact message; with
graph breaks allowed, torch falls back to eager, which raises the
CollectiveError itself.  The expected message is the eager one.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch
from torch.distributed._local_tensor import LocalTensorMode

import cases
import spmd_mypy as spmd
from spmd_mypy import P, R, V


def _mesh(sim: Any, case: cases.Case) -> Any:
    return spmd.set_mesh(sim.meshes[case.mesh]) if case.mesh else contextlib.nullcontext()


def _eager_message(sim: Any, case: cases.Case, x: torch.Tensor, axis: Any, kw: Any) -> str:
    with _mesh(sim, case), pytest.raises(spmd.CollectiveError) as info:
        cases.call(case, x, axis, kw)
    return str(info.value)


@pytest.mark.parametrize("case", cases.REJECTED, ids=lambda c: c.id)
def test_rejected_under_fullgraph(sim: Any, no_comms: None, case: cases.Case) -> None:
    x = cases.inputs(case)[0].clone().requires_grad_()
    kw = cases.api_kwargs(case, 0)
    axis = cases.axis_arg(case, sim.meshes)
    want = _eager_message(sim, case, x, axis, kw)
    torch._dynamo.reset()
    fn = torch.compile(lambda t: cases.call(case, t, axis, kw), fullgraph=True, backend="eager")
    with _mesh(sim, case), pytest.raises(Exception) as info:
        fn(x)
    got = str(info.value)
    assert f"raised exception CollectiveError({want!r})" in got, got


@pytest.mark.parametrize("case", cases.REJECTED[:6], ids=lambda c: c.id)
def test_rejected_with_graph_breaks_is_the_collective_error(
    sim: Any, no_comms: None, case: cases.Case
) -> None:
    x = cases.inputs(case)[0].clone().requires_grad_()
    kw = cases.api_kwargs(case, 0)
    axis = cases.axis_arg(case, sim.meshes)
    want = _eager_message(sim, case, x, axis, kw)
    torch._dynamo.reset()
    fn = torch.compile(lambda t: cases.call(case, t, axis, kw), backend="eager")
    with _mesh(sim, case), pytest.raises(spmd.CollectiveError) as info:
        fn(x)
    assert str(info.value) == want


# -- all_reduce(op="max" / "min") ------------------------------------------------------


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("mesh,axis", [("1d", "w"), ("2d", "tp"), ("2d", ("dp", "tp"))], ids=str)
def test_max_min_over_the_ranks(sim: Any, op: str, mesh: str, axis: Any) -> None:
    xs = [cases.values(f"maxmin|{r}", (3, 4)) for r in range(cases.WORLD)]
    with LocalTensorMode(cases.WORLD) as mode, spmd.set_mesh(sim.meshes[mesh]):
        x = mode.rank_map(lambda r: xs[r].clone())
        y = spmd.all_reduce(x, axis, src=P, dst=R, op=op)
        for r in range(cases.WORLD):
            group = range(cases.WORLD) if axis != "tp" else [k for k in range(4) if k // 2 == r // 2]
            stacked = torch.stack([xs[k] for k in group])
            want = stacked.amax(0) if op == "max" else stacked.amin(0)
            torch.testing.assert_close(cases.local(y, r), want, rtol=0, atol=0)
            assert not torch.equal(want, stacked.sum(0))  # not the sum by accident


def test_max_rejects_a_tensor_that_records_a_gradient(sim: Any, no_comms: None) -> None:
    x = torch.ones(3, requires_grad=True)
    with spmd.set_mesh(sim.meshes["1d"]):
        with pytest.raises(spmd.CollectiveError, match=r"op='max' has no gradient, but x requires grad"):
            spmd.all_reduce(x, "w", src=P, dst=R, op="max")
        with pytest.raises(spmd.CollectiveError, match=r"op is one of \['max', 'min', 'sum'\]"):
            spmd.all_reduce(x.detach(), "w", src=P, dst=R, op="avg")
        with pytest.raises(spmd.CollectiveError, match="not allowed"):
            spmd.all_reduce(x.detach(), "w", src=V, dst=R, op="min")


def test_max_under_no_grad_is_allowed(sim: Any) -> None:
    xs = [cases.values(f"nograd|{r}", (2,)) for r in range(cases.WORLD)]
    with LocalTensorMode(cases.WORLD) as mode, spmd.set_mesh(sim.meshes["1d"]):
        x = mode.rank_map(lambda r: xs[r].clone()).requires_grad_()
        with torch.no_grad():
            y = spmd.all_reduce(x, "w", src=P, dst=R, op="max")
        assert not y.requires_grad
        torch.testing.assert_close(cases.local(y, 0), torch.stack(xs).amax(0), rtol=0, atol=0)
