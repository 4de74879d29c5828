"""spmd.redistribute(x, src=Spmd(...), dst=Spmd(...)) and the global-mode ops, run.

Every case is checked against values computed here from full tensors, without
the package: the per-rank inputs are cut from a random full tensor by the src
type (Partial axes: random per-rank addends that sum to it); after the call,
the full tensor reassembled from the per-rank outputs by the dst type must be
the same value, and ranks that replicate (R/I) must hold the same tensor.
Backward: the output gradient is cut from a random full gradient by the
gradient type of dst (R <-> P, I and S(i) stay); the input gradient must
reassemble, by the gradient type of src, to the same full gradient (the
gradient of a value-preserving move is the same move of the gradient).

Where: the dp=2 x tp=2 cases on 4 simulated ranks in this process and on 4
real gloo processes (one spawn for all cases); the dp=4 x tp=8 rows of the
targets, and steps over sub-groups of a pp=2 x dp=4 x tp=4 mesh, on 32
simulated ranks in one subprocess (a fake process group has one world size
per process).
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import subprocess
import sys
import traceback
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import pytest
import torch
from torch import Tensor

import spmd_mypy as spmd
from gloo_harness import GlooRun, checked_run, float64_of, plain
from spmd_mypy import I, P, PartitionSpec, R, S, Spmd

PS = PartitionSpec
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# -- the cases ----------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    mesh: Tuple[Tuple[str, int], ...]
    src: Spmd
    dst: Spmd
    shape: Tuple[int, ...]
    ops: Tuple[str, ...]  # the plan's steps, so each runner form is known to be covered


M22 = (("dp", 2), ("tp", 2))
M48 = (("dp", 4), ("tp", 8))
M244 = (("pp", 2), ("dp", 4), ("tp", 4))


def _c(id: str, src: Spmd, dst: Spmd, shape: Tuple[int, ...], ops: Tuple[str, ...], mesh=M22) -> Case:
    return Case(id, mesh, src, dst, shape, ops)


CASES_2x2: List[Case] = [
    # The rows of the targets table (mesh dp=2, tp=2).
    _c("row.S0dp_S1tp-R", Spmd(spec=PS("dp", "tp")), Spmd(spec=PS(None, None)), (8, 4), ("all_gather",)),
    _c("row.S0tp-S1tp", Spmd(spec=PS("tp", None)), Spmd(spec=PS(None, "tp")), (4, 6), ("all_to_all",)),
    _c("row.swap", Spmd(spec=PS("dp", "tp")), Spmd(spec=PS("tp", "dp")), (4, 6), ("permute",)),
    _c("row.dim_order", Spmd(spec=PS(("dp", "tp"), None)), Spmd(spec=PS(("tp", "dp"), None)), (8, 3), ("permute",)),
    _c("row.S0dptp-S0tp", Spmd(spec=PS(("dp", "tp"), None)), Spmd(spec=PS("tp", None)), (8, 3), ("exchange",)),
    _c("row.Pdp_Ptp-R", Spmd(spec=PS(None, None), dp=P, tp=P), Spmd(spec=PS(None, None)), (3, 4), ("all_reduce",)),
    _c("row.Pdp_Ptp-S0dptp", Spmd(spec=PS(None, None), dp=P, tp=P), Spmd(spec=PS(("dp", "tp"), None)), (8, 3),
       ("reduce_scatter",)),
    # Every other runner form.
    _c("Pdp_Ptp-S1dp_S0tp", Spmd(spec=PS(None, None), dp=P, tp=P), Spmd(spec=PS("tp", "dp")), (4, 6),
       ("reduce_scatter",)),
    _c("Pdp_S0tp-S0dptp", Spmd(spec=PS("tp", None), dp=P), Spmd(spec=PS(("dp", "tp"), None)), (8, 2),
       ("reduce_scatter", "permute")),
    _c("Pdp-S0tp", Spmd(spec=PS(None, None), dp=P), Spmd(spec=PS("tp", None)), (4, 3), ("convert", "all_reduce")),
    _c("Idp-S0dp_S1tp", Spmd(spec=PS(None, None), dp=I), Spmd(spec=PS("dp", "tp")), (4, 6), ("convert", "convert")),
    _c("S0dp-Idp", Spmd(spec=PS("dp", None)), Spmd(spec=PS(None, None), dp=I), (4, 3), ("all_gather",)),
    _c("Pdp_Ptp-Idp", Spmd(spec=PS(None, None), dp=P, tp=P), Spmd(spec=PS(None, None), dp=I), (2, 3),
       ("all_reduce", "convert")),
    _c("R-Ptp", Spmd(spec=PS(None, None)), Spmd(spec=PS(None, None), tp=P), (2, 3), ("convert",)),
    _c("Idp-R", Spmd(spec=PS(None, None), dp=I), Spmd(spec=PS(None, None)), (2, 3), ("convert",)),
    _c("S0tpdp-R", Spmd(spec=PS(("tp", "dp"), None)), Spmd(spec=PS(None, None)), (8, 3), ("all_gather",)),
    _c("S1tp-S0dptp", Spmd(spec=PS(None, "tp")), Spmd(spec=PS(("dp", "tp"), None)), (8, 4),
       ("convert", "all_to_all")),
    _c("3d.S0dp_S2tp-S1dptp", Spmd(spec=PS("dp", None, "tp")), Spmd(spec=PS(None, ("dp", "tp"), None)), (2, 4, 4),
       ("exchange",)),
    _c("per_axis.swap", Spmd(dp=S(0), tp=S(-1)), Spmd(dp=S(1), tp=S(0)), (4, 2), ("permute",)),
]

CASES_32: List[Case] = [
    _c("row48.swap", Spmd(spec=PS("dp", "tp")), Spmd(spec=PS("tp", "dp")), (8, 8), ("exchange",), M48),
    _c("row48.Pdp_Ptp-R", Spmd(spec=PS(None, None), dp=P, tp=P), Spmd(spec=PS(None, None)), (2, 3),
       ("all_reduce",), M48),
    _c("row48.S0dptp-S0tp", Spmd(spec=PS(("dp", "tp"), None)), Spmd(spec=PS("tp", None)), (32, 2),
       ("exchange",), M48),
    _c("48.S0dp_S1tp-R", Spmd(spec=PS("dp", "tp")), Spmd(spec=PS(None, None)), (4, 8), ("all_gather",), M48),
    _c("48.Pdp_Ptp-S0dptp", Spmd(spec=PS(None, None), dp=P, tp=P), Spmd(spec=PS(("dp", "tp"), None)), (32, 1),
       ("reduce_scatter",), M48),
    # A 3-axis mesh of the same 32 ranks: steps over sub-groups of the mesh.
    _c("244.S0tp-S0dp", Spmd(spec=PS("tp", None)), Spmd(spec=PS("dp", None)), (8, 2), ("exchange",), M244),
    _c("244.Pdp-S0dppp", Spmd(spec=PS(None, None), dp=P), Spmd(spec=PS(("dp", "pp"), None)), (8, 2),
       ("convert", "reduce_scatter", "permute"), M244),
    _c("244.swap", Spmd(spec=PS("dp", "tp")), Spmd(spec=PS("tp", "dp")), (4, 4), ("permute",), M244),
    _c("244.S0tppp_S1dp-R", Spmd(spec=PS(("tp", "pp"), "dp")), Spmd(spec=PS(None, None)), (8, 4),
       ("all_gather",), M244),
]
MESHES_32 = {M48: (4, 8), M244: (2, 4, 4)}


def test_cases_cover_every_runner_form() -> None:
    seen = set()
    for c in CASES_2x2:
        plan = spmd.plan_redistribute(c.src, c.dst, c.shape, dict(c.mesh))
        assert tuple(s.op for s in plan.steps) == c.ops, (c.id, plan.text())
        seen |= {(s.op, s.flat_types() is not None) for s in plan.steps}
    assert seen >= {
        ("all_gather", True), ("all_gather", False), ("reduce_scatter", True), ("reduce_scatter", False),
        ("all_reduce", True), ("all_to_all", True), ("convert", True), ("permute", False), ("exchange", False),
    }
    for c in CASES_32:
        plan = spmd.plan_redistribute(c.src, c.dst, c.shape, dict(c.mesh))
        assert tuple(s.op for s in plan.steps) == c.ops, (c.id, plan.text())


# -- the reference: full tensors <-> per-rank tensors, written from the types ----------


def coords(rank: int, mesh: Sequence[Tuple[str, int]]) -> Dict[str, int]:
    out = {}
    for a, n in reversed(mesh):
        out[a] = rank % n
        rank //= n
    return out


def spec_dims(t: Spmd, ndim: int) -> List[Tuple[str, ...]]:
    """The axes sharding each dim; the per-axis form has one axis per dim at most."""
    if t.spec is not None:
        return list(t.spec.dims)
    dims: List[Tuple[str, ...]] = [() for _ in range(ndim)]
    for a, x in t.axes.items():
        if isinstance(x, type(S(0))):
            dims[x.dim % ndim] += (a,)
    return dims


def kind(t: Spmd, axis: str, ndim: int) -> str:
    if any(axis in d for d in spec_dims(t, ndim)):
        return "S"
    return str(t.axes.get(axis, R))


def grad_kinds(t: Spmd, mesh, ndim: int) -> Tuple[List[Tuple[str, ...]], Dict[str, str]]:
    """The gradient's layout: the same dims; R <-> P, I stays."""
    swap = {"R": "P", "P": "R", "I": "I"}
    return spec_dims(t, ndim), {a: swap[kind(t, a, ndim)] for a, _ in mesh if kind(t, a, ndim) != "S"}


