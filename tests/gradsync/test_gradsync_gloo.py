"""The buggy finishing functions of gradsync_programs.py train to wrong
gradients on 2 gloo ranks; the fixed ones to the gradients of one process
on the full tensors (float64, 1e-9).

One spawn of 2 ranks runs every program: sp on a dp=1 x tp=2 mesh (each
rank its half of the tokens), dp on a dp=2 mesh (each rank its half of the
batch), pp on a pp=2 x dp=1 mesh (rank 0 the embedding stage, rank 1 the
LM-head stage, activations and their gradients sent point to point).  The
sp program runs also with its sums installed in backward
(spmd.sync_grads_in_backward), once with two accumulated micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Tuple

import pytest
import torch
import torch.nn.functional as F

from gloo_harness import GlooRun, gloo_available, plain, spawn_and_collect, tensor_of

pytestmark = pytest.mark.gloo

WORLD = 2
TOL = 1e-9
MARGIN = 1e-2


@dataclass(frozen=True)
class Item:
    id: str
    program: str  # sp, dp or pp
    finish: str  # the finishing function's name in gradsync_programs


def items() -> Tuple[Item, ...]:
    return (
        Item("sp_buggy", "sp", "finish_sp_buggy"),
        Item("sp_fixed", "sp", "finish_sp_fixed"),
        Item("sp_in_backward_buggy", "sp", "install_sp_buggy"),
        Item("sp_in_backward_fixed", "sp", "install_sp_fixed"),
        Item("sp_accumulate_fixed", "sp", "install_sp_fixed"),
        Item("dp_twice", "dp", "finish_dp_twice"),
        Item("dp_alias", "dp", "finish_dp_alias"),
        Item("dp_fixed", "dp", "finish_dp_fixed"),
        Item("pp_buggy", "pp", "finish_pp_buggy"),
        Item("pp_fixed", "pp", "finish_pp_fixed"),
    )


def full_inputs() -> Dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(18)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    return {
        "sp_x": r(4, 3), "sp_t": r(4, 3), "sp_w": r(3), "sp_b": r(3),
        "dp_x": r(4, 3), "dp_w": r(3, 3),
        "pp_emb": r(5, 3), "pp_ids": torch.tensor([0, 3, 1, 4]), "pp_target": torch.tensor([2, 2, 0, 1]),
    }


def reference() -> Dict[str, torch.Tensor]:
    """The gradients of one process on the full tensors."""
    d = full_inputs()
    w, b = d["sp_w"].clone().requires_grad_(), d["sp_b"].clone().requires_grad_()
    (F.layer_norm(d["sp_x"], (3,), w, b) * d["sp_t"]).sum().backward()
    dw = d["dp_w"].clone().requires_grad_()
    ((torch.tanh(d["dp_x"] @ dw) ** 2).sum() / 4).backward()
    emb = d["pp_emb"].clone().requires_grad_()
    F.cross_entropy(F.embedding(d["pp_ids"], emb) @ emb.T, d["pp_target"]).backward()
    return {"sp.weight": w.grad, "sp.bias": b.grad, "dp.w": dw.grad, "pp.word_embeddings": emb.grad}


def setup(rank: int) -> Tuple[Any, Any]:
    from torch.distributed.device_mesh import init_device_mesh

    meshes = {
        "sp": init_device_mesh("cpu", (1, 2), mesh_dim_names=("dp", "tp")),
        "dp": init_device_mesh("cpu", (2,), mesh_dim_names=("dp",)),
        "pp": init_device_mesh("cpu", (2, 1), mesh_dim_names=("pp", "dp")),
    }
    return meshes, None


def _run_sp(finish: Any, rank: int) -> Dict[str, Any]:
    import gradsync_programs as prog

    d = full_inputs()
    norm = prog.SequenceParallelNorm(d["sp_w"], d["sp_b"])
    rows = slice(2 * rank, 2 * rank + 2)  # this tp rank's tokens
    prog.sp_loss(norm, d["sp_x"][rows], d["sp_t"][rows]).backward()
    finish(norm)
    return {"sp.weight": plain(norm.weight.grad), "sp.bias": plain(norm.bias.grad)}


def _run_sp_in_backward(install: Any, rank: int, micro_batches: int) -> Dict[str, Any]:
    """The sums installed before backward (sync_grads_in_backward); with two
    micro-batches, the first backward runs under spmd.no_sync."""
    import gradsync_programs as prog
    import spmd_mypy as spmd

    d = full_inputs()
    norm = install(prog.SequenceParallelNorm(d["sp_w"], d["sp_b"]))
    rows = list(range(2 * rank, 2 * rank + 2))  # this tp rank's tokens
    parts = [rows[k::micro_batches] for k in range(micro_batches)]
    for k, part in enumerate(parts):
        loss = prog.sp_loss(norm, d["sp_x"][part], d["sp_t"][part])
        if k < len(parts) - 1:
            with spmd.no_sync(norm):
                loss.backward()
        else:
            loss.backward()
    return {"sp.weight": plain(norm.weight.grad), "sp.bias": plain(norm.bias.grad)}


def _run_dp(finish: Any, rank: int, mesh: Any) -> Dict[str, Any]:
    import gradsync_programs as prog

    d = full_inputs()
    model = prog.DataParallelMLP(d["dp_w"])
    prog.dp_loss(model, d["dp_x"][2 * rank: 2 * rank + 2], 4).backward()
    finish(model, mesh.get_group("dp"))
    return {"dp.w": plain(model.w.grad)}


def _run_pp(finish: Any, rank: int) -> Dict[str, Any]:
    import torch.distributed as dist

    import gradsync_programs as prog

    d = full_inputs()
    stage = prog.PipelineStage(d["pp_emb"])
    if rank == 0:  # the first stage: the embedding
        h = stage.embed(d["pp_ids"])
        dist.send(h.detach().contiguous(), dst=1)
        grad = torch.empty_like(h)
        dist.recv(grad, src=1)
        h.backward(grad)
    else:  # the last stage: the LM head (the same parameter) and the loss
        h = torch.empty(4, 3, dtype=torch.float64)
        dist.recv(h, src=0)
        h.requires_grad_()
        F.cross_entropy(stage.lm_head(h), d["pp_target"]).backward()
        assert h.grad is not None
        dist.send(h.grad.contiguous(), dst=0)
    finish(stage)
    return {"pp.word_embeddings": plain(stage.word_embeddings.grad)}


def run_item(item: Item, rank: int, meshes: Any) -> Dict[str, Any]:
    import gradsync_programs as prog
    import spmd_mypy as spmd

    finish = getattr(prog, item.finish)
    with spmd.set_mesh(meshes[item.program]):
        if item.program == "sp" and item.finish.startswith("install_"):
            return _run_sp_in_backward(finish, rank, 2 if "accumulate" in item.id else 1)
        if item.program == "sp":
            return _run_sp(finish, rank)
        if item.program == "dp":
            return _run_dp(finish, rank, meshes["dp"])
        return _run_pp(finish, rank)


@pytest.fixture(scope="module")
def gradsync_run() -> GlooRun:
    if not gloo_available():
        pytest.skip("this torch has no gloo backend")
    return spawn_and_collect(setup, run_item, items, world=WORLD, deadline_s=240.0)


def _worst(run: GlooRun, item_id: str) -> Dict[str, float]:
    ref = reference()
    worst: Dict[str, float] = {}
    for rank, got in run.per_rank(item_id).items():
        for key, value in got.items():
            t = tensor_of(value)
            want = ref[key]
            err = float("inf") if t is None else (t - want).abs().max().item() / want.abs().max().item()
            worst[key] = max(worst.get(key, 0.0), err)
    return worst


@pytest.mark.parametrize("item", [i for i in items() if not i.id.endswith("_fixed")], ids=lambda i: i.id)
def test_buggy_finish_trains_to_wrong_gradients(gradsync_run: GlooRun, item: Item) -> None:
    worst = _worst(gradsync_run, item.id)
    assert worst and all(e > MARGIN for e in worst.values()), worst


@pytest.mark.parametrize("item", [i for i in items() if i.id.endswith("_fixed")], ids=lambda i: i.id)
def test_fixed_finish_trains_to_the_reference(gradsync_run: GlooRun, item: Item) -> None:
    worst = _worst(gradsync_run, item.id)
    assert worst and all(e <= TOL for e in worst.values()), worst
