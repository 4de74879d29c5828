"""Small programs written for the runtime checker spmd_types, in the style of
its real users (per-axis dicts in assert_type statements, a StrEnum of axis
names, src/dst collectives).  tests/spmd_types_style/test_agreement.py checks
them with spmd-mypy (no errors) and runs them under spmd_types' own runtime
checker on simulated ranks (no errors, and the values of one process)."""

from __future__ import annotations

import enum

import torch
import torch.nn.functional as F
import spmd_types as spmd


class Mesh(enum.StrEnum):
    TP = enum.auto()


def tp_mlp(x: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    """Column-parallel up projection, row-parallel down projection."""
    spmd.assert_type(x, {Mesh.TP: spmd.I})
    spmd.assert_type(w_up, {Mesh.TP: spmd.S(0)})
    spmd.assert_type(w_down, {Mesh.TP: spmd.S(1)})
    h = spmd.convert(x, Mesh.TP, src=spmd.I, dst=spmd.R)
    h = F.gelu(h @ w_up.T)
    partial = spmd.reinterpret(h @ w_down.T, Mesh.TP, src=spmd.V, dst=spmd.P)
    return spmd.all_reduce(partial, Mesh.TP, src=spmd.P, dst=spmd.I)


def sp_mlp(x: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    """Sequence parallel: gather the sequence shards, reduce-scatter the output."""
    spmd.assert_type(x, {"tp": spmd.S(0)})
    spmd.assert_type(w_up, {"tp": spmd.S(0)})
    spmd.assert_type(w_down, {"tp": spmd.S(1)})
    full = spmd.all_gather(x, "tp", src=spmd.S(0), dst=spmd.R)
    h = F.relu(full @ w_up.T)
    partial = spmd.reinterpret(h @ w_down.T, "tp", src=spmd.V, dst=spmd.P)
    out = spmd.reduce_scatter(partial, "tp", src=spmd.P, dst=spmd.S(0))
    spmd.assert_type(out, {"tp": spmd.S(0)})
    return out


def vocab_parallel_logsumexp(logits: torch.Tensor) -> torch.Tensor:
    """log-sum-exp over a vocabulary sharded on its last dim (stable form)."""
    spmd.assert_type(logits, {"tp": spmd.S(1)})
    local_max = logits.detach().amax(dim=-1, keepdim=True)
    global_max = spmd.all_reduce(
        spmd.reinterpret(local_max, "tp", src=spmd.V, dst=spmd.P), "tp", src=spmd.P, dst=spmd.R
    )
    sum_exp = (logits - global_max).exp().sum(dim=-1, keepdim=True)
    sum_exp = spmd.reinterpret(sum_exp, "tp", src=spmd.V, dst=spmd.P)
    total = spmd.all_reduce(sum_exp, "tp", src=spmd.P, dst=spmd.R)
    return total.log() + global_max