def layout(t: Spmd, mesh, ndim: int) -> Tuple[List[Tuple[str, ...]], Dict[str, str]]:
    return spec_dims(t, ndim), {a: kind(t, a, ndim) for a, _ in mesh if kind(t, a, ndim) != "S"}


def tile(dims, shape, mesh, c) -> Tuple[slice, ...]:
    sizes = dict(mesh)
    out = []
    for j, axes in enumerate(dims):
        block, parts = 0, 1
        for a in axes:
            block = block * sizes[a] + c[a]
            parts *= sizes[a]
        n = shape[j] // parts
        out.append(slice(block * n, (block + 1) * n))
    return tuple(out)


def values(tag: str, shape: Sequence[int]) -> Tensor:
    gen = torch.Generator().manual_seed(zlib.crc32(tag.encode()))
    return torch.randint(-9, 10, tuple(shape), generator=gen).to(torch.float64)


def distribute(full: Tensor, lay, mesh, tag: str) -> Dict[int, Tensor]:
    """Per-rank tensors of type `lay` whose value is `full`."""
    dims, other = lay
    partial = [a for a, k in other.items() if k == "P"]
    world = 1
    for _, n in mesh:
        world *= n
    out = {}
    for r in range(world):
        c = coords(r, mesh)
        box = tile(dims, full.shape, mesh, c)
        piece = full[box].clone()
        if partial:  # addends: random on every coordinate but the first, which takes the rest
            first = all(c[a] == 0 for a in partial)
            group = tuple((b.start, b.stop) for b in box)  # replicas (R/I) get the same addends
            if first:
                rest = torch.zeros_like(piece)
                for k in itertools.product(*[range(dict(mesh)[a]) for a in partial]):
                    if any(k):
                        rest += values(f"{tag}|{group}|{k}", piece.shape)
                piece = piece - rest
            else:
                piece = values(f"{tag}|{group}|{tuple(c[a] for a in partial)}", piece.shape)
        out[r] = piece
    return out


