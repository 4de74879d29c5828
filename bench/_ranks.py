"""Benchmarks on gloo ranks (CPU): spawn them, collect rank 0's figures, time forms interleaved.

    res = run_on_ranks(body, args, world=4)          # body(rank, args) -> dict, in each rank
    times = interleaved({"a": fa, "b": fb}, rounds)   # seconds per round, order alternating

`body` runs after the rank has joined the gloo process group (one torch
thread per rank); rank 0's return value comes back to the parent as JSON
through a file.  Teardown trap (shared/notes/torch-distributed.md): a worker
that used a DeviceMesh can abort at interpreter exit, so each ends with a
barrier, destroy_process_group and os._exit.  `body` must be a module-level
function (workers are started by pickling it by name).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List

import torch
import torch.distributed as dist

Body = Callable[[int, argparse.Namespace], Dict[str, Any]]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(rank: int, body: Body, args: argparse.Namespace, port: int, world: int, out_path: str) -> None:
    status = 1
    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        res = body(rank, args)
        if rank == 0:
            Path(out_path).write_text(json.dumps(res))
        dist.barrier()
        dist.destroy_process_group()
        status = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def run_on_ranks(body: Body, args: argparse.Namespace, world: int) -> Dict[str, Any]:
    """Rank 0's result of `body` run on `world` gloo ranks."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        mp.spawn(_entry, args=(body, args, free_port(), world, out), nprocs=world, join=True)
        return json.loads(Path(out).read_text())


def interleaved(forms: Dict[str, Callable[[], float]], rounds: int) -> Dict[str, List[float]]:
    """Each form's seconds per round; a form returns the seconds it timed (so
    it can leave its setup untimed).  The order alternates per round and every
    form starts after a barrier, so the ranks time the same work."""
    times: Dict[str, List[float]] = {k: [] for k in forms}
    order = list(forms.items())
    for r in range(rounds):
        for name, form in (order if r % 2 == 0 else order[::-1]):
            dist.barrier()
            times[name].append(form())
    return times


def timed(fn: Callable[[], Any], iters: int) -> Callable[[], float]:
    """A form for `interleaved`: `iters` calls of fn, seconds per call."""

    def form() -> float:
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) / iters

    return form
