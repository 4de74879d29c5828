"""Uneven collectives: exact (the runtime today) vs padded (the runtime before), gloo, CPU.

For each uneven collective, both forms compute the same result on --world
ranks (checked once, exactly, before timing):

  exact   spmd.<collective>(x, "w", ..., split_sizes=...): one
          all_to_all_single that moves exactly the sum of the splits
          (spmd_mypy/runtime/uneven.py);
  padded  the form the runtime used before: every piece padded with zeros to
          the largest split, one even all_gather / reduce_scatter /
          all_to_all, then trimmed (copied below from the old kernels.py).

Elements moved: what each rank sends to the other ranks, summed over the
ranks, for each form's own algorithm (a ring all_gather or reduce_scatter of
n pieces of max rows sends (n-1) pieces per rank; the exact all_to_all sends
each row once to each rank that needs it).  Times: forward only, median
over --rounds rounds of --iters iterations, exact and padded interleaved
(order alternating per round), each block after a barrier, on rank 0.

The splits default to a skewed MoE-like load ([7, 1, 0, 4] rows for 4 ranks,
one empty) of rows of --row floats.  Also tried once: gloo's list all_gather
of exact-size tensors, the other exact route (gloo refuses unequal sizes).

Run:  python bench/bench_uneven.py [--world 4] [--row 65536] [--rounds 9] [--iters 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from _ranks import interleaved, run_on_ranks, timed  # noqa: E402

# -- the padded forms (the runtime's kernels before the exact ones) ---------------------


def _pad_dim0(x: torch.Tensor, length: int) -> torch.Tensor:
    if x.shape[0] == length:
        return x
    return torch.cat([x, x.new_zeros((length - x.shape[0],) + tuple(x.shape[1:]))], 0)


def padded_all_gather(x: torch.Tensor, sizes: Sequence[int], group: dist.ProcessGroup) -> torch.Tensor:
    m, n = max(sizes), len(sizes)
    send = _pad_dim0(x, m).contiguous()
    out = send.new_empty((n * m,) + tuple(send.shape[1:]))
    dist.all_gather_single(out, send, group=group)
    return torch.cat([out.narrow(0, k * m, s) for k, s in enumerate(sizes)], 0)


def padded_reduce_scatter(x: torch.Tensor, sizes: Sequence[int], c: int,
                          group: dist.ProcessGroup) -> torch.Tensor:
    m = max(sizes)
    send = torch.cat([_pad_dim0(p, m) for p in x.split(list(sizes), 0)], 0).contiguous()
    out = send.new_empty((m,) + tuple(send.shape[1:]))
    dist.reduce_scatter_single(out, send, group=group)
    return out.narrow(0, 0, sizes[c])


def padded_all_to_all(x: torch.Tensor, a: Sequence[int], b: Sequence[int], c: int,
                      group: dist.ProcessGroup) -> torch.Tensor:
    """S(0) -> S(1): x is (a[c], sum(b)); pieces padded to (max a, max b)."""
    ma, mb = max(a), max(b)
    pieces = []
    for p in x.split(list(b), 1):
        p = _pad_dim0(p, ma)
        if p.shape[1] < mb:
            p = torch.cat([p, p.new_zeros((p.shape[0], mb - p.shape[1]) + tuple(p.shape[2:]))], 1)
        pieces.append(p)
    send = torch.stack(pieces, 0).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    got = [g.narrow(0, 0, s) for g, s in zip(recv.unbind(0), a)]
    return torch.cat(got, 0).narrow(1, 0, b[c])


# -- the cases ---------------------------------------------------------------------------


def _elements(kind: str, a: Sequence[int], b: Sequence[int], row: int, exact: bool) -> int:
    """Elements sent to other ranks, summed over the ranks (each form's own algorithm)."""
    n, m, total = len(a), max(a), sum(a)
    if kind in ("all_gather", "reduce_scatter"):
        # exact: every row goes once to each of the n-1 other ranks (gather), or each
        # rank's piece k once to rank k (scatter); padded: n pieces of max rows each
        return (n - 1) * total * row if exact else (n - 1) * n * m * row
    cols = row // sum(b)  # all_to_all S(0) -> S(1): rank c's piece for rank k is a[c] x b[k]
    if exact:
        return sum(a[c] * (sum(b) - b[c]) for c in range(n)) * cols
    return n * (n - 1) * m * max(b) * cols


def _cases(world: int, row: int) -> Dict[str, Tuple[List[int], List[int]]]:
    sizes = {2: [7, 1], 4: [7, 1, 0, 4]}.get(world) or [((3 * k) % 8) for k in range(world)]
    b = {2: [2, 6], 4: [1, 6, 1, 0]}.get(world) or list(reversed(sizes))
    return {"all_gather": (sizes, b), "reduce_scatter": (sizes, b), "all_to_all": (sizes, b)}


def _body(rank: int, args: argparse.Namespace) -> Dict[str, object]:
    import spmd_mypy as spmd
    from spmd_mypy import P, R, S
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (args.world,), mesh_dim_names=("w",))
    group = mesh.get_group("w")
    results: Dict[str, object] = {}
    with spmd.set_mesh(mesh):
        for kind, (a, b) in _cases(args.world, args.row).items():
            gen = torch.Generator().manual_seed(rank)
            if kind == "all_gather":
                x = torch.randn(a[rank], args.row, generator=gen)
                exact: Callable[[], torch.Tensor] = lambda: spmd.all_gather(x, "w", src=S(0), dst=R, split_sizes=a)
                padded: Callable[[], torch.Tensor] = lambda: padded_all_gather(x, a, group)
            elif kind == "reduce_scatter":
                x = torch.randn(sum(a), args.row, generator=gen)
                exact = lambda: spmd.reduce_scatter(x, "w", src=P, dst=S(0), split_sizes=a)
                padded = lambda: padded_reduce_scatter(x, a, rank, group)
            else:
                cols = args.row // sum(b)
                x = torch.randn(a[rank], sum(b), cols, generator=gen)
                exact = lambda: spmd.all_to_all(x, "w", src=S(0), dst=S(1), split_sizes=(a, b))
                padded = lambda: padded_all_to_all(x, a, b, rank, group)
            torch.testing.assert_close(exact(), padded(), rtol=1e-5, atol=1e-5)
            forms = {"exact": timed(exact, args.iters), "padded": timed(padded, args.iters)}
            times = interleaved(forms, args.rounds)
            results[kind] = {k: statistics.median(v) for k, v in times.items()}
        x = torch.ones(_cases(args.world, args.row)["all_gather"][0][rank], 4)
        try:
            dist.all_gather([torch.empty(s, 4) for s in _cases(args.world, args.row)["all_gather"][0]],
                            x, group=group)
            results["list_all_gather"] = "ran"
        except Exception as e:  # gloo: "invalid tensor size"
            results["list_all_gather"] = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
    return results


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--row", type=int, default=1 << 16, help="floats per row (default 65536)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--iters", type=int, default=5)
    args = ap.parse_args(argv)
    res = run_on_ranks(_body, args, args.world)
    print(f"world {args.world}, rows of {args.row} floats, {args.rounds} rounds x {args.iters} iters")
    print(f"{'collective':<16}{'splits':<26}{'sent exact':>13}{'sent padded':>14}{'ratio':>7}"
          f"{'ms exact':>10}{'ms padded':>11}{'ratio':>7}")
    for kind, (a, b) in _cases(args.world, args.row).items():
        ee, ep = _elements(kind, a, b, args.row, True), _elements(kind, a, b, args.row, False)
        te, tp = res[kind]["exact"] * 1e3, res[kind]["padded"] * 1e3
        splits = f"{a}" if kind != "all_to_all" else f"{a}->{b}"
        print(f"{kind:<16}{splits:<26}{ee:>13,}{ep:>14,}{ee / ep:>7.2f}{te:>10.2f}{tp:>11.2f}{te / tp:>7.2f}")
    print(f"gloo list all_gather of exact sizes: {res['list_all_gather']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
