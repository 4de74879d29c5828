"""vocab/rules_einsum.py against einsums computed on simulated ranks.

The oracle is torch itself: each operand of a stated type is split into the
two ranks' local values (S(i): chunks of dim i; R/I: the full tensor), each
rank runs the einsum on its local values, and the result's claimed type must
describe what the ranks hold: S(k) -- their results concatenated on dim k
are the full einsum; P -- their sum is; R/I -- each is."""

from __future__ import annotations

from typing import Dict, List

import pytest
import torch

from spmd_mypy.vocab.localtype import I, P, R, S, V, Shard
from spmd_mypy.vocab.opclasses import OpRuleError
from spmd_mypy.vocab.rules_einsum import rules_einsum
from spmd_mypy.vocab.spec import Spmd

RANKS = 2


def _local(full: torch.Tensor, t: object, rank: int) -> torch.Tensor:
    return full.chunk(RANKS, dim=t.dim)[rank] if isinstance(t, Shard) else full


def _holds(result: object, equation: str, fulls: List[torch.Tensor], types: List[object]) -> bool:
    want = torch.einsum(equation, *fulls)
    locals_ = [torch.einsum(equation, *[_local(f, t, r) for f, t in zip(fulls, types)]) for r in range(RANKS)]
    if isinstance(result, Shard):
        return torch.allclose(torch.cat(locals_, dim=result.dim), want, atol=1e-5)
    if result is P:
        return torch.allclose(sum(locals_), want, atol=1e-5)
    return all(torch.allclose(x, want, atol=1e-5) for x in locals_)


CASES = [
    ("mk,nk->mn", [R, S(0)], S(1)),  # column parallel
    ("mk,nk->mn", [S(1), S(1)], P),  # row parallel: contracted shards
    ("mk,nk->mn", [S(0), R], S(0)),  # sequence sharded
    ("tv->t", [S(1)], P),  # a sum over a sharded vocab
    ("bij,bjk->bik", [S(0), S(0)], S(0)),  # batch
    ("mn,n->mn", [R, R], R),
    ("...k,nk->...n", [R, S(0)], S(-1)),
]


@pytest.mark.parametrize("equation,types,expected", CASES)
def test_result_type_describes_the_ranks_values(equation: str, types: List[object], expected: object) -> None:
    torch.manual_seed(0)
    terms = equation.split("->")[0].split(",")
    sizes: Dict[str, int] = {c: 4 + i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}
    fulls = [torch.randn(*([3] if "." in term else []), *[sizes[c] for c in term.replace("...", "")])
             for term in terms]
    got = rules_einsum(equation, [Spmd.of({"tp": t}) for t in types])
    assert got is not None and got.axis_type("tp") == expected
    assert _holds(expected, equation, fulls, types)


@pytest.mark.parametrize("equation,types,code", [
    ("mk,nk->mn", [I, S(1)], "einsum-unsharded-label"),  # k sharded in one operand only
    ("mk,nk->mn", [S(0), S(0)], "einsum-two-labels"),  # one axis, two labels
    ("mn,n->mn", [S(0), V], "einsum-not-replicated"),
    ("mn,n->mn", [P, R], "einsum-partial"),  # P passes only through linear_in
])
def test_broken_rules_are_errors(equation: str, types: List[object], code: str) -> None:
    with pytest.raises(OpRuleError) as e:
        rules_einsum(equation, [Spmd.of({"tp": t}) for t in types])
    assert e.value.code == code


def test_partial_through_a_declared_linear_operand_and_unknowns() -> None:
    assert rules_einsum("mn,n->mn", [Spmd.of({"tp": P}), Spmd.of({"tp": R})], (0,)).axis_type("tp") is P
    assert rules_einsum("mn,n->mn", [None, Spmd.of({"tp": R})]) is None
    mixed = rules_einsum("mk,nk->mn", [Spmd.of({"dp": S(0), "tp": R}), Spmd.of({"tp": S(0)})])
    assert mixed is not None and mixed.axis_type("tp") == S(1) and mixed.axis_type("dp") is None
