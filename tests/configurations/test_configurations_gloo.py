"""The programs checked per configuration run on 2 gloo ranks and compute
what one process computes on the full tensors (float64):

- ParallelMLP in both sequence_parallel settings: output, input gradient and
  each rank's weight-shard gradients;
- the one-rank bypass of reduce_from_tensor_model_parallel_region (a P value
  returned as I) on a mesh where tp has one rank equals the all-reduce, in
  value and gradient -- the verdict the checker gives there -- while on a
  2-rank tp axis the same bypass gives each rank only its addend.
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
TOKENS, HIDDEN, FFN = 4, 3, 4


@dataclass(frozen=True)
class Item:
    id: str


def items() -> Tuple[Item, ...]:
    return (Item("mlp_sp"), Item("mlp_no_sp"), Item("bypass_one_rank"), Item("bypass_two_ranks"))


def full_inputs() -> Dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(184)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    return {"x": r(TOKENS, HIDDEN), "t": r(TOKENS, HIDDEN), "w1": r(FFN, HIDDEN), "w2": r(HIDDEN, FFN), "p": r(5)}


def reference() -> Dict[str, torch.Tensor]:
    d = full_inputs()
    x, w1, w2 = (d[k].clone().requires_grad_() for k in ("x", "w1", "w2"))
    out = F.linear(torch.tanh(F.linear(x, w1)), w2)
    (out * d["t"]).sum().backward()
    assert x.grad is not None and w1.grad is not None and w2.grad is not None
    return {"out": out.detach(), "x.grad": x.grad, "w1.grad": w1.grad, "w2.grad": w2.grad}


def setup(rank: int) -> Tuple[Any, Any]:
    from torch.distributed.device_mesh import init_device_mesh

    meshes = {
        "tp2": init_device_mesh("cpu", (2,), mesh_dim_names=("tp",)),
        "tp1": init_device_mesh("cpu", (2, 1), mesh_dim_names=("dp", "tp")),
    }
    return meshes, None


def _run_mlp(rank: int, sequence_parallel: bool) -> Dict[str, Any]:
    import configurations_programs as prog

    d = full_inputs()
    half = slice(2 * rank, 2 * rank + 2)  # this rank's ffn columns; with SP, its tokens too
    mlp = prog.ParallelMLP(d["w1"][half].clone(), d["w2"][:, half].clone(), sequence_parallel)
    x = (d["x"][half] if sequence_parallel else d["x"]).clone().requires_grad_()
    target = d["t"][half] if sequence_parallel else d["t"]
    out = mlp(x)
    (out * target).sum().backward()
    return {"out": plain(out.detach()), "x.grad": plain(x.grad), "w1.grad": plain(mlp.w1.grad), "w2.grad": plain(mlp.w2.grad)}


def _run_bypass(rank: int) -> Dict[str, Any]:
    import spmd_mypy as spmd
    import configurations_programs as prog

    p = full_inputs()["p"] * (rank + 1)  # each rank's addend
    a = p.clone().requires_grad_()
    bypassed = prog.reduce_from_tensor_model_parallel_region(a) if spmd.current_mesh()["tp"].size() == 1 else a
    (bypassed * 3.0).sum().backward()
    b = p.clone().requires_grad_()
    reduced = spmd.all_reduce(b, "tp", src=spmd.P, dst=spmd.I)
    (reduced * 3.0).sum().backward()
    return {"bypassed": plain(bypassed.detach()), "reduced": plain(reduced.detach()), "bypassed.grad": plain(a.grad), "reduced.grad": plain(b.grad)}


def run_item(item: Item, rank: int, meshes: Any) -> Dict[str, Any]:
    import spmd_mypy as spmd

    if item.id.startswith("mlp"):
        with spmd.set_mesh(meshes["tp2"]):
            return _run_mlp(rank, item.id == "mlp_sp")
    with spmd.set_mesh(meshes["tp1" if item.id == "bypass_one_rank" else "tp2"]):
        return _run_bypass(rank)


@pytest.fixture(scope="module")
def configurations_run() -> GlooRun:
    if not gloo_available():
        pytest.skip("this torch has no gloo backend")
    return spawn_and_collect(setup, run_item, items, world=WORLD, deadline_s=240.0)


def _close(got: Any, want: torch.Tensor) -> bool:
    t = tensor_of(got)
    return t is not None and t.shape == want.shape and bool(torch.allclose(t, want, atol=TOL, rtol=0))


@pytest.mark.parametrize("sequence_parallel", [True, False])
def test_mlp_matches_one_process_in_both_configurations(configurations_run: GlooRun, sequence_parallel: bool) -> None:
    ref = reference()
    for rank, got in configurations_run.per_rank("mlp_sp" if sequence_parallel else "mlp_no_sp").items():
        half = slice(2 * rank, 2 * rank + 2)
        rows = half if sequence_parallel else slice(None)
        assert _close(got["out"], ref["out"][rows]), (rank, got["out"])
        assert _close(got["x.grad"], ref["x.grad"][rows]), (rank, got["x.grad"])
        assert _close(got["w1.grad"], ref["w1.grad"][half]), (rank, got["w1.grad"])
        assert _close(got["w2.grad"], ref["w2.grad"][:, half]), (rank, got["w2.grad"])


def test_bypass_is_the_all_reduce_on_one_rank(configurations_run: GlooRun) -> None:
    for rank, got in configurations_run.per_rank("bypass_one_rank").items():
        for key in ("", ".grad"):
            want = tensor_of(got["reduced" + key])
            assert want is not None and _close(got["bypassed" + key], want), (rank, key, got)


def test_bypass_is_wrong_on_two_ranks(configurations_run: GlooRun) -> None:
    for rank, got in configurations_run.per_rank("bypass_two_ranks").items():
        bypassed, reduced = tensor_of(got["bypassed"]), tensor_of(got["reduced"])
        assert bypassed is not None and reduced is not None
        assert (bypassed - reduced).abs().max().item() > 1e-3, (rank, got)
