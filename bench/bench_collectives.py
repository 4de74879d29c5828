"""Typed collectives vs the raw torch.distributed calls they wrap (gloo, CPU).

For each collective, one iteration is a forward and a backward pass:

  typed  spmd.<collective>(x, "w", src=..., dst=...) on a leaf tensor that
         requires grad, then y.backward(g) (x.grad is reset to None first, so
         every iteration stores a fresh gradient instead of accumulating).
  raw    the same communication and the same necessary copies written by hand
         with torch.distributed: no autograd, no validation.

Both sides run in the same worker processes (--world ranks on 127.0.0.1, a
1-D DeviceMesh named "w") and are measured interleaved: each round times one
block of --iters iterations of each side (typed first on even rounds, raw
first on odd rounds), every block starts after a barrier, and time is taken
on rank 0.  The figure per side is the median over rounds of the
per-iteration time of a block; the ratio is typed median / raw median.
Machine noise (other jobs on the same cores) hits both sides alike, so the
ratio is meaningful on a shared machine even when absolute times are not.

Rows marked (info) do not count toward the target: all_to_all against a raw
version that skips copies the layouts do not need, the all_reduce through a
bare torch.autograd.Function (the floor any autograd wrapper pays), and an
A/A control (raw against itself) that shows the method's noise.

Run:  python bench/bench_collectives.py [--size-bytes N] [--iters K] [--rounds R]
      python bench/bench_collectives.py --overhead   # local cost, no communication

--overhead runs one process on torch's "fake" backend, where collectives do
nothing: typed minus raw is then the typed path's own cost per call (Python,
validation, autograd, extra copies), split by layer and profiled.
See bench/README.md for what every figure means.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import io
import json
import os
import pstats
import resource
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

from _ranks import free_port
from _stats import bootstrap_ratio_ci

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(_REPO))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from spmd_mypy import P, R, S  # noqa: E402  (pure Python vocabulary)

TARGET = 1.05
AXIS = "w"
PROFILE_CALLS = 500  # typed calls profiled per case in --overhead mode

Fn = Callable[[], object]
# A case builds (typed, raw, check): typed and raw each run one forward+backward;
# check runs both once and returns (typed y, typed grad, raw y, raw grad).
Case = Tuple[Fn, Fn, Callable[[], Tuple[torch.Tensor, ...]]]


# -- shapes ------------------------------------------------------------------------


def pick_shape(size_bytes: int, world: int) -> Tuple[int, int]:
    """A 2-D float32 shape of exactly size_bytes with both dims divisible by world.

    Dim 0 is split by reduce_scatter to S(0) and dim 1 by all_to_all to S(1);
    among such shapes take the squarest (1 MiB, world 4: 512 x 512).
    """
    if size_bytes <= 0 or size_bytes % 4:
        raise SystemExit(f"--size-bytes must be a positive multiple of 4, got {size_bytes}")
    n = size_bytes // 4
    best: Optional[Tuple[int, int, int]] = None
    for cols in range(world, n + 1, world):
        if n % cols == 0 and (n // cols) % world == 0:
            rows = n // cols
            if best is None or abs(rows - cols) < best[0]:
                best = (abs(rows - cols), rows, cols)
    if best is None:
        raise SystemExit(
            f"--size-bytes {size_bytes}: {n} float32 elements do not factor as rows x cols with "
            f"both divisible by --world {world} (use a multiple of {4 * world * world})"
        )
    return best[1], best[2]


# -- the cases -----------------------------------------------------------------------


def _leaf(t: torch.Tensor) -> torch.Tensor:
    return t.clone().requires_grad_(True)


def _typed(
    fn_name: str, src: object, dst: object, x: torch.Tensor, g: torch.Tensor
) -> Callable[[], Tuple[torch.Tensor, torch.Tensor]]:
    import spmd_mypy as spmd

    fn = getattr(spmd, fn_name)

    def typed() -> Tuple[torch.Tensor, torch.Tensor]:
        x.grad = None
        y = fn(x, AXIS, src=src, dst=dst)
        y.backward(g)
        return y, x.grad  # type: ignore[return-value]

    return typed


def case_all_reduce(rows: int, cols: int, w: int) -> Case:
    x = _leaf(torch.randn(rows, cols))
    xr = x.detach().clone()
    g = torch.randn(rows, cols)
    typed = _typed("all_reduce", P, R, x, g)

    def raw() -> Tuple[torch.Tensor, torch.Tensor]:
        y = xr.clone()  # all_reduce works in place; the typed kernel clones too
        dist.all_reduce(y)
        gx = g.clone()
        dist.all_reduce(gx)
        return y, gx

    return typed, raw, lambda: (*typed(), *raw())


def case_all_gather(rows: int, cols: int, w: int) -> Case:
    x = _leaf(torch.randn(rows, cols))
    xr = x.detach().clone()
    g = torch.randn(w * rows, cols)
    typed = _typed("all_gather", S(0), R, x, g)

    def raw() -> Tuple[torch.Tensor, torch.Tensor]:
        y = torch.empty(w * rows, cols)
        dist.all_gather_single(y, xr)
        gx = torch.empty(rows, cols)
        dist.reduce_scatter_single(gx, g)
        return y, gx

    return typed, raw, lambda: (*typed(), *raw())


def case_reduce_scatter(rows: int, cols: int, w: int) -> Case:
    x = _leaf(torch.randn(rows, cols))
    xr = x.detach().clone()
    g = torch.randn(rows // w, cols)
    typed = _typed("reduce_scatter", P, S(0), x, g)

    def raw() -> Tuple[torch.Tensor, torch.Tensor]:
        y = torch.empty(rows // w, cols)
        dist.reduce_scatter_single(y, xr)
        gx = torch.empty(rows, cols)
        dist.all_gather_single(gx, g)
        return y, gx

    return typed, raw, lambda: (*typed(), *raw())


def _a2a_inputs(rows: int, cols: int, w: int) -> Tuple[torch.Tensor, torch.Tensor, Fn]:
    x = _leaf(torch.randn(rows, cols))
    g = torch.randn(w * rows, cols // w)
    return x.detach().clone(), g, _typed("all_to_all", S(0), S(1), x, g)


def case_all_to_all(rows: int, cols: int, w: int) -> Case:
    """S(0) -> S(1), raw with the typed kernel's stack before and cat after each exchange."""
    xr, g, typed = _a2a_inputs(rows, cols, w)
    c = cols // w

    def raw() -> Tuple[torch.Tensor, torch.Tensor]:
        # forward S(0) -> S(1): stack my column blocks by destination rank,
        # exchange, concatenate the received row blocks along dim 0
        send = torch.stack(xr.split(c, 1), 0)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send)
        y = torch.cat(recv.unbind(0), 0)
        # backward S(1) -> S(0): stack the gradient's row blocks, exchange,
        # concatenate the received column blocks along dim 1
        gsend = torch.stack(g.split(rows, 0), 0)
        grecv = torch.empty_like(gsend)
        dist.all_to_all_single(grecv, gsend)
        gx = torch.cat(grecv.unbind(0), 1)
        return y, gx

    return typed, raw, lambda: (*typed(), *raw())  # type: ignore[misc]