def assemble(locals_: Mapping[int, Tensor], lay, shape, mesh) -> Tensor:
    """The full tensor of per-rank tensors of type `lay`; replicas must agree."""
    dims, other = lay
    replicated = [a for a, k in other.items() if k in ("R", "I")]
    full = torch.zeros(shape, dtype=torch.float64)
    first: Dict[Tuple[Any, ...], Tensor] = {}
    for r, t in sorted(locals_.items()):
        c = coords(r, mesh)
        box = tile(dims, shape, mesh, c)
        assert tuple(t.shape) == tuple(full[box].shape), f"rank {r}: local shape {tuple(t.shape)}"
        rep_key = tuple((a, v) for a, v in sorted(c.items()) if a not in replicated)
        if rep_key in first:
            assert torch.equal(first[rep_key], t), f"rank {r} differs from its replica"
            continue
        first[rep_key] = t
        full[box] += t  # each Partial coordinate adds its addend once
    return full


def expected_io(case: Case) -> Tuple[Tensor, Dict[int, Tensor], Tensor, Dict[int, Tensor]]:
    """(full x, per-rank x, full output gradient, per-rank output gradients)."""
    nd = len(case.shape)
    full = values(f"{case.id}|x", case.shape)
    xs = distribute(full, layout(case.src, case.mesh, nd), case.mesh, f"{case.id}|xp")
    gfull = values(f"{case.id}|g", case.shape)
    gs = distribute(gfull, grad_kinds(case.dst, case.mesh, nd), case.mesh, f"{case.id}|gp")
    return full, xs, gfull, gs


