"""FSDP weight gather: the backward of all_gather(S(0) -> R) against the naive all-reduce-and-slice.

Seed 001's FSDP pattern, on gloo ranks (CPU), for one sharded weight of
--rows x --cols floats (S(0) on the axis "dp": each rank stores rows / n):

  reduced  spmd.all_gather(w, "dp", src=S(0), dst=R)        R is JAX's Reduced: its
           gradient is Partial (Unreduced), and the backward of the gather is
           reduce_scatter(P -> S(0)): each rank receives the dp-sum of its own rows.
  naive    spmd.all_gather(w, "dp", src=S(0), dst=I), then spmd.convert(., "dp",
           src=I, dst=R) (Megatron's copy-to-region): the backward all-reduces the
           whole gradient (P -> I) and then takes this rank's rows (I -> S(0)).

Both forms give every rank the same shard gradient (checked exactly, against
the dp-sum of the ranks' upstream gradients computed from the seeds, before
anything is measured).  Bytes: every torch.distributed call the runtime makes
in the backward is recorded (name and tensor bytes) by wrapping the
functions the kernels call; "sent per rank" is what the ring algorithms of
those calls send (all_reduce 2 (n-1)/n of its buffer, reduce_scatter (n-1)/n of
its input), the figure seed 001's 2N vs N is about.  Times: backward only,
median over --rounds rounds of --iters iterations, the two forms
interleaved, after a barrier, on rank 0.

Run:  python bench/bench_fsdp.py [--world 4] [--rows 2048] [--cols 1024] [--rounds 5] [--iters 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from _ranks import interleaved, run_on_ranks  # noqa: E402
from spmd_mypy.vocab.comm_volume import COMMUNICATING, received_fraction  # noqa: E402

_RECORDED = ("all_reduce", "reduce_scatter_single", "reduce_scatter_tensor", "all_gather_single",
             "all_gather_into_tensor", "all_to_all_single")


class Recorder:
    """Wraps the torch.distributed functions the runtime's kernels call; records
    (name, bytes of the buffer handed in) while `on` is set."""

    def __init__(self) -> None:
        self.calls: List[Tuple[str, int]] = []
        self.on = False
        for name in _RECORDED:
            fn = getattr(dist, name, None)
            if fn is not None:
                setattr(dist, name, self._wrap(name, fn))

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if self.on:
                t = args[1] if name != "all_reduce" else args[0]  # (output, input) or (tensor)
                self.calls.append((name, t.numel() * t.element_size()))
            return fn(*args, **kwargs)

        return wrapped


def c10d_op(name: str) -> str:
    """The collective a torch.distributed function runs (all_gather_single -> all_gather)."""
    return next(op for op in COMMUNICATING if name.startswith(op))


def sent_per_rank(name: str, nbytes: int, n: int) -> float:
    """Bytes one rank sends in the ring algorithm of a call on a buffer of nbytes
    (vocab/comm_volume.py's table: a ring sends what it receives)."""
    return float(received_fraction(c10d_op(name), n) * nbytes)


def _forms(w: torch.Tensor) -> Dict[str, Callable[[], torch.Tensor]]:
    import spmd_mypy as spmd
    from spmd_mypy import I, S, Reduced

    return {
        "reduced": lambda: spmd.all_gather(w, "dp", src=S(0), dst=Reduced),
        "naive": lambda: spmd.convert(spmd.all_gather(w, "dp", src=S(0), dst=I), "dp", src=I, dst=Reduced),
    }


def _upstream(rank: int, rows: int, cols: int) -> torch.Tensor:
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(100 + rank))


def _backward_form(w: torch.Tensor, gather: Callable[[], torch.Tensor], g: torch.Tensor,
                   iters: int) -> Callable[[], float]:
    """Seconds per backward of the gathered weight (the gathers untimed)."""

    def form() -> float:
        fulls = [gather() for _ in range(iters)]
        t0 = time.perf_counter()
        for full in fulls:
            full.backward(g)
        seconds = (time.perf_counter() - t0) / iters
        w.grad = None
        return seconds

    return form


def _body(rank: int, args: argparse.Namespace) -> Dict[str, Any]:
    import spmd_mypy as spmd
    from torch.distributed.device_mesh import init_device_mesh

    rec = Recorder()
    mesh = init_device_mesh("cpu", (args.world,), mesh_dim_names=("dp",))
    n, rows = args.world, args.rows // args.world
    w = torch.randn(rows, args.cols, generator=torch.Generator().manual_seed(rank)).requires_grad_(True)
    g = _upstream(rank, args.rows, args.cols)
    want = sum(_upstream(r, args.rows, args.cols) for r in range(n)).narrow(0, rank * rows, rows)
    res: Dict[str, Any] = {}
    with spmd.set_mesh(mesh):
        forms = _forms(w)
        for name, gather in forms.items():  # correctness, and the backward's calls
            w.grad = None
            full = gather()
            rec.calls, rec.on = [], True
            full.backward(g)
            rec.on = False
            torch.testing.assert_close(w.grad, want, rtol=1e-5, atol=1e-5)
            res[name] = {"calls": list(rec.calls)}
        times = interleaved({k: _backward_form(w, gather, g, args.iters) for k, gather in forms.items()},
                            args.rounds)
        for name in forms:
            res[name]["ms"] = statistics.median(times[name]) * 1e3
    return res


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=3)
    args = ap.parse_args(argv)
    res = run_on_ranks(_body, args, args.world)
    n = args.world
    print(f"world {n}, weight {args.rows} x {args.cols} float32 ({args.rows * args.cols * 4:,} bytes), "
          f"S(0) on dp; {args.rounds} rounds x {args.iters} iters")
    print(f"{'form':<9}{'backward calls':<44}{'sent per rank':>15}{'ms bwd':>9}")
    sent = {}
    for name in ("reduced", "naive"):
        calls = res[name]["calls"]
        sent[name] = sum(sent_per_rank(c, b, n) for c, b in calls)
        text = ", ".join(f"{c}({b:,} B)" for c, b in calls)
        print(f"{name:<9}{text:<44}{sent[name]:>15,.0f}{res[name]['ms']:>9.2f}")
    print(f"naive / reduced: bytes sent {sent['naive'] / sent['reduced']:.2f}x, "
          f"backward time {res['naive']['ms'] / res['reduced']['ms']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
