"""vocab/contractions.py against shapes worked out independently.

The oracle: torch's own definition of which dim a product contracts
(matmul: the left operand's last dim, the right one's second-to-last or its
only dim; F.linear: the input's last dim and the weight's dim 1; einsum: a
letter absent from the output), and the permutation a transposing view
applies, evaluated at concrete ranks."""

from __future__ import annotations

import itertools
from typing import List, Optional

import pytest

from spmd_mypy.vocab.contractions import partial_operands, transposed_dim
from spmd_mypy.vocab.localtype import R, S, V


def _matmul_contracted(ra: int, rb: int) -> tuple:
    return ra - 1, (0 if rb == 1 else rb - 2)


@pytest.mark.parametrize("ra,rb", [(a, b) for a in range(1, 5) for b in range(1, 5)])
def test_matmul_at_known_ranks_flags_exactly_the_contraction(ra: int, rb: int) -> None:
    ca, cb = _matmul_contracted(ra, rb)
    for i, j in itertools.product(range(ra), range(rb)):
        got = partial_operands("matmul", [(S(i), ra), (S(j), rb)])
        assert (got is not None) == (i == ca and j == cb), (ra, rb, i, j, got)


@pytest.mark.parametrize("r", [1, 2, 3, 4])
def test_linear_contracts_the_input_last_dim_with_weight_dim_1(r: int) -> None:
    for i in range(r):
        for j in range(2):
            got = partial_operands("linear", [(S(i), r), (S(j), 2)])
            assert (got is not None) == (i == r - 1 and j == 1)


def test_negative_dims_are_certain_without_a_rank() -> None:
    assert partial_operands("__matmul__", [(S(-1), None), (S(-2), None)]) == (0, 1)
    assert partial_operands("linear", [(S(-1), None), (S(1), None)]) == (0, 1)
    # a V operand meeting a certain shard of the contracted dim
    assert partial_operands("__matmul__", [(V, None), (S(-2), None)]) == (0, 1)
    # heads as a batch dim: S(1) on both sides of q @ k^T, no rank known
    assert partial_operands("__matmul__", [(S(1), None), (S(1), None)]) is None
    # a replicated operand never makes a pending sum
    assert partial_operands("__matmul__", [(R, None), (S(-2), None)]) is None


def test_einsum_contracts_letters_missing_from_the_output() -> None:
    assert partial_operands("einsum", [(S(2), None), (S(1), None)], "bsh,oh->bso") == (0, 1)
    assert partial_operands("einsum", [(S(2), None), (S(1), None)], "bsh,oh->bsoh") is None
    assert partial_operands("einsum", [(S(-1), None), (S(0), None)], "...h,hd") == (0, 1)
    assert partial_operands("einsum", [(S(0), None), (S(0), None)], "...h,hd->...d") is None


def _moved(name: str, rank: int, dim: int, dims: List[int]) -> int:
    order = list(range(rank))
    if name == "t":
        order = order[::-1]
    elif name == "mT":
        order[-1], order[-2] = order[-2], order[-1]
    else:
        a, b = (d % rank for d in dims)
        order[a], order[b] = order[b], order[a]
    return order.index(dim % rank)


@pytest.mark.parametrize("name,dims", [("t", []), ("mT", []), ("transpose", [0, 1]), ("transpose", [1, 2]),
                                       ("transpose", [-1, -2]), ("transpose", [0, -1])])
def test_transposed_dim_agrees_with_the_permutation_at_every_rank(name: str, dims: List[int]) -> None:
    for dim in range(-4, 4):
        moved: Optional[int] = transposed_dim(name, dim, dims)
        for rank in range(1, 5):
            if not -rank <= dim < rank or (name == "mT" and rank < 2) or (name == "t" and rank > 2):
                continue
            if name == "transpose" and not all(-rank <= d < rank for d in dims):
                continue
            if moved is not None:
                assert moved % rank == _moved(name, rank, dim, dims), (name, dims, dim, rank, moved)
