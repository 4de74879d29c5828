"""The original programs (stand-in helpers) and their migrated, typed versions compute the same
outputs and gradients on 2 real gloo ranks (one spawn; tests/gloo_harness.py)."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

import pytest
import torch

from gloo_harness import GlooRun, gloo_available, plain, spawn_and_collect, tensor_of
from migrate_paths import EXPECTED, INPUTS, PROGRAMS, STANDINS

pytestmark = pytest.mark.gloo

WORLD = 2
SHAPES = {  # each program's input: [seq, hidden] or [batch, seq, hidden]
    "megatron_mlp": (4, 4),
    "neox_mlp": (2, 4, 4),
    "nanotron_mlp": (4, 4),
    "picotron_mlp": (2, 3, 4),
}


@dataclass(frozen=True)
class Job:
    id: str
    program: str
    path: str


def _jobs() -> List[Job]:
    return [
        Job(f"{p}-{kind}", p, str(base / f"{p}.py"))
        for p in PROGRAMS
        for kind, base in (("original", INPUTS), ("migrated", EXPECTED))
    ]


def _setup(rank: int) -> Tuple[Any, Any]:
    from torch.distributed.device_mesh import init_device_mesh

    sys.path.insert(0, str(STANDINS))
    import tp_functions

    mesh = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("tp",))
    tp_functions.set_group(mesh.get_group("tp"))
    return mesh, mesh.mesh.tolist()


def _run(job: Job, rank: int, mesh: Any) -> Dict[str, Any]:
    import spmd_mypy as spmd

    spec = importlib.util.spec_from_file_location(f"migrate_job_{job.id.replace('-', '_')}", job.path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    extra = (mesh.get_group("tp"),) if job.program == "nanotron_mlp" else ()
    model = module.build(rank, WORLD, *extra)
    shape = SHAPES[job.program]
    n = 1
    for s in shape:
        n *= s
    x = (torch.arange(n, dtype=torch.float64).reshape(shape) / n - 0.3).requires_grad_()
    with spmd.set_mesh(mesh):
        out = model(x)
        probe = torch.linspace(-1.0, 2.0, out.numel(), dtype=torch.float64).reshape(out.shape)
        (out * probe).sum().backward()
    grads = {f"grad:{k}": plain(p.grad) for k, p in model.named_parameters()}
    return {"out": plain(out), "grad:x": plain(x.grad), **grads}


@pytest.fixture(scope="module")
def gloo_run() -> GlooRun:
    if not gloo_available():
        pytest.skip("this torch has no gloo backend")
    return spawn_and_collect(_setup, _run, _jobs, world=WORLD, deadline_s=120.0)


@pytest.mark.parametrize("program", PROGRAMS)
def test_same_outputs_and_gradients(gloo_run: GlooRun, program: str) -> None:
    original = gloo_run.per_rank(f"{program}-original")
    migrated = gloo_run.per_rank(f"{program}-migrated")
    for rank in range(WORLD):
        a, b = original[rank], migrated[rank]
        assert sorted(a) == sorted(b)
        assert len([k for k in a if k.startswith("grad:")]) >= 3  # x and at least two parameters
        for key in sorted(a):
            ta, tb = tensor_of(a[key]), tensor_of(b[key])
            assert ta is not None and tb is not None, f"{program} rank {rank}: {key} is None"
            assert ta.abs().sum() > 0, f"{program} rank {rank}: {key} is all zeros"
            torch.testing.assert_close(tb, ta, rtol=1e-12, atol=1e-12, msg=lambda m: f"{program} rank {rank} {key}: {m}")
