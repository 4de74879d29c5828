"""A replicated weight used through its local tensor with per-rank inputs
(pytorch issue 172932's class): run on simulated ranks in a subprocess of its
own (it starts a process group), printed as JSON for test_dtensor_runtime.py.

Each rank r holds rows r of x (sharded on the batch) and the whole weight as a
Replicate DTensor; y = x_r @ w_local; loss = sum over ranks of y.sum().  The
local gradient of w is each rank's addend (Partial over tp).  With to_local's
default gradient placement (Replicate()), DTensor takes one rank's addend as
the whole gradient; with grad_placements=[Partial()] (or
spmd_mypy.runtime.dtensor.to_local(dt, Spmd(tp=R))) it sums them."""

from __future__ import annotations

import json
import sys

import torch
from torch.distributed.tensor import DTensor, Partial, Replicate

import spmd_mypy as spmd
from spmd_mypy import R, Spmd
from spmd_mypy.runtime import dtensor

TP = 2
torch.manual_seed(0)
X = torch.randn(TP * 3, 4, dtype=torch.float64)
W = torch.randn(4, 5, dtype=torch.float64)


def weight_grad(how: str) -> list:
    with spmd.simulate(tp=TP) as sim:
        w_dt = DTensor.from_local(sim.per_rank(lambda r: W.clone()), sim.mesh, [Replicate()])
        w_dt.requires_grad_(True)
        x = sim.per_rank(lambda r: X[r * 3:(r + 1) * 3].clone())
        if how == "default":
            w_local = w_dt.to_local()
        elif how == "partial":
            w_local = w_dt.to_local(grad_placements=[Partial()])
        else:
            w_local = dtensor.to_local(w_dt, Spmd(tp=R))
        (x @ w_local).sum().backward()
        grad = w_dt.grad
        assert grad is not None
        full = grad.full_tensor()
        return [sim.rank(full, r).tolist() for r in range(TP)]


def main() -> int:
    reference = (X.sum(dim=0, keepdim=True).T @ torch.ones(1, 5, dtype=torch.float64)).tolist()
    out = {how: weight_grad(how) for how in ("default", "partial", "typed")}
    out["reference"] = reference
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
