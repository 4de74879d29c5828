"""A Megatron-style tensor-parallel MLP, annotated with SPMD types.

Column-parallel first linear (weight rows sharded on tp), row-parallel second
linear (weight columns sharded on tp).  The input arrives Invariant on tp;
`convert(I -> R)` is Megatron's copy-to-region (its backward all-reduces the
input gradient) and `all_reduce(P -> I)` is reduce-from-region.

Run `python examples/tp_mlp.py` to train one step on 4 simulated ranks and
compare output and gradients with the same MLP on one process.
"""

from __future__ import annotations

from typing import Annotated

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V


class TensorParallelMLP(nn.Module):
    w_in: Annotated[Tensor, Spmd(tp=S(0))]  # [ffn / tp, hidden]
    w_out: Annotated[Tensor, Spmd(tp=S(1))]  # [hidden, ffn / tp]

    def __init__(self, w_in: Tensor, w_out: Tensor) -> None:
        super().__init__()
        self.w_in = nn.Parameter(w_in)
        self.w_out = nn.Parameter(w_out)

    def forward(self, x: Annotated[Tensor, Spmd(tp=I)]) -> Annotated[Tensor, Spmd(tp=I)]:
        h = spmd.convert(x, "tp", src=I, dst=R)  # backward: all_reduce of the input grad
        h = F.gelu(h @ self.w_in.T)  # R @ V -> V
        out = h @ self.w_out.T  # V @ V -> V: this rank's addend of the full product
        out = spmd.reinterpret(out, "tp", src=V, dst=P)
        return spmd.all_reduce(out, "tp", src=P, dst=I)


def grad_of(t: Tensor) -> Tensor:
    assert t.grad is not None
    return t.grad


def main(tp: int = 4, hidden: int = 8, ffn: int = 16, batch: int = 3) -> float:
    """One forward/backward on `tp` simulated ranks; returns the largest error."""
    gen = torch.Generator().manual_seed(0)
    x_full = torch.randn(batch, hidden, generator=gen, dtype=torch.float64)
    w_in_full = torch.randn(ffn, hidden, generator=gen, dtype=torch.float64)
    w_out_full = torch.randn(hidden, ffn, generator=gen, dtype=torch.float64)

    # Reference: the same MLP on one process.
    x_ref = x_full.clone().requires_grad_()
    w_in_ref = w_in_full.clone().requires_grad_()
    w_out_ref = w_out_full.clone().requires_grad_()
    out_ref = F.gelu(x_ref @ w_in_ref.T) @ w_out_ref.T
    (out_ref**2).sum().backward()

    rows = ffn // tp
    with spmd.simulate(tp=tp) as sim:  # tp ranks simulated in this process
        x = sim.per_rank(lambda r: x_full.clone()).requires_grad_()
        mlp = TensorParallelMLP(
            sim.per_rank(lambda r: w_in_full[r * rows : (r + 1) * rows].clone()),
            sim.per_rank(lambda r: w_out_full[:, r * rows : (r + 1) * rows].clone()),
        )
        out = mlp(x)
        loss = (out**2).sum()  # I on tp: every rank's implicit grad of 1.0 is right
        loss.backward()

        err = 0.0
        for r in range(tp):
            local = slice(r * rows, (r + 1) * rows)
            pairs = [
                (sim.rank(out, r), out_ref),
                (sim.rank(grad_of(x), r), grad_of(x_ref)),
                (sim.rank(grad_of(mlp.w_in), r), grad_of(w_in_ref)[local]),
                (sim.rank(grad_of(mlp.w_out), r), grad_of(w_out_ref)[:, local]),
            ]
            err = max([err] + [(a - b).abs().max().item() for a, b in pairs])
    return err


if __name__ == "__main__":
    error = main()
    print(f"max abs error vs single process: {error:.3e}")
    raise SystemExit(0 if error < 1e-9 else 1)