def case_all_to_all_min(rows: int, cols: int, w: int) -> Case:
    """Informational: the same all_to_all with only the copies the layouts force.

    Forward: the received (w, rows, c) buffer already is the S(1) result laid
    out as (w*rows, c), so a view replaces the cat.  Backward: the gradient's
    row blocks are contiguous and in rank order, so a view replaces the stack;
    only the final interleave of column blocks copies.
    """
    xr, g, typed = _a2a_inputs(rows, cols, w)
    c = cols // w

    def raw() -> Tuple[torch.Tensor, torch.Tensor]:
        send = torch.stack(xr.split(c, 1), 0)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send)
        y = recv.view(w * rows, c)
        gsend = g.view(w, rows, c)
        grecv = torch.empty_like(gsend)
        dist.all_to_all_single(grecv, gsend)
        gx = grecv.permute(1, 0, 2).reshape(rows, cols)
        return y, gx

    return typed, raw, lambda: (*typed(), *raw())  # type: ignore[misc]


class _BareAllReduce(torch.autograd.Function):
    """The least any autograd.Function wrapper can do: the kernel, no spmd_mypy code."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        y = x.clone()
        dist.all_reduce(y)
        return y

    @staticmethod
    def backward(ctx: object, g: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        gx = g.clone()
        dist.all_reduce(gx)
        return gx


def case_floor(rows: int, cols: int, w: int) -> Case:
    """Informational: all_reduce through a bare autograd.Function vs raw.

    Its ratio is the cost of autograd itself (Function.apply, the graph,
    Tensor.backward, the engine), which any autograd-based wrapper pays; the
    typed all_reduce's excess over it is spmd_mypy's own code.
    """
    x = _leaf(torch.randn(rows, cols))
    g = torch.randn(rows, cols)
    _, raw, _ = case_all_reduce(rows, cols, w)

    def bare() -> Tuple[torch.Tensor, torch.Tensor]:
        x.grad = None
        y = _BareAllReduce.apply(x)
        y.backward(g)
        return y, x.grad  # type: ignore[return-value]

    def check() -> Tuple[torch.Tensor, ...]:
        by, bg = bare()
        yy = x.detach().clone()
        dist.all_reduce(yy)
        gg = g.clone()
        dist.all_reduce(gg)
        return by, bg, yy, gg

    return bare, raw, check


def case_control(rows: int, cols: int, w: int) -> Case:
    """A/A control: the raw all_reduce on both sides; its ratio is the method's noise."""
    _, raw, _ = case_all_reduce(rows, cols, w)
    return raw, raw, lambda: (*raw(), *raw())  # type: ignore[misc]