def check_results(case: Case, ys: Mapping[int, Tensor], gxs: Mapping[int, Tensor]) -> None:
    nd = len(case.shape)
    full, _, gfull, _ = expected_io(case)
    got = assemble(ys, layout(case.dst, case.mesh, nd), case.shape, case.mesh)
    torch.testing.assert_close(got, full, rtol=0, atol=0, msg=lambda m: f"{case.id} forward: {m}")
    gx = assemble(gxs, grad_kinds(case.src, case.mesh, nd), case.shape, case.mesh)
    torch.testing.assert_close(gx, gfull, rtol=0, atol=0, msg=lambda m: f"{case.id} backward: {m}")


def test_reference_round_trip() -> None:
    """Control: distribute then assemble is the identity, for every type used."""
    for case in CASES_2x2:
        for t in (case.src, case.dst):
            lay = layout(t, case.mesh, len(case.shape))
            full = values(case.id, case.shape)
            parts = distribute(full, lay, case.mesh, "rt")
            assert torch.equal(assemble(parts, lay, case.shape, case.mesh), full)


def test_reference_catches_a_wrong_layout() -> None:
    """Control: data of the src type read as the dst type is caught."""
    case = CASES_2x2[2]  # the swap: same local shapes, different layout
    full = values("control", case.shape)
    parts = distribute(full, layout(case.src, case.mesh, 2), case.mesh, "c")
    assert not torch.equal(assemble(parts, layout(case.dst, case.mesh, 2), case.shape, case.mesh), full)


# -- simulated ranks ----------------------------------------------------------------------


def run_simulated(case: Case, mesh_obj: Any, world: int) -> Tuple[Dict[int, Tensor], Dict[int, Tensor]]:
    from torch.distributed._local_tensor import LocalTensorMode

    _, xs, _, gs = expected_io(case)
    with LocalTensorMode(world) as mode, spmd.set_mesh(mesh_obj):
        x = mode.rank_map(lambda r: xs[r].clone()).requires_grad_()
        y = spmd.redistribute(x, src=case.src, dst=case.dst)
        y.backward(mode.rank_map(lambda r: gs[r].clone()))
        assert x.grad is not None
        ys = {r: y._local_tensors[r].detach().clone() for r in range(world)}
        gxs = {r: x.grad._local_tensors[r].clone() for r in range(world)}
    return ys, gxs


@pytest.mark.parametrize("case", CASES_2x2, ids=lambda c: c.id)
def test_simulated_2x2(sim: Any, case: Case) -> None:
    ys, gxs = run_simulated(case, sim.meshes["2d"], 4)
    check_results(case, ys, gxs)


def test_simulated_double_backward_of_an_exchange(sim: Any) -> None:
    """create_graph=True: the backward's own backward is the forward move again."""
    from torch.distributed._local_tensor import LocalTensorMode

    case = next(c for c in CASES_2x2 if c.id == "row.S0dptp-S0tp")
    _, xs, _, gs = expected_io(case)
    nd = len(case.shape)
    wfull = values("w", case.shape)
    # w is the gradient of gx (type grad(src)), so it has type grad(grad(src)) = src.
    ws = distribute(wfull, layout(case.src, case.mesh, nd), case.mesh, "wp")
    with LocalTensorMode(4) as mode, spmd.set_mesh(sim.meshes["2d"]):
        x = mode.rank_map(lambda r: xs[r].clone()).requires_grad_()
        gy = mode.rank_map(lambda r: gs[r].clone()).requires_grad_()
        y = spmd.redistribute(x, src=case.src, dst=case.dst)
        (gx,) = torch.autograd.grad(y, x, gy, create_graph=True)
        (ggy,) = torch.autograd.grad(gx, gy, mode.rank_map(lambda r: ws[r].clone()))
        got = {r: ggy._local_tensors[r].clone() for r in range(4)}
    # d<gx, w>/d gy is the forward move of w: of type grad(grad(dst)) = dst, value wfull.
    back = assemble(got, layout(case.dst, case.mesh, nd), case.shape, case.mesh)
    assert torch.equal(back, wfull)


