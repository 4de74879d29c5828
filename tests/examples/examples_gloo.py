"""Run the examples (and their seeded-bug variants) on 4 real gloo ranks, once.

One set of 4 processes is spawned for every job of both test files
(test_examples_gloo.py and test_seeded_bugs_gloo.py; the session fixture
in conftest.py calls `run_all` once).  A job is an example module, given by
its path or by a mutated copy of its source, and the driver that trains it
(example_drivers.py).  Each worker builds the dp=2 x tp=2 mesh (rank =
2 * dp + tp), runs every job under `spmd.set_mesh`, and sends each job's
per-rank tensors back through a queue as plain Python data.  Then barrier,
destroy_process_group and os._exit(0): a worker that used a DeviceMesh on
gloo can abort at interpreter exit, and os._exit avoids that (see the
shared torch-distributed note).
"""

from __future__ import annotations

import os
import queue as queue_mod
import socket
import sys
import time
import traceback
import types
import warnings
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

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


def _plain(t: Optional[torch.Tensor]) -> Any:
    if t is None:
        return None
    t = t.detach().contiguous()
    return (str(t.dtype), tuple(t.shape), t.reshape(-1).tolist())


def tensor_of(p: Any) -> Optional[torch.Tensor]:
    if p is None:
        return None
    dtype, shape, flat = p
    return torch.tensor(flat, dtype=getattr(torch, dtype.split(".")[-1])).reshape(shape)


def _run_job(job: Job, rank: int, mesh: Any) -> Dict[str, Any]:
    import example_drivers

    import spmd_mypy as spmd

    driver = example_drivers.DRIVERS[job.example]
    module = load_example(driver.file, job.source, f"job_{job.id}")
    dp_rank, tp_rank = coords(rank)
    with spmd.set_mesh(mesh):
        local = driver.run(module, driver.inputs(), dp_rank, tp_rank)
    return {k: _plain(v) for k, v in local.items()}


def _worker(rank: int, port: int, jobs: Sequence[Job], q: Any) -> None:
    """One real rank: run every job, report, then end without interpreter teardown."""
    code = 0
    try:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        torch.set_num_threads(1)
        warnings.filterwarnings("ignore", category=FutureWarning)  # the raw-collective seed
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=WORLD,
            timeout=timedelta(seconds=30),
        )
        mesh = init_device_mesh("cpu", (DP, TP), mesh_dim_names=("dp", "tp"))
        q.put((rank, "__layout__", mesh.mesh.tolist()))
        for job in jobs:
            t0 = time.monotonic()
            try:
                payload: Any = ("ok", _run_job(job, rank, mesh))
            except Exception as e:  # report it; the parent's test for this job fails
                payload = ("error", repr(e), traceback.format_exc())
            q.put((rank, job.id, (payload, time.monotonic() - t0)))
            dist.barrier()  # keep the ranks in step job by job
        dist.barrier()
        dist.destroy_process_group()
        q.put((rank, "__done__", None))
    except BaseException:  # a worker-level failure: tell the parent, then exit
        q.put((rank, "__fatal__", traceback.format_exc()))
        code = 1
    finally:
        q.close()
        q.join_thread()  # flush the queue's feeder thread before _exit
        os._exit(code)


@dataclass
class GlooRun:
    results: Dict[str, Dict[int, Any]] = field(default_factory=dict)
    seconds_per_job: Dict[str, float] = field(default_factory=dict)
    layout: Dict[int, Any] = field(default_factory=dict)
    fatal: Dict[int, str] = field(default_factory=dict)
    problem: Optional[str] = None
    seconds: float = 0.0
    exitcodes: List[Optional[int]] = field(default_factory=list)

    def check(self) -> None:
        """Fail the calling test if the run as a whole went wrong."""
        import pytest

        if self.problem:
            pytest.fail(self.problem)
        if self.fatal:
            pytest.fail("gloo worker failed:\n" + "\n".join(f"rank {r}:\n{t}" for r, t in self.fatal.items()))

    def per_rank(self, job_id: str) -> Dict[int, Dict[str, Optional[torch.Tensor]]]:
        """Each rank's tensors of a job; fails the test if a rank raised."""
        import pytest

        self.check()
        got = self.results.get(job_id, {})
        assert sorted(got) == list(range(WORLD)), f"{job_id}: results from ranks {sorted(got)}"
        out = {}
        for r in range(WORLD):
            if got[r][0] == "error":
                pytest.fail(f"{job_id}: rank {r} raised {got[r][1]}\n{got[r][2]}")
            out[r] = {k: tensor_of(v) for k, v in got[r][1].items()}
        return out


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_all(jobs: Sequence[Job]) -> GlooRun:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    run = GlooRun()
    start = time.monotonic()
    procs = [ctx.Process(target=_worker, args=(r, port, list(jobs), q), daemon=True) for r in range(WORLD)]
    for p in procs:
        p.start()
    done: set = set()
    try:
        while len(done) < WORLD:
            left = DEADLINE_S - (time.monotonic() - start)
            try:
                rank, key, payload = q.get(timeout=max(left, 0.1))
            except queue_mod.Empty:
                reported = {j.id: sorted(run.results.get(j.id, {})) for j in jobs}
                run.problem = (
                    f"gloo workers timed out after {DEADLINE_S:.0f} s; finished ranks {sorted(done)}; "
                    f"ranks reported per job: {reported}"
                )
                break
            if key in ("__done__", "__fatal__"):
                if key == "__fatal__":
                    run.fatal[rank] = payload
                done.add(rank)
            elif key == "__layout__":
                run.layout[rank] = payload
            else:
                result, seconds = payload
                run.results.setdefault(key, {})[rank] = result
                run.seconds_per_job[key] = max(run.seconds_per_job.get(key, 0.0), seconds)
    finally:
        if run.problem is None:  # done or failed: give the workers a moment to exit
            stop = time.monotonic() + 10
            for p in procs:
                p.join(timeout=max(stop - time.monotonic(), 0.1))
        for p in procs:  # on timeout at once, else any straggler
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        run.exitcodes = [p.exitcode for p in procs]
        q.close()
    run.seconds = time.monotonic() - start
    return run