class Spec(NamedTuple):
    label: str
    build: Callable[[int, int, int], Case]
    counted: bool  # counts toward the <= 1.05 target
    call: Tuple[str, object, object]  # the typed call: (op, src, dst)


CASES: Dict[str, Spec] = {
    "all_reduce": Spec("all_reduce(P->R)", case_all_reduce, True, ("all_reduce", P, R)),
    "all_gather": Spec("all_gather(S(0)->R)", case_all_gather, True, ("all_gather", S(0), R)),
    "reduce_scatter": Spec(
        "reduce_scatter(P->S(0))", case_reduce_scatter, True, ("reduce_scatter", P, S(0))
    ),
    "all_to_all": Spec("all_to_all(S(0)->S(1))", case_all_to_all, True, ("all_to_all", S(0), S(1))),
    "all_to_all_min": Spec(
        "  same, vs minimal-copy raw", case_all_to_all_min, False, ("all_to_all", S(0), S(1))
    ),
    "floor": Spec("  bare autograd.Function", case_floor, False, ("all_reduce", P, R)),
    "control": Spec("control: raw vs raw", case_control, False, ("all_reduce", P, R)),
}


# -- gloo measurement ---------------------------------------------------------------


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _block(fn: Fn, iters: int, side: Dict[str, List[float]]) -> None:
    """Time `iters` calls, started together on every rank; append per-iteration figures.

    wall: elapsed seconds on this rank (the figure compared).  cpu: CPU seconds
    of this rank's main thread (Python, autograd, copies; not gloo's threads,
    not waiting).  faults: minor page faults of the process, a sign that one
    side keeps getting fresh pages from the allocator.
    """
    dist.barrier()
    f0 = _minor_faults()
    c0 = time.thread_time()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    t1 = time.perf_counter()
    c1 = time.thread_time()
    side["wall"].append((t1 - t0) / iters)
    side["cpu"].append((c1 - c0) / iters)
    side["faults"].append((_minor_faults() - f0) / iters)


def set_malloc(mode: str) -> str:
    """Fix glibc malloc's thresholds ("stable") or leave its defaults ("system").

    By default glibc moves its mmap and trim thresholds as blocks are freed, so
    whether a 1 MiB tensor reuses heap memory or faults in fresh pages depends
    on the process's allocation history and on the order of frees; one side of
    the comparison can then fault in MiBs of pages every iteration while the
    other does not (seen here: ~500 extra faults and ~0.7 ms per typed
    all_reduce).  "stable" serves every block up to 32 MiB from the heap and
    never trims it, the steady state of a long training process.
    """
    if mode == "system":
        return "system defaults"
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3  # glibc <malloc.h>
        ok = libc.mallopt(m_mmap_threshold, 32 << 20) and libc.mallopt(m_trim_threshold, 1 << 30)
    except (OSError, AttributeError):
        ok = 0
    if not ok:
        return "system defaults (mallopt unavailable)"
    return "glibc, fixed thresholds (mmap 32 MiB, trim 1 GiB)"


def _check(label: str, check: Callable[[], Tuple[torch.Tensor, ...]]) -> None:
    """Typed and raw must compute the same output and gradient on every rank."""
    ty, tg, ry, rg = check()
    ok = (
        ty.shape == ry.shape
        and tg.shape == rg.shape
        and torch.allclose(ty, ry, rtol=1e-5, atol=1e-5)
        and torch.allclose(tg, rg, rtol=1e-5, atol=1e-5)
    )
    bad = torch.tensor([0.0 if ok else 1.0])
    dist.all_reduce(bad)
    if bad.item():
        raise RuntimeError(f"{label}: typed and raw results differ on {int(bad.item())} rank(s)")


