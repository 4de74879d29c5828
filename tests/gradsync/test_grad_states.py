"""Which gradient state a declared type gives, in the vocabulary and as the
runtime reads it from a module class (what spmd.sync_grads sums)."""

from __future__ import annotations

from typing import Annotated, Optional

import torch
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, P, R, S, Spmd, V
from spmd_mypy.runtime.gradsync import grad_state_of
from spmd_mypy.vocab.gradsync import (
    COMPLETE,
    EVERY,
    NAMED,
    PENDING,
    PENDING_ONLY,
    SHARDED,
    Param,
    Sum,
    check_contract,
    grad_state,
)


class Layer(nn.Module):
    ln_w: Annotated[Tensor, Spmd(dp=R, tp=R)]
    bias: Optional[Annotated[Tensor, Spmd(tp=I)]]
    w: Annotated[Tensor, Spmd(tp=S(0))]

    def __init__(self) -> None:
        super().__init__()
        self.ln_w = nn.Parameter(torch.ones(2))
        self.bias = nn.Parameter(torch.zeros(2))
        self.w = nn.Parameter(torch.zeros(2, 2))
        self.untyped = nn.Parameter(torch.zeros(2))
        spmd.tie(self.w, "pp")


def test_vocabulary_states() -> None:
    assert [grad_state(t) for t in (I, R, V, S(1), P, None)] == [COMPLETE, PENDING, SHARDED, SHARDED, None, None]


def test_runtime_reads_the_class_declarations_and_ties() -> None:
    m = Layer()
    got = {(n, a): grad_state_of(m, n, p, a) for n, p in m.named_parameters() for a in ("tp", "dp", "pp")}
    assert got[("ln_w", "tp")] == PENDING and got[("ln_w", "dp")] == PENDING
    assert got[("bias", "tp")] == COMPLETE and got[("bias", "dp")] is None  # Optional read through
    assert got[("w", "tp")] == SHARDED and got[("w", "pp")] == PENDING  # the tie
    assert got[("untyped", "tp")] is None


def test_contract_counts_each_sum() -> None:
    ln = Param("ln_w", Spmd(dp=R, tp=R))
    w = Param("w", Spmd(tp=S(0)), tied=("pp",))
    ok = [Sum(1, "dp", PENDING_ONLY), Sum(2, "tp", NAMED, ("ln_w",)), Sum(3, "pp", PENDING_ONLY)]
    assert check_contract([ln, w], ok, "m", "f()") == []
    kinds = [(p.kind, p.param.path, p.axis, p.line) for p in check_contract([ln, w], ok[:1] + [Sum(4, "tp", EVERY)], "m", "f()")]
    assert kinds == [("missing", "w", "pp", None), ("wrong-axis", "w", "tp", 4)]
    twice = check_contract([ln], ok[:2] + [Sum(5, "dp", EVERY)], "m", "f()")
    assert [(p.kind, p.line) for p in twice] == [("twice", 5)]
