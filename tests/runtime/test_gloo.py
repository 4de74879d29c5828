"""Every case of the table on real ranks: 4 spawned processes, gloo on 127.0.0.1.

The workers are spawned once for the module.  Each builds both meshes, runs
every case of cases.py forward and backward (or records the exception of a
rejected form), and sends its per-rank results back through a queue as plain
Python data.  Then barrier, destroy_process_group and os._exit(0): a worker
that used a DeviceMesh on gloo can abort at interpreter exit, and ending it
with os._exit avoids that (see the shared torch-distributed note).  One
parametrized test per case compares the results with the reference.
"""

from __future__ import annotations

import os
import queue as queue_mod
import socket
import time
import traceback
from datetime import timedelta
from typing import Any, Dict, List, Optional, Tuple

import pytest
import torch

import cases

pytestmark = pytest.mark.gloo

WORLD = cases.WORLD
DEADLINE_S = 120.0  # the whole run; it takes a few seconds


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _plain(t: torch.Tensor) -> Tuple[str, Tuple[int, ...], List[Any]]:
    t = t.detach().contiguous()
    return (str(t.dtype), tuple(t.shape), t.reshape(-1).tolist())


def _tensor(p: Tuple[str, Tuple[int, ...], List[Any]]) -> torch.Tensor:
    dtype, shape, flat = p
    out = torch.tensor(flat, dtype=torch.float64).reshape(shape)
    assert dtype == "torch.float64", f"result dtype {dtype}"
    return out


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
    return ("ok", _plain(y), _plain(x.grad))


def _worker(rank: int, port: int, q: Any) -> None:
    """One real rank: run every case, report, then end without interpreter teardown."""
    code = 0
    t0 = time.monotonic()
    try:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=WORLD,
            timeout=timedelta(seconds=30),
        )
        meshes = {
            name: init_device_mesh("cpu", shape, mesh_dim_names=dims)
            for name, (shape, dims) in cases.MESH_SHAPES.items()
        }
        q.put((rank, "__layout__", meshes["2d"].mesh.tolist()))
        t1 = time.monotonic()
        for case in cases.CASES:
            try:
                payload = _run_case(case, rank, meshes)
            except Exception as e:  # report it; the parent's test for this case fails
                payload = ("error", repr(e), traceback.format_exc())
            q.put((rank, case.id, payload))
            dist.barrier()  # keep the ranks in step case by case
        dist.barrier()
        dist.destroy_process_group()
        q.put((rank, "__done__", {"start_s": t1 - t0, "cases_s": time.monotonic() - t1}))
    except BaseException:  # a worker-level failure: tell the parent, then exit
        q.put((rank, "__fatal__", traceback.format_exc()))
        code = 1
    finally:
        q.close()
        q.join_thread()  # flush the queue's feeder thread before _exit
        os._exit(code)


class GlooRun:
    def __init__(self) -> None:
        self.results: Dict[str, Dict[int, Any]] = {}
        self.layout: Dict[int, Any] = {}
        self.fatal: Dict[int, str] = {}
        self.problem: Optional[str] = None
        self.seconds = 0.0
        self.timing: Dict[int, Dict[str, float]] = {}
        self.exitcodes: List[Optional[int]] = []


@pytest.fixture(scope="module")
def gloo_run() -> GlooRun:
    import multiprocessing as mp

    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    run = GlooRun()
    start = time.monotonic()
    procs = [ctx.Process(target=_worker, args=(r, port, q), daemon=True) for r in range(WORLD)]
    for p in procs:
        p.start()
    done: set = set()
    try:
        while len(done) < WORLD:
            left = DEADLINE_S - (time.monotonic() - start)
            try:
                rank, key, payload = q.get(timeout=max(left, 0.1))
            except queue_mod.Empty:
                got = {cid: sorted(v) for cid, v in run.results.items()}
                last = {r: max((i for i, c in enumerate(cases.CASES) if r in got.get(c.id, [])),
                               default=-1) for r in range(WORLD)}
                run.problem = (
                    f"gloo workers timed out after {DEADLINE_S:.0f} s; finished ranks {sorted(done)}; "
                    f"last case index reported per rank: {last}"
                )
                break
            if key == "__done__":
                run.timing[rank] = payload
                done.add(rank)
            elif key == "__fatal__":
                run.fatal[rank] = payload
                done.add(rank)
            elif key == "__layout__":
                run.layout[rank] = payload
            else:
                run.results.setdefault(key, {})[rank] = payload
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


def _check_run(run: GlooRun) -> None:
    if run.problem:
        pytest.fail(run.problem)
    if run.fatal:
        pytest.fail("gloo worker failed:\n" + "\n".join(f"rank {r}:\n{t}" for r, t in run.fatal.items()))


def test_gloo_workers_ran(gloo_run: GlooRun) -> None:
    _check_run(gloo_run)
    assert gloo_run.layout == {r: [[0, 1], [2, 3]] for r in range(WORLD)}
    assert set(gloo_run.results) == {c.id for c in cases.CASES}
    assert gloo_run.exitcodes == [0] * WORLD, gloo_run.exitcodes


@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.id)
def test_gloo_case(gloo_run: GlooRun, case: cases.Case) -> None:
    _check_run(gloo_run)
    per_rank = gloo_run.results.get(case.id, {})
    assert sorted(per_rank) == list(range(WORLD)), f"results from ranks {sorted(per_rank)}"
    for r in range(WORLD):
        if per_rank[r][0] == "error":
            pytest.fail(f"rank {r} raised {per_rank[r][1]}\n{per_rank[r][2]}")
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
        _exact(_tensor(y), exp.outputs[r], f"{case.id}: forward on rank {r}")
        _exact(_tensor(gx), exp.input_grads[r], f"{case.id}: backward on rank {r}")


def _collective_error(msg: str) -> Exception:
    from spmd_mypy import CollectiveError

    return CollectiveError(msg)


def _exact(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert tuple(actual.shape) == tuple(expected.shape), (
        f"{what}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    )
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=lambda m: f"{what}: {m}")
