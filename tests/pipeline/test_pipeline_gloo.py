"""The typed pipeline of pipeline_programs.py on 4 gloo ranks (mesh pp=2 x
tp=2: ranks 0, 1 run stage 0, ranks 2, 3 stage 1, each stage tensor-parallel
over its two ranks): the fixed step trains to the gradients of one process
running both stages on the full weights (float64, 1e-9), on both stages; the
buggy step, whose send the checker reports, to wrong gradients on both.

The activations go forward and their gradients back only through
spmd.send_next / spmd.recv_prev and autograd: stage 0 runs backward on the
handle its send returned, stage 1 on its loss; a third run takes two
microbatches in 1F1B order.  The communication report's
entries for the two stage functions are checked against the bytes of the
messages the run sent and received.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import torch
import torch.nn.functional as F

from gloo_harness import GlooRun, gloo_available, plain, spawn_and_collect, tensor_of

pytestmark = pytest.mark.gloo

WORLD = 4
TP = 2
TOL = 1e-9
MARGIN = 1e-2
TOKENS, HIDDEN, FFN = 4, 6, 8


@dataclass(frozen=True)
class Item:
    id: str
    first_stage: str  # the stage-0 function of pipeline_programs


def items() -> Tuple[Item, ...]:
    return (
        Item("fixed", "first_stage_fixed"),
        Item("buggy", "first_stage_buggy"),
        Item("1f1b", "first_stage_fixed"),
        Item("edges", ""),
    )


def full_inputs() -> Dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(183)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    return {
        "x": r(TOKENS, HIDDEN), "target": r(TOKENS, HIDDEN),
        "fc1.0": r(FFN, HIDDEN), "fc2.0": r(HIDDEN, FFN),  # stage 0's weights
        "fc1.1": r(FFN, HIDDEN), "fc2.1": r(HIDDEN, FFN),  # stage 1's weights
    }


def reference(microbatches: int = 1) -> Dict[str, torch.Tensor]:
    """Both stages in one process on the full weights: the gradient of each weight
    (summed over the microbatches, the i-th being x + i)."""
    d = full_inputs()
    w = {k: d[k].clone().requires_grad_() for k in ("fc1.0", "fc2.0", "fc1.1", "fc2.1")}
    for i in range(microbatches):
        h = F.linear(F.gelu(F.linear(d["x"] + i, w["fc1.0"])), w["fc2.0"])
        y = F.linear(F.gelu(F.linear(h, w["fc1.1"])), w["fc2.1"])
        ((y - d["target"]) ** 2).sum().backward()
    return {k: t.grad for k, t in w.items()}


def setup(rank: int) -> Tuple[Any, Any]:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2, TP), mesh_dim_names=("pp", "tp"))
    return mesh, (mesh.get_local_rank("pp"), mesh.get_local_rank("tp"))


def _counting(measured: Dict[str, List[int]], phase: List[str]) -> Tuple[Any, Any]:
    """dist.isend / dist.recv wrapped to add each message's bytes to the phase running."""
    import torch.distributed as dist

    send, recv = dist.isend, dist.recv

    def counted(fn: Any) -> Any:
        def call(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            measured.setdefault(phase[0], []).append(tensor.numel() * tensor.element_size())
            return fn(tensor, *args, **kwargs)

        return call

    dist.isend, dist.recv = counted(send), counted(recv)
    return send, recv


def run_item(item: Item, rank: int, mesh: Any) -> Dict[str, Any]:
    import torch.distributed as dist

    if item.id == "edges":
        return _edges(mesh)
    measured: Dict[str, List[int]] = {}
    phase = ["forward"]
    send, recv = _counting(measured, phase)
    try:
        grads = _step(item, mesh, phase)
    finally:
        dist.isend, dist.recv = send, recv
    return {**grads, "messages": measured}


def _step(item: Item, mesh: Any, phase: List[str]) -> Dict[str, Any]:
    import pipeline_programs as prog
    import spmd_mypy as spmd

    d = full_inputs()
    pp, tp = mesh.get_local_rank("pp"), mesh.get_local_rank("tp")
    fc1 = d[f"fc1.{pp}"].chunk(TP, dim=0)[tp].clone()  # column-parallel: S(0)
    fc2 = d[f"fc2.{pp}"].chunk(TP, dim=1)[tp].clone()  # row-parallel: S(1)
    stage = prog.ParallelMLP(fc1, fc2)
    with spmd.set_mesh(mesh):
        if item.id == "1f1b":
            _one_f_one_b(stage, pp, d, phase)
        elif pp == 0:
            done = getattr(prog, item.first_stage)(stage, d["x"])
            phase[0] = "backward"
            done.backward()
        else:
            loss = prog.last_stage(stage, d["target"], (TOKENS, HIDDEN))
            phase[0] = "backward"
            loss.backward()
        prog.finish(stage)
        spmd.wait_sends()
    return {
        "pp": pp, "tp": tp,
        f"fc1.{pp}": plain(stage.fc1_weight.grad), f"fc2.{pp}": plain(stage.fc2_weight.grad),
    }


def _one_f_one_b(stage: Any, pp: int, d: Dict[str, torch.Tensor], phase: List[str]) -> None:
    """Two microbatches, 1F1B on two stages: stage 0 sends microbatch 1 forward
    before it receives microbatch 0's gradient, while stage 1 sends that gradient
    back before it receives microbatch 1 (the steady state's crossing messages)."""
    import pipeline_programs as prog

    phase[0] = "1f1b"
    if pp == 0:
        handles = [prog.first_stage_fixed(stage, d["x"] + i) for i in range(2)]
        for done in handles:
            done.backward()
    else:
        for _ in range(2):
            prog.last_stage(stage, d["target"], (TOKENS, HIDDEN)).backward()


def _edges(mesh: Any) -> Dict[str, Any]:
    """A pipeline is no ring; spmd= must name an Spmd; without gradients a send
    and a receive are plain messages."""
    import spmd_mypy as spmd
    from spmd_mypy import CollectiveError, I, Spmd

    pp = mesh.get_local_rank("pp")
    out: Dict[str, Any] = {"pp": pp}
    x = full_inputs()["x"]
    with spmd.set_mesh(mesh):
        for key, call in (
            ("no_peer", lambda: spmd.recv_prev((2,), "pp", spmd=Spmd(tp=I)) if pp == 0 else spmd.send_next(x, "pp", spmd=Spmd(tp=I))),
            ("not_spmd", lambda: spmd.send_next(x, "pp", spmd=42)),
        ):
            try:
                call()
                out[key] = "no error"
            except CollectiveError as e:
                out[key] = str(e)
        if pp == 0:
            with torch.no_grad():
                out["handle"] = plain(spmd.send_next(x, "pp", spmd=Spmd(tp=I)))
        else:
            got = spmd.recv_prev(x.shape, "pp", spmd=Spmd(tp=I), dtype=x.dtype, requires_grad=False)
            out["received"], out["requires_grad"] = plain(got), got.requires_grad
    return out


def test_edges_no_ring_no_spmd_and_plain_messages(pipeline_run: GlooRun) -> None:
    x = full_inputs()["x"]
    for got in pipeline_run.per_rank("edges").values():
        peer = "previous" if got["pp"] == 0 else "next"
        assert f"stage {got['pp']} of 2 has no {peer} stage" in got["no_peer"], got
        assert "spmd= is the boundary type, an Spmd(...) or an alias" in got["not_spmd"], got
        if got["pp"] == 0:
            assert tensor_of(got["handle"]).shape == () and float(tensor_of(got["handle"])) == 0.0
        else:
            assert torch.equal(tensor_of(got["received"]), x) and got["requires_grad"] is False


@pytest.fixture(scope="module")
def pipeline_run() -> GlooRun:
    if not gloo_available():
        pytest.skip("this torch has no gloo backend")
    return spawn_and_collect(setup, run_item, items, world=WORLD, deadline_s=240.0)


def _errors(run: GlooRun, item_id: str, microbatches: int = 1) -> Dict[str, float]:
    """Per weight, the largest relative error of a rank's gradient shard."""
    ref = reference(microbatches)
    worst: Dict[str, float] = {}
    per_rank = run.per_rank(item_id)
    assert len(per_rank) == WORLD, per_rank
    for got in per_rank.values():
        tp = got["tp"]
        for key, value in got.items():
            if key in ("pp", "tp", "messages"):  # not gradients
                continue
            want = ref[key].chunk(TP, dim=0 if key.startswith("fc1") else 1)[tp]
            t = tensor_of(value)
            err = float("inf") if t is None else (t - want).abs().max().item() / want.abs().max().item()
            worst[key] = max(worst.get(key, 0.0), err)
    return worst


def test_typed_send_recv_trains_to_the_one_process_gradients(pipeline_run: GlooRun) -> None:
    worst = _errors(pipeline_run, "fixed")
    assert sorted(worst) == ["fc1.0", "fc1.1", "fc2.0", "fc2.1"], worst
    assert all(e <= TOL for e in worst.values()), worst


def test_one_f_one_b_with_crossing_messages(pipeline_run: GlooRun) -> None:
    worst = _errors(pipeline_run, "1f1b", microbatches=2)
    assert sorted(worst) == ["fc1.0", "fc1.1", "fc2.0", "fc2.1"], worst
    assert all(e <= TOL for e in worst.values()), worst


def test_send_before_the_tp_all_reduce_trains_to_wrong_gradients(pipeline_run: GlooRun) -> None:
    worst = _errors(pipeline_run, "buggy")
    assert sorted(worst) == ["fc1.0", "fc1.1", "fc2.0", "fc2.1"], worst
    assert all(e > MARGIN for e in worst.values()), worst


def test_comms_report_lists_the_bytes_each_message_moves(pipeline_run: GlooRun) -> None:
    """The communication report's p2p entries of each stage's function, evaluated
    at the run's sizes, equal the bytes and the number of messages dist.isend /
    dist.recv moved on each rank, per phase."""
    from spmd_mypy.comms import reports

    root = Path(__file__).resolve().parents[2]
    found, _ = reports([str(Path(__file__).with_name("pipeline_programs.py"))], str(root / "mypy.ini"))
    by_function = {r.function: r for r in found}
    for got in pipeline_run.per_rank("fixed").values():
        report = by_function["first_stage_fixed" if got["pp"] == 0 else "last_stage"]
        for phase in ("forward", "backward"):
            entries = [e for e in report.phases[phase] if e.communicates]
            expected = [int(e.volume.evaluate({"pp": 2, "tp": TP}, TOKENS * HIDDEN, 8)) for e in entries]
            assert expected == got["messages"][phase], (phase, [e.text() for e in entries], got["messages"])
