"""Run the examples (and their seeded-bug variants) on 4 real gloo ranks, once.

One set of 4 processes is spawned for every job of both test files
(test_examples_gloo.py and test_seeded_bugs_gloo.py; the session fixture
in conftest.py calls `run_all` once).  A job is an example module, given by
its path or by a mutated copy of its source, and the driver that trains it
(example_drivers.py).  Each worker (tests/gloo_harness.py: the spawn, the
queue and the teardown trap) builds the dp=2 x tp=2 mesh (rank = 2 * dp +
tp), runs every job under `spmd.set_mesh`, and sends each job's per-rank
tensors back as plain Python data.  An example whose driver asks for the
mesh (4, 1) runs on the 4 ranks as one dp axis instead.
"""

from __future__ import annotations

import sys
import types
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

from gloo_harness import GlooRun, plain, spawn_and_collect, tensor_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
WORLD = 4
DP = 2
TP = 2
DEADLINE_S = 150.0  # the whole run; it takes well under 30 s


@dataclass(frozen=True)
class Job:
    """Train `example` (a driver name) with the module from `source` (None: the file as is)."""

    id: str
    example: str
    source: Optional[str] = None


def coords(rank: int) -> Tuple[int, int]:
    """(dp, tp) coordinates of a rank in the mesh [[0, 1], [2, 3]]."""
    return divmod(rank, TP)


def load_example(example_file: str, source: Optional[str], name: str) -> types.ModuleType:
    path = EXAMPLES / example_file
    text = path.read_text() if source is None else source
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses and typing look classes' modules up here
    code = compile(text, str(path) if source is None else f"<seeded {name}>", "exec")
    exec(code, module.__dict__)
    return module


def _run_job(job: Job, rank: int, meshes: Dict[Tuple[int, int], Any]) -> Dict[str, Any]:
    import example_drivers

    import spmd_mypy as spmd

    driver = example_drivers.DRIVERS[job.example]
    module = load_example(driver.file, job.source, f"job_{job.id}")
    dp_rank, tp_rank = driver.coords(rank)
    with spmd.set_mesh(meshes[driver.mesh]):
        local = driver.run(module, driver.inputs(), dp_rank, tp_rank)
    return {k: plain(v) for k, v in local.items()}


def _setup(rank: int) -> Tuple[Dict[Tuple[int, int], Any], Any]:
    """The meshes the examples run on, by (dp, tp) shape: dp x tp, and dp = 4
    alone; the dp x tp layout is reported."""
    from torch.distributed.device_mesh import init_device_mesh

    warnings.filterwarnings("ignore", category=FutureWarning)  # the raw-collective seed
    mesh = init_device_mesh("cpu", (DP, TP), mesh_dim_names=("dp", "tp"))
    dp_only = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("dp",))
    return {(DP, TP): mesh, (WORLD, 1): dp_only}, mesh.mesh.tolist()


def per_rank_tensors(run: GlooRun, job_id: str) -> Dict[int, Dict[str, Optional[torch.Tensor]]]:
    """Each rank's tensors of a job; fails the test if a rank raised."""
    return {r: {k: tensor_of(v) for k, v in got.items()} for r, got in run.per_rank(job_id).items()}


def all_jobs() -> List[Job]:
    """Every example as it is, then every seeded-bug variant."""
    import example_drivers
    import seeded_bugs

    jobs = [Job(id=name, example=name) for name in example_drivers.DRIVERS]
    jobs += [Job(id=f"seeded_{s.id}", example=s.example, source=s.buggy_source()) for s in seeded_bugs.SEEDS]
    return jobs


def run_all() -> GlooRun:
    return spawn_and_collect(_setup, _run_job, all_jobs, world=WORLD, deadline_s=DEADLINE_S)
