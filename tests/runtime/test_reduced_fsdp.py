"""Seed 001 at runtime, on 4 simulated ranks: JAX's names are the letters, and
the FSDP gather to Reduced has the reduce-scatter backward.

A weight of 8 x 3 is stored S(0) over dp (2 rows per rank).  Each rank
backpropagates its own upstream gradient G_r through the gathered weight.
The reference, from the G_r alone: rank r's shard gradient is rows
[2r, 2r + 2) of sum_r G_r (the weight is used by every rank, so its gradient
is the dp-sum).  all_gather(S(0) -> Reduced) gives it directly (its backward
is reduce_scatter); the naive all_gather(S(0) -> I) + convert(I -> Reduced)
gives the same through an all_reduce and a slice; all_gather(S(0) -> I)
alone would keep only G_r's rows (the other ranks' contributions lost).
"""

from __future__ import annotations

import torch

import spmd_mypy as spmd
from spmd_mypy import I, S, Invariant, Reduced, Unreduced, Varying

N, ROWS, COLS = 4, 8, 3


def _upstream(r: int) -> torch.Tensor:
    return torch.randn(ROWS, COLS, generator=torch.Generator().manual_seed(50 + r), dtype=torch.float64)


def _shard_grads(gather) -> dict:
    w_full = torch.randn(ROWS, COLS, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    with spmd.simulate(dp=N) as sim:
        w = sim.per_rank(lambda r: w_full[2 * r : 2 * r + 2].clone()).requires_grad_()
        full = gather(w)
        g = sim.per_rank(_upstream)
        (full * g).sum().backward()
        return {r: sim.rank(w.grad, r).clone() for r in range(N)}


def test_names_are_the_letters_at_runtime() -> None:
    assert (Reduced, Unreduced, Invariant, Varying) == (spmd.R, spmd.P, spmd.I, spmd.V)


def test_gather_to_reduced_backward_is_the_reduce_scatter() -> None:
    total = sum(_upstream(r) for r in range(N))
    want = {r: total[2 * r : 2 * r + 2] for r in range(N)}
    reduced = _shard_grads(lambda w: spmd.all_gather(w, "dp", src=S(0), dst=Reduced))
    naive = _shard_grads(
        lambda w: spmd.convert(spmd.all_gather(w, "dp", src=S(0), dst=I), "dp", src=I, dst=Reduced)
    )
    lost = _shard_grads(lambda w: spmd.all_gather(w, "dp", src=S(0), dst=Invariant))
    for r in range(N):
        torch.testing.assert_close(reduced[r], want[r], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(naive[r], want[r], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(lost[r], _upstream(r)[2 * r : 2 * r + 2], rtol=0, atol=0)
