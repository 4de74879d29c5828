"""Spawn real ranks (gloo on 127.0.0.1), run a list of items on each, collect the results.

The one harness of every test that spawns ranks (tests/runtime/test_gloo.py,
tests/runtime/test_gloo_compiled.py, tests/runtime/test_redistribute_spec.py,
tests/examples/examples_gloo.py).

    run = spawn_and_collect(setup, run_item, items, world=4)
    per_rank = run.per_rank(item.id)     # {rank: what run_item returned}

`items()` returns the items, each with an `id`; the parent and every worker
call it (items need not be picklable, only the function).  Each of the
`world` spawned workers joins a gloo process group, calls `setup(rank)` once
(it returns `(state, info)`: state for the items, info reported to the
parent as `run.setup_info[rank]`), then `run_item(item, rank, state)` for
every item in order, with a barrier after each so the ranks stay in step.  An item that raises is reported with its traceback (the parent's
test for that item fails); the worker goes on with the next.  The results
travel back through a queue as plain Python data (see `plain` and
`tensor_of`).

Teardown trap (shared/notes/torch-distributed.md): a worker that used a
DeviceMesh and functional collectives on gloo can abort at interpreter exit.
So each worker ends with barrier, destroy_process_group, a flushed queue and
os._exit: never through the interpreter's own teardown.  `setup`, `run_item`
and `items` must be module-level functions (the workers are started with the
"spawn" method, which pickles them by name).
"""

from __future__ import annotations

import os
import queue as queue_mod
import socket
import time
import traceback
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

Setup = Callable[[int], Tuple[Any, Any]]
RunItem = Callable[[Any, int, Any], Any]
Items = Callable[[], Sequence[Any]]

_DONE = "__done__"
_FATAL = "__fatal__"
_SETUP = "__setup__"
_ERROR = "__error__"


def plain(t: Optional[torch.Tensor]) -> Any:
    """A tensor as plain data for the queue: (dtype, shape, flat values), or None."""
    if t is None:
        return None
    t = t.detach().contiguous()
    return (str(t.dtype), tuple(t.shape), t.reshape(-1).tolist())


def tensor_of(p: Any) -> Optional[torch.Tensor]:
    """The tensor `plain` made, with its dtype (None stays None)."""
    if p is None:
        return None
    dtype, shape, flat = p
    return torch.tensor(flat, dtype=getattr(torch, dtype.split(".")[-1])).reshape(shape)


def float64_of(p: Any) -> torch.Tensor:
    """The tensor `plain` made, in float64 (for exact comparisons); never None."""
    t = tensor_of(p)
    assert t is not None
    return t.to(torch.float64)


@dataclass
class GlooRun:
    """What the workers reported: per item id, per rank, what run_item returned."""

    world: int
    results: Dict[str, Dict[int, Any]] = field(default_factory=dict)
    errors: Dict[str, Dict[int, str]] = field(default_factory=dict)  # item id -> rank -> traceback
    setup_info: Dict[int, Any] = field(default_factory=dict)
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

    def per_rank(self, item_id: str) -> Dict[int, Any]:
        """Every rank's result of one item; fails the test if a rank raised or did not report."""
        import pytest

        self.check()
        for r, tb in sorted(self.errors.get(item_id, {}).items()):
            pytest.fail(f"{item_id}: rank {r} raised\n{tb}")
        got = self.results.get(item_id, {})
        assert sorted(got) == list(range(self.world)), f"{item_id}: results from ranks {sorted(got)}"
        return dict(got)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(
    rank: int, world: int, port: int, timeout_s: float, setup: Setup, run_item: RunItem, items: Items, q: Any
) -> None:
    """One real rank: set up, run every item, report, then end without interpreter teardown."""
    code = 0
    try:
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=timeout_s),
        )
        state, info = setup(rank)
        q.put((rank, _SETUP, info))
        for item in items():
            try:
                q.put((rank, item.id, run_item(item, rank, state)))
            except Exception:  # report it; the parent's test for this item fails
                q.put((rank, _ERROR, (item.id, traceback.format_exc())))
            dist.barrier()  # keep the ranks in step item by item
        dist.barrier()
        dist.destroy_process_group()
        q.put((rank, _DONE, None))
    except BaseException:  # a worker-level failure: tell the parent, then exit
        q.put((rank, _FATAL, traceback.format_exc()))
        code = 1
    finally:
        q.close()
        q.join_thread()  # flush the queue's feeder thread before _exit
        os._exit(code)


def _collect(run: GlooRun, q: Any, items: Sequence[Any], deadline_s: float, start: float) -> None:
    """Read the queue until every rank is done or failed, or the deadline passes."""
    done: set = set()
    while len(done) < run.world:
        left = deadline_s - (time.monotonic() - start)
        try:
            rank, key, payload = q.get(timeout=max(left, 0.1))
        except queue_mod.Empty:
            reported = {i.id: sorted(run.results.get(i.id, {})) for i in items}
            last = {r: max((k for k, i in enumerate(items) if r in reported[i.id]), default=-1)
                    for r in range(run.world)}
            run.problem = (
                f"gloo workers timed out after {deadline_s:.0f} s; finished ranks {sorted(done)}; "
                f"last item index reported per rank: {last}"
            )
            return
        if key in (_DONE, _FATAL):
            if key == _FATAL:
                run.fatal[rank] = payload
            done.add(rank)
        elif key == _SETUP:
            run.setup_info[rank] = payload
        elif key == _ERROR:
            item_id, tb = payload
            run.errors.setdefault(item_id, {})[rank] = tb
            run.results.setdefault(item_id, {})[rank] = None
        else:
            run.results.setdefault(key, {})[rank] = payload


def spawn_and_collect(
    setup: Setup,
    run_item: RunItem,
    items: Items,
    *,
    world: int = 4,
    deadline_s: float = 150.0,
    timeout_s: float = 30.0,
) -> GlooRun:
    """Run the items of `items()` on `world` spawned gloo ranks; see the module docstring.

    deadline_s bounds the whole run (workers still alive then are killed and
    `run.problem` says so); timeout_s is the process group's timeout.
    """
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    run = GlooRun(world)
    start = time.monotonic()
    args = (world, port, timeout_s, setup, run_item, items, q)
    procs = [ctx.Process(target=_worker, args=(r, *args), daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    try:
        _collect(run, q, items(), deadline_s, start)
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


def gloo_available() -> bool:
    """Whether this torch has the gloo backend."""
    import torch.distributed as dist

    return bool(dist.is_available() and dist.is_gloo_available())


def checked_run(
    setup: Setup, run_item: RunItem, items: Items, *, world: int, deadline_s: float, timeout_s: float = 30.0
) -> GlooRun:
    """spawn_and_collect for a module fixture: skipped without gloo, and failing
    unless every rank finished and exited cleanly."""
    import pytest

    if not gloo_available():
        pytest.skip("this torch has no gloo backend")
    run = spawn_and_collect(setup, run_item, items, world=world, deadline_s=deadline_s, timeout_s=timeout_s)
    run.check()
    assert run.exitcodes == [0] * world
    return run