def measure(args: argparse.Namespace, rank: int) -> List[dict]:
    from torch.distributed.device_mesh import init_device_mesh

    from spmd_mypy.runtime.mesh import set_mesh

    mesh = init_device_mesh("cpu", (args.world,), mesh_dim_names=(AXIS,))
    rows, cols = pick_shape(args.size_bytes, args.world)
    torch.manual_seed(1234 + rank)
    results = []
    with set_mesh(mesh):
        built = {}
        for key in args.cases:  # check every case before spending time on any
            typed, raw, check = CASES[key].build(rows, cols, args.world)
            _check(CASES[key].label, check)
            built[key] = (typed, raw)
        for key in args.cases:
            spec = CASES[key]
            typed, raw = built[key]
            for _ in range(args.warmup):
                typed()
                raw()
            ts: Dict[str, List[float]] = {"wall": [], "cpu": [], "faults": []}
            rs: Dict[str, List[float]] = {"wall": [], "cpu": [], "faults": []}
            for r in range(args.rounds):
                if r % 2 == 0:
                    _block(typed, args.iters, ts)
                    _block(raw, args.iters, rs)
                else:
                    _block(raw, args.iters, rs)
                    _block(typed, args.iters, ts)
            results.append({"case": key, "typed": ts, "raw": rs})
            if rank == 0 and not args.quiet:
                print(f"  measured {spec.label.strip()}", file=sys.stderr, flush=True)
    return results


def _worker(rank: int, args: argparse.Namespace, port: int, out_path: str) -> None:
    malloc = set_malloc(args.malloc)
    torch.set_num_threads(args.threads)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.world
    )
    status = 1
    try:
        results = measure(args, rank)
        if rank == 0:
            Path(out_path).write_text(json.dumps({"malloc": malloc, "cases": results}))
        dist.barrier()
        status = 0
    except BaseException:
        traceback.print_exc()
        raise
    finally:
        # Teardown trap (project notes): a gloo worker that used a DeviceMesh can
        # abort at interpreter exit, so results go through a file and we os._exit.
        try:
            dist.destroy_process_group()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)


def summarize(results: List[dict]) -> List[dict]:
    rows = []
    for res in results:
        spec = CASES[res["case"]]
        ts, rs = res["typed"]["wall"], res["raw"]["wall"]
        t, r = statistics.median(ts), statistics.median(rs)
        lo, hi = bootstrap_ratio_ci(ts, rs)
        rows.append(
            {
                "case": res["case"],
                "label": spec.label,
                "counted": spec.counted,
                "typed_ms": t * 1e3,
                "raw_ms": r * 1e3,
                "ratio": t / r,
                "ci95": [lo, hi],
                "paired_median": statistics.median(a / b for a, b in zip(ts, rs)),
                "typed_cpu_ms": statistics.median(res["typed"]["cpu"]) * 1e3,
                "raw_cpu_ms": statistics.median(res["raw"]["cpu"]) * 1e3,
                "typed_faults": statistics.mean(res["typed"]["faults"]),
                "raw_faults": statistics.mean(res["raw"]["faults"]),
            }
        )
    return rows


def print_table(rows: List[dict]) -> None:
    print(
        f"{'collective, fwd+bwd':<28} {'typed ms':>9} {'raw ms':>9} {'ratio':>6}"
        f" {'95% CI':>13} {'paired':>7} {'cpu ms t/r':>12}  verdict"
    )
    for row in rows:
        if not row["counted"]:
            verdict = "(info)"
        elif row["ratio"] <= TARGET:
            verdict = "ok"
        else:
            verdict = f"ABOVE {TARGET}"
        lo, hi = row["ci95"]
        print(
            f"{row['label']:<28} {row['typed_ms']:9.3f} {row['raw_ms']:9.3f} {row['ratio']:6.3f}"
            f" {lo:6.3f}-{hi:<6.3f} {row['paired_median']:7.3f}"
            f" {row['typed_cpu_ms']:5.2f}/{row['raw_cpu_ms']:<5.2f}  {verdict}"
        )


