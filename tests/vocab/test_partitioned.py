"""Partitioned-shard layouts (vocab/partitioned.py) and the PS/PSA types, without ranks.

The layouts are checked against the seed's worked example, and, for random
split matrices (hypothesis, empty partitions included), the conversions'
index arithmetic is replayed in one process: pieces of a full list of row
ids moved exactly as runtime/partitioned.py moves them must land where the
target layout says.
"""

from __future__ import annotations

import pickle
from typing import List, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spmd_mypy.vocab.localtype import PS, PSA, S, V, R, P, parse_axis_type
from spmd_mypy.vocab.partitioned import (
    PartitionError,
    aligned_layout,
    aligned_splits,
    full_layout,
    op_rule,
    owned,
    piece_index,
    unaligned_layout,
)
from spmd_mypy.vocab.spec import Spmd, parse_spmd

SEED = [[4, 6, 4, 2], [2, 4, 8, 2]]


def test_seed_layouts() -> None:
    assert full_layout(SEED) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3)]
    assert aligned_layout(SEED, 0) == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert aligned_splits(SEED, 0) == [4, 2, 6, 4] and aligned_splits(SEED, 1) == [4, 8, 2, 2]
    assert unaligned_layout(SEED, 1) == [(1, 0), (1, 1), (1, 2), (1, 3)]
    with pytest.raises(PartitionError, match="cannot be aligned over 3 ranks"):
        owned(4, 3, 0)


def test_piece_index() -> None:
    assert piece_index([2, 0, 1], [2, 0, 1]) == [2, 0, 1]
    assert piece_index([1, 2], [1, 0]) == [1, 2, 0]


def test_types_text_and_equality() -> None:
    assert str(PS(0)) == "PS(0)" and str(PSA(1)) == "PSA(1)"
    assert PS(0) != S(0) and S(0) != PS(0) and PS(0) != PSA(0) and PS(0) == PS(0)
    assert parse_axis_type("PSA(2)") == PSA(2) and parse_axis_type("PS(-1)") == PS(-1)
    spmd = Spmd(ep=PSA(0), tp=S(1))
    assert parse_spmd(spmd.canonical()) == spmd
    assert pickle.loads(pickle.dumps(PS(3))) == PS(3)
    assert Spmd(ep=PS(-2)).normalized(3).axes["ep"] == PS(1)


def test_op_rule() -> None:
    assert op_rule("add", [PS(0), PS(0)], []) == PS(0)
    assert op_rule("mul", [PSA(0), R, 2.0], []) == PSA(0)
    assert op_rule("matmul", [PSA(0), V], []) == PSA(0)  # tokens of my experts @ my experts' weights
    assert op_rule("cat", [PS(0), PS(0)], [1]) == PS(0)
    assert op_rule("add", [S(0), V], []) is None  # no partitioned operand: not this rule's
    assert op_rule("add", [PS(0), P], []) is None  # the general rules report the Partial
    for name, ops, dims, match in [
        ("add", [PS(0), PSA(0)], [], "different partitioned layouts"),
        ("add", [PS(0), S(0)], [], "meets an operand that is S\\(0\\)"),
        ("mul", [PS(0), V], [], "only an aligned PSA value meets per-rank"),
        ("reshape", [PS(0)], [], "may merge or split dim 0"),
        ("cat", [PS(0), PS(0)], [0], "cuts or joins its partitions"),
        ("split", [PSA(1)], [-1], "cuts or joins"),
    ]:
        with pytest.raises(PartitionError, match=match):
            op_rule(name, ops, dims, ndim=2)


@st.composite
def matrices(draw: st.DrawFn) -> List[List[int]]:
    n = draw(st.integers(1, 4))
    m = draw(st.integers(1, 3))
    return draw(st.lists(st.lists(st.integers(0, 4), min_size=n * m, max_size=n * m), min_size=n, max_size=n))


def _rows(M: Sequence[Sequence[int]], pieces: Sequence[tuple]) -> List[int]:
    start, acc = {}, 0
    for q in full_layout(M):
        start[q] = acc
        acc += M[q[0]][q[1]]
    return [start[q] + e for q in pieces for e in range(M[q[0]][q[1]])]


@settings(max_examples=200, deadline=None)
@given(matrices())
def test_unaligned_to_aligned_index_arithmetic(M: List[List[int]]) -> None:
    n, k = len(M), len(M[0])
    m = k // n
    local = {s: _rows(M, unaligned_layout(M, s)) for s in range(n)}
    # what rank c sends to rank d: its slices of d's partitions (contiguous)
    for c in range(n):
        got = [M[s][p] for s in range(n) for p in owned(k, n, c)]  # sizes all_to_all
        recv: List[int] = []
        for s in range(n):
            start = sum(M[s][: c * m])
            recv += local[s][start : start + sum(M[s][c * m : (c + 1) * m])]
        order = [s * m + j for j in range(m) for s in range(n)]
        assert [recv[i] for i in piece_index(got, order)] == _rows(M, aligned_layout(M, c))
        assert [got[q] for q in order] == aligned_splits(M, c)