def _run_sim32() -> None:
    """Subprocess entry: the 32-rank cases on simulated ranks; JSON on stdout."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("fake", rank=0, world_size=32)
    meshes = {
        m: init_device_mesh("cpu", shape, mesh_dim_names=tuple(a for a, _ in m))
        for m, shape in MESHES_32.items()
    }
    results = {}
    for case in CASES_32:
        try:
            ys, gxs = run_simulated(case, meshes[case.mesh], 32)
            check_results(case, ys, gxs)
            results[case.id] = "ok"
        except Exception:
            results[case.id] = traceback.format_exc()
    dist.destroy_process_group()
    print("RESULTS " + json.dumps(results), flush=True)


@pytest.fixture(scope="module")
def sim32() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parent), str(ROOT), env.get("PYTHONPATH", "")])
    code = "import test_redistribute_spec as t; t._run_sim32()"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=300
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS ")]
    if proc.returncode != 0 or not lines:
        pytest.fail(f"the 32-rank subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return json.loads(lines[-1][len("RESULTS "):])


@pytest.mark.parametrize("case", CASES_32, ids=lambda c: c.id)
def test_simulated_32_ranks(sim32: Dict[str, str], case: Case) -> None:
    assert sim32.get(case.id) == "ok", sim32.get(case.id)


# -- validation before communication --------------------------------------------------------


@pytest.fixture
def no_funcol(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exchange's functional all_to_all_single fails if called (no_comms covers c10d)."""
    import torch.distributed._functional_collectives as funcol

    def fail(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("all_to_all_single was called")

    monkeypatch.setattr(funcol, "all_to_all_single", fail)


def test_no_funcol_catches_an_exchange(sim: Any, no_funcol: None) -> None:
    """Control for the next test: a valid exchange does reach the patched call."""
    from torch.distributed._local_tensor import LocalTensorMode

    case = next(c for c in CASES_2x2 if c.id == "row.swap")
    _, xs, _, _ = expected_io(case)
    with LocalTensorMode(4) as mode, spmd.set_mesh(sim.meshes["2d"]):
        x = mode.rank_map(lambda r: xs[r].clone())
        with pytest.raises(AssertionError, match="all_to_all_single was called"):
            spmd.redistribute(x, src=case.src, dst=case.dst)


def test_rejections_before_any_communication(sim: Any, no_comms: None, no_funcol: None) -> None:
    x = torch.ones(4, 4, dtype=torch.float64)
    src, dst = Spmd(spec=PS("dp", None)), Spmd(spec=PS(None, None))
    with spmd.set_mesh(sim.meshes["2d"]):
        with pytest.raises(spmd.CollectiveError, match="either an axis and per-axis types"):
            spmd.redistribute(x, "tp", src=src, dst=dst)
        with pytest.raises(spmd.CollectiveError, match="either an axis and per-axis types"):
            spmd.redistribute(x, src=P, dst=R)
        with pytest.raises(spmd.CollectiveError, match="neither expert_mode nor split_sizes"):
            spmd.redistribute(x, src=src, dst=dst, split_sizes=[1, 3])
        with pytest.raises(spmd.CollectiveError, match=r"axis 'tp' goes from R to I"):
            spmd.redistribute(x, src=src, dst=Spmd(spec=PS(None, None), tp=I))
        with pytest.raises(spmd.CollectiveError, match="not divisible by 2"):
            spmd.redistribute(torch.ones(3, 3), src=src, dst=Spmd(spec=PS("dp", "tp")))
        with pytest.raises(spmd.CollectiveError, match="has rank 2"):
            spmd.redistribute(torch.ones(4), src=src, dst=dst)
        plan = spmd.plan_redistribute(src, dst, (8, 4), {"dp": 2, "tp": 2})
        from spmd_mypy.runtime.redistribute_spec import run_plan

        with pytest.raises(spmd.CollectiveError, match=r"local shape \(4, 4\)"):
            run_plan(torch.ones(2, 4), plan)
        with pytest.raises(spmd.CollectiveError, match="plan is for mesh"):
            run_plan(x, spmd.plan_redistribute(src, dst, (8, 4), {"dp": 2, "tp": 2, "pp": 1}))
    with pytest.raises(spmd.CollectiveError, match="set_mesh"):
        spmd.redistribute(x, src=src, dst=dst)


def test_per_axis_redistribute_still_works(sim: Any) -> None:
    x = torch.arange(12, dtype=torch.float64).reshape(4, 3)
    with spmd.set_mesh(sim.meshes["2d"]):
        y = spmd.redistribute(x, "tp", src=R, dst=R)
        assert y is x
        assert spmd.redistribute(x, axis="dp", src=R, dst=S(0)).shape == (2, 3)


def test_identity_returns_the_input(sim: Any) -> None:
    x = torch.ones(2, 2)
    t = Spmd(spec=PS("dp", None))
    with spmd.set_mesh(sim.meshes["2d"]):
        assert spmd.redistribute(x, src=t, dst=t) is x


# -- global ops ------------------------------------------------------------------------------


def _shards(full: Tensor, dim: int, n: int) -> List[Tensor]:
    return list(full.chunk(n, dim))


@pytest.mark.parametrize("op", ["matmul", "einsum", "linear", "linear_bias_partial", "sum", "sum_dims", "mean"])
def test_out_partial_axes_sum_over_ranks_is_the_full_op(sim: Any, op: str) -> None:
    n = 2  # tp
    h = values("h", (3, 8))
    w = values("w", (8, 5))
    x = values("x", (6, 4))
    with spmd.set_mesh(sim.meshes["2d"]):
        if op == "matmul":
            parts = [spmd.matmul(a, b, out_partial_axes="tp") for a, b in zip(_shards(h, 1, n), _shards(w, 0, n))]
            want = h @ w
        elif op == "einsum":
            parts = [spmd.einsum("ik,kj->ij", a, b, out_partial_axes=("tp",))
                     for a, b in zip(_shards(h, 1, n), _shards(w, 0, n))]
            want = torch.einsum("ik,kj->ij", h, w)
        elif op in ("linear", "linear_bias_partial"):
            wt = w.T.contiguous()  # (out, in): the contracted dim is 1
            bias = values("b", (5,))
            if op == "linear":
                parts = [spmd.linear(a, b, out_partial_axes="tp") for a, b in zip(_shards(h, 1, n), _shards(wt, 1, n))]
                want = h @ w
            else:  # a Partial bias: its addends sum to the bias
                bias_parts = [bias - 1.0, torch.ones(5, dtype=torch.float64)]
                parts = [spmd.linear(a, b, c, out_partial_axes="tp")
                         for a, b, c in zip(_shards(h, 1, n), _shards(wt, 1, n), bias_parts)]
                want = h @ w + bias
        elif op == "sum":
            parts = [spmd.sum(a, out_partial_axes="tp") for a in _shards(x, 0, n)]
            want = x.sum()
        elif op == "sum_dims":
            parts = [spmd.sum(a, (0,), keepdim=True, out_partial_axes="tp") for a in _shards(x, 0, n)]
            want = x.sum(0, keepdim=True)
        else:
            parts = [spmd.mean(a, 0, out_partial_axes="tp") for a in _shards(x, 0, n)]
            want = x.mean(0)
    torch.testing.assert_close(parts[0] + parts[1], want, rtol=0, atol=1e-12)
    assert not torch.allclose(parts[0], want)  # each rank holds only its addend


def test_mean_over_two_axes_divides_by_both(sim: Any) -> None:
    x = values("x2", (8, 3))
    with spmd.set_mesh(sim.meshes["2d"]):
        parts = [spmd.mean(a, out_partial_axes=("dp", "tp")) for a in x.chunk(4, 0)]
        plain = spmd.mean(x)
    torch.testing.assert_close(sum(parts), x.mean(), rtol=0, atol=1e-12)
    assert torch.equal(plain, x.mean())


def test_out_partial_axes_is_validated(sim: Any) -> None:
    a = torch.ones(2, 2)
    with spmd.set_mesh(sim.meshes["2d"]):
        with pytest.raises(spmd.CollectiveError, match="'ep', which is not a dim"):
            spmd.matmul(a, a, out_partial_axes="ep")
        with pytest.raises(spmd.CollectiveError, match="twice"):
            spmd.sum(a, out_partial_axes=("tp", "tp"))
        with pytest.raises(spmd.CollectiveError, match="axis name or a tuple"):
            spmd.einsum("ij->i", a, out_partial_axes=["tp"])  # type: ignore[arg-type]
    with pytest.raises(spmd.CollectiveError, match="needs a mesh"):
        spmd.mean(a, out_partial_axes="tp")
    assert torch.equal(spmd.matmul(a, a, out_partial_axes="tp"), a @ a)  # no mesh: names unchecked


# -- pass-throughs ------------------------------------------------------------------------------


def _f(x: Tensor, scale: float = 2.0, *, shift: int = 1) -> Tensor:
    """Doc of f."""
    return x * scale + shift


def test_local_map_keeps_behaviour_and_signature() -> None:
    t = Spmd(spec=PS("tp", None))
    g = spmd.local_map(_f, in_types=(t, None), out_types=t)
    assert inspect.signature(g) == inspect.signature(_f)
    assert g.__name__ == "_f" and g.__doc__ == "Doc of f."
    x = torch.arange(3.0)
    assert torch.equal(g(x, 3.0, shift=2), _f(x, 3.0, shift=2))

    @spmd.local_map(in_types=t, out_types=t)
    def h(x: Tensor) -> Tensor:
        return x + 1

    assert list(inspect.signature(h).parameters) == ["x"]
    assert torch.equal(h(x), x + 1)
    with pytest.raises(TypeError, match="Spmd"):
        spmd.local_map(_f, in_types=("tp",))  # type: ignore[arg-type]


def test_global_spmd_returns_the_function() -> None:
    assert spmd.global_spmd(_f) is _f
    marked = spmd.global_spmd(axes=("tp",))(_f)
    assert marked is _f and inspect.signature(marked) == inspect.signature(_f)
    assert _f.__spmd_global_axes__ == ("tp",)  # type: ignore[attr-defined]

    @spmd.global_spmd
    class Block(torch.nn.Module):
        def forward(self, x: Tensor) -> Tensor:
            return x

    assert Block.__name__ == "Block" and isinstance(Block(), torch.nn.Module)
    with pytest.raises(TypeError):
        spmd.global_spmd(axes=3)  # type: ignore[call-overload]


def test_new_names_are_exported() -> None:
    for name in ("plan_redistribute", "RedistPlan", "matmul", "einsum", "linear", "mean",
                 "global_spmd", "local_map"):
        assert name in spmd.__all__ and callable(getattr(spmd, name))
    assert "sum" not in spmd.__all__ and callable(spmd.sum)  # star-import keeps the builtin


def test_plan_redistribute_does_not_import_torch() -> None:
    code = (
        "import sys, spmd_mypy as s\n"
        "p = s.plan_redistribute(s.Spmd(spec=s.PartitionSpec('dp', 'tp')),"
        " s.Spmd(spec=s.PartitionSpec(None, None)), (64, 64), {'dp': 2, 'tp': 2})\n"
        "assert p.volume == 0.75, p\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), check=True, timeout=120)


# -- real ranks: 4 gloo processes, dp=2 x tp=2 ---------------------------------------------------

WORLD = 4
DEADLINE_S = 180.0


def _gloo_cases() -> List[Case]:
    return list(CASES_2x2)


def _gloo_setup(rank: int) -> Tuple[Any, None]:
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp")), None


def _gloo_case(case: Case, rank: int, mesh: Any) -> Tuple[Any, Any]:
    """One real rank's case forward and backward: (output, input gradient) as plain data."""
    _, xs, _, gs = expected_io(case)
    x = xs[rank].clone().requires_grad_()
    with spmd.set_mesh(mesh):
        y = spmd.redistribute(x, src=case.src, dst=case.dst)
        y.backward(gs[rank].clone())
    assert x.grad is not None
    return plain(y), plain(x.grad)


@pytest.fixture(scope="module")
def gloo_results() -> GlooRun:
    return checked_run(_gloo_setup, _gloo_case, _gloo_cases, world=WORLD, deadline_s=DEADLINE_S, timeout_s=60)


@pytest.mark.gloo
@pytest.mark.parametrize("case", CASES_2x2, ids=lambda c: c.id)
def test_gloo_2x2(gloo_results: GlooRun, case: Case) -> None:
    per_rank = gloo_results.per_rank(case.id)
    ys = {r: float64_of(per_rank[r][0]) for r in range(WORLD)}
    gxs = {r: float64_of(per_rank[r][1]) for r in range(WORLD)}
    check_results(case, ys, gxs)