def run_gloo(args: argparse.Namespace) -> int:
    rows_, cols_ = pick_shape(args.size_bytes, args.world)
    port = free_port()
    print(
        f"gloo on 127.0.0.1:{port}, world {args.world}, 1-D mesh {AXIS!r}; float32 input "
        f"{rows_}x{cols_} = {args.size_bytes} bytes per rank; {args.rounds} rounds x "
        f"{args.iters} iterations per side after {args.warmup} warmup; "
        f"{args.threads} torch thread(s) per rank; torch {torch.__version__}",
        flush=True,
    )
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "results.json")
        mp.spawn(_worker, args=(args, port, out_path), nprocs=args.world, join=True)
        got = json.loads(Path(out_path).read_text())
    results = got["cases"]
    print(f"malloc in the workers: {got['malloc']}")
    rows = summarize(results)
    print_table(rows)
    print(f"wall time {time.perf_counter() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"args": vars(args), "malloc": got["malloc"], "rows": rows, "rounds": results},
                indent=1,
            )
        )
    above = [r["label"] for r in rows if r["counted"] and r["ratio"] > TARGET]
    if above:
        print(f"above the {TARGET} target: {', '.join(above)}")
    return 0


# -- overhead mode: the typed path's own cost, no communication --------------------------


def _layers(spec: Spec, typed_call: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
            g: torch.Tensor) -> Optional[Dict[str, Fn]]:
    """Callables for two layers of the typed path, for the breakdown.

    front    spmd.<op> with the autograd step stubbed out: axis resolution,
             src/dst checks, plan lookup, shape and split-size validation
    kernels  the forward steps, then the backward steps the vocabulary gives,
             run through spmd_mypy's own apply_steps on tensors that do not
             require grad (so no graph is recorded and no engine runs)
    Relies on spmd_mypy.runtime.api calling `apply_steps(x, steps, comm, sizes)`;
    returns None if that has changed.
    """
    try:
        from spmd_mypy.runtime import api
        from spmd_mypy.vocab.collectives import backward

        real = api.apply_steps
        seen: List[tuple] = []

        def stub(x_: torch.Tensor, steps: tuple, comm: object, sizes: object) -> torch.Tensor:
            seen.append((steps, comm, sizes))
            return x_

        xd = x.detach()
        api.apply_steps = stub  # type: ignore[assignment]
        try:
            typed_call(xd)
        finally:
            api.apply_steps = real  # type: ignore[assignment]
        steps, comm, sizes = seen[0]
        if sizes is not None:
            raise TypeError("the breakdown handles even splits only")
        bsteps = backward(steps)

        def front() -> object:
            api.apply_steps = stub  # type: ignore[assignment]
            try:
                return typed_call(xd)
            finally:
                api.apply_steps = real  # type: ignore[assignment]

        def kern() -> object:
            return real(xd, steps, comm, None), real(g, bsteps, comm, None)

        front()
        kern()
        return {"front": front, "kernels": kern}
    except (ImportError, AttributeError, TypeError, ValueError, IndexError) as e:
        print(f"  (no layer breakdown: {e!r})")
        return None


def _public_call(
    fn: Callable[..., torch.Tensor], src: object, dst: object
) -> Callable[[torch.Tensor], torch.Tensor]:
    def call(t: torch.Tensor) -> torch.Tensor:
        return fn(t, AXIS, src=src, dst=dst)

    return call


def run_overhead(args: argparse.Namespace) -> int:
    """Typed vs raw with collectives that do nothing: the typed path's own cost per call."""
    from torch.distributed.device_mesh import init_device_mesh

    import spmd_mypy as spmd
    from spmd_mypy.runtime.mesh import set_mesh

    malloc = set_malloc(args.malloc)
    torch.set_num_threads(args.threads)
    dist.init_process_group("fake", rank=0, world_size=args.world)
    mesh = init_device_mesh("cpu", (args.world,), mesh_dim_names=(AXIS,))
    size = args.overhead_bytes or args.size_bytes
    rows, cols = pick_shape(size, args.world)
    iters = max(args.iters, 20)  # calls of tens of microseconds: time at least 20 per block
    torch.manual_seed(0)
    print(
        f"fake backend (collectives do nothing), world {args.world}, float32 {rows}x{cols} "
        f"({size} bytes), {args.rounds} interleaved rounds x {iters} calls, malloc: {malloc}; "
        f"times in us per fwd+bwd"
    )
    print(
        f"{'collective, fwd+bwd':<28} {'typed':>8} {'raw':>8} {'extra':>8}   of which: "
        f"{'front':>6} {'autograd':>8} {'kernels-raw':>11}"
    )
    profiles = {}
    with set_mesh(mesh):
        for key in args.cases:
            spec = CASES[key]
            if key == "control":
                continue
            typed, raw, _ = spec.build(rows, cols, args.world)
            layers = None
            if key != "floor":
                # fresh tensors of the case's shapes (the case keeps its own in closures)
                x = torch.randn(rows, cols)
                g = torch.randn_like(typed()[0])  # type: ignore[index]
                op, src, dst = spec.call
                layers = _layers(spec, _public_call(getattr(spmd, op), src, dst), x, g)
            fns: Dict[str, Fn] = {"typed": typed, "raw": raw, **(layers or {})}
            for _ in range(max(10, iters // 10)):
                for fn in fns.values():
                    fn()
            times: Dict[str, List[float]] = {k: [] for k in fns}
            names = list(fns)
            for r in range(args.rounds):
                for name in names if r % 2 == 0 else reversed(names):
                    fn = fns[name]
                    t0 = time.perf_counter()
                    for _ in range(iters):
                        fn()
                    times[name].append((time.perf_counter() - t0) / iters)
            med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
            extra = med["typed"] - med["raw"]
            line = f"{spec.label:<28} {med['typed']:8.1f} {med['raw']:8.1f} {extra:8.1f}"
            if layers:
                auto = med["typed"] - med["front"] - med["kernels"]
                kern = med["kernels"] - med["raw"]
                line += f"   {'':10}{med['front']:6.1f} {auto:8.1f} {kern:11.1f}"
            print(line)
            if args.profile_lines and key not in ("all_to_all_min", "floor"):
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(PROFILE_CALLS):
                    typed()
                prof.disable()
                profiles[spec.label] = prof
    print(
        "front: spmd.<op> up to the autograd Function (axis, src/dst, plan, shape checks); "
        "kernels-raw: the forward and backward kernels run without a graph, minus raw; "
        "autograd: the rest (typed - front - kernels): graph, backward engine, gradient"
    )
    for label, prof in profiles.items():
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(args.profile_lines)
        print(f"\n== cProfile of typed {label}, {PROFILE_CALLS} calls, sorted by own time ==")
        lines = s.getvalue().splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
        print("\n".join(ln for ln in lines[start:] if ln.strip()))
    dist.destroy_process_group()
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        description="Typed spmd_mypy collectives vs raw torch.distributed, forward+backward, gloo."
    )
    ap.add_argument("--size-bytes", type=int, default=1 << 20,
                    help="bytes of each rank's float32 input tensor (default 1 MiB)")
    ap.add_argument("--iters", type=int, default=4,
                    help="forward+backward iterations per timed block (default 4; short blocks "
                         "keep the two sides of a round close in time)")
    ap.add_argument("--rounds", type=int, default=200,
                    help="interleaved rounds; each times one block per side (default 200)")
    ap.add_argument("--warmup", type=int, default=10,
                    help="untimed iterations per side before the rounds (default 10)")
    ap.add_argument("--world", type=int, default=4, help="number of gloo ranks (default 4)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads per rank (default 1: 4 ranks share 2 cores)")
    ap.add_argument("--cases", default=",".join(CASES),
                    help=f"comma-separated subset of: {', '.join(CASES)} (default all)")
    ap.add_argument("--malloc", choices=("stable", "system"), default="stable",
                    help="stable (default): fix glibc's mmap/trim thresholds in the measuring "
                         "processes; system: glibc's history-dependent defaults")
    ap.add_argument("--json", help="also write the per-round times and the summary to this file")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    ap.add_argument("--overhead", action="store_true",
                    help="one process, fake backend: the typed path's own cost per call, by layer")
    ap.add_argument("--overhead-bytes", type=int, default=0,
                    help="tensor size for --overhead (default: --size-bytes)")
    ap.add_argument("--profile-lines", type=int, default=20,
                    help="rows of each cProfile listing in --overhead mode (0: none)")
    args = ap.parse_args(argv)
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    if args.iters < 1 or args.rounds < 2 or args.world < 2 or args.warmup < 0:
        ap.error("need --iters >= 1, --rounds >= 2, --world >= 2, --warmup >= 0")
    return run_overhead(args) if args.overhead else run_gloo(args)


if __name__ == "__main__":
    sys.exit(main())
