"""Per-axis rules of non-collective ops (notes/typing-rules.md)."""

from __future__ import annotations

import itertools
import random

import pytest

from spmd_mypy import I, P, R, S, V
from spmd_mypy.vocab.opclasses import (
    DIVIDE,
    FACTORY,
    LINEAR,
    MULTILINEAR,
    NONLINEAR,
    SCALAR,
    SELECTION,
    OpRuleError,
    combine,
    op_class,
)


@pytest.mark.parametrize(
    "cls, operands, result",
    [
        (LINEAR, [R, R], R),
        (LINEAR, [I, I], I),
        (LINEAR, [V, V], V),
        (LINEAR, [R, V], V),
        (LINEAR, [S(0), R], V),  # S(i) types as V in local SPMD
        (LINEAR, [P, P], P),
        (LINEAR, [P], P),
        (LINEAR, [R, SCALAR], R),
        (LINEAR, [V, SCALAR], V),
        (MULTILINEAR, [P, R], P),
        (MULTILINEAR, [R, P], P),
        (MULTILINEAR, [P, SCALAR], P),
        (MULTILINEAR, [V, R], V),
        (MULTILINEAR, [I, I], I),
        (DIVIDE, [P, R], P),
        (DIVIDE, [P, SCALAR], P),
        (DIVIDE, [V, R], V),
        (NONLINEAR, [R], R),
        (NONLINEAR, [V, R], V),
        (NONLINEAR, [I], I),
        (FACTORY, [], R),
        (LINEAR, [SCALAR, SCALAR], R),
    ],
)
def test_accepted(cls, operands, result) -> None:
    assert combine(cls, operands) == result


@pytest.mark.parametrize(
    "cls, operands, code",
    [
        (LINEAR, [P, R], "partial-mixed"),  # bias added to a partial sum
        (LINEAR, [P, V], "partial-mixed"),
        (LINEAR, [P, SCALAR], "partial-scalar"),
        (MULTILINEAR, [P, P], "partial-product"),
        (MULTILINEAR, [P, V], "partial-mixed"),
        (MULTILINEAR, [P, I], "partial-mixed"),
        (DIVIDE, [R, P], "partial-denominator"),
        (DIVIDE, [SCALAR, P], "partial-denominator"),
        (NONLINEAR, [P], "partial-nonlinear"),  # softmax of partial router scores
        (LINEAR, [I, R], "invariant-mixed"),  # forgotten copy-to-region
        (LINEAR, [I, V], "invariant-mixed"),
        (MULTILINEAR, [V, I], "invariant-mixed"),
    ],
)
def test_rejected(cls, operands, code) -> None:
    with pytest.raises(OpRuleError) as e:
        combine(cls, operands)
    assert e.value.code == code


@pytest.mark.parametrize(
    "cls, operands, nograd, result",
    [
        (MULTILINEAR, [I, R], [False, True], I),  # parameter times a replicated mask
        (LINEAR, [R, I], [True, False], I),
        (LINEAR, [I, I], [False, True], I),
        (LINEAR, [R, R], [True, True], R),
        (LINEAR, [I, R], [True, False], R),  # the no-grad I conforms to R
        (MULTILINEAR, [V, I], [False, True], V),
    ],
)
def test_operands_without_gradient_conform(cls, operands, nograd, result) -> None:
    assert combine(cls, operands, nograd) == result


def test_a_varying_operand_without_gradient_still_forces_v() -> None:
    # The invariant operand's gradient would be varying: still an error.
    with pytest.raises(OpRuleError) as e:
        combine(MULTILINEAR, [I, V], [False, True])
    assert e.value.code == "invariant-mixed"


def test_unknown_operands_never_error() -> None:
    assert combine(NONLINEAR, [P, None]) is None
    assert combine(LINEAR, [I, None]) is None


@pytest.mark.parametrize(
    "name, namespace, cls",
    [
        ("add", "torch", LINEAR),
        ("__add__", "tensor", LINEAR),
        ("__radd__", "tensor", LINEAR),
        ("__matmul__", "tensor", MULTILINEAR),
        ("__truediv__", "tensor", DIVIDE),
        ("linear", "functional", MULTILINEAR),
        ("einsum", "torch", MULTILINEAR),
        ("to", "tensor", LINEAR),
        ("float", "tensor", LINEAR),
        ("zeros", "torch", FACTORY),
        ("gelu", "functional", NONLINEAR),  # absent from the tables: the safe default
        ("exp", "torch", NONLINEAR),
        ("softmax", "tensor", NONLINEAR),
        ("where", "torch", SELECTION),
        ("where", "tensor", SELECTION),
    ],
)
def test_op_table(name, namespace, cls) -> None:
    assert op_class(name, namespace) == cls


# where(condition, input, other), checked against its values on 3 ranks: an
# operand of kind R holds the same values on every rank, P holds addends
# that sum to its value, V holds each rank's own (no global value); a
# branch "zero" is a literal 0 (no operand) and "scalar" the number 1.5 (an
# operand SCALAR).  A result typed R must be the true where() on every rank,
# one typed P must sum to it over the ranks.
_RANKS, _N = 3, 8


def _held(kind: str, rng: random.Random):
    """(the value, each rank's values); the value is None for V."""
    if kind in ("zero", "scalar"):
        v = [0.0 if kind == "zero" else 1.5] * _N
        return v, [v] * _RANKS
    if kind == "R":
        v = [rng.uniform(-1, 1) for _ in range(_N)]
        return v, [v] * _RANKS
    parts = [[rng.uniform(-1, 1) for _ in range(_N)] for _ in range(_RANKS)]
    if kind == "P":
        return [sum(col) for col in zip(*parts)], parts
    return None, parts  # V


def _where(c, x, y):
    return [a if k > 0 else b for k, a, b in zip(c, x, y)]


_TYPES = {"R": R, "V": V, "P": P, "scalar": SCALAR}


@pytest.mark.parametrize(
    "cond, first, second",
    list(itertools.product(["R", "V"], ["R", "V", "P", "zero", "scalar"], ["R", "V", "P", "zero", "scalar"])),
)
def test_select_types_hold_on_the_ranks(cond: str, first: str, second: str) -> None:
    rng = random.Random(f"{cond}{first}{second}")
    held = [_held(kind, rng) for kind in (cond, first, second)]
    operands = [_TYPES[k] for k in (cond, first, second) if k != "zero"]
    try:
        result = combine(SELECTION, operands)
    except OpRuleError:
        result = None
    per_rank = [_where(*(h[1][r] for h in held)) for r in range(_RANKS)]
    truth = _where(*(h[0] for h in held)) if all(h[0] is not None for h in held) else None
    if result is R:
        assert truth is not None and all(v == pytest.approx(truth) for v in per_rank)
    elif result is P:
        assert truth is not None and [sum(col) for col in zip(*per_rank)] == pytest.approx(truth)
    # and the rule is not vacuous: a P branch beside a P or zero branch under
    # an R condition is a pending sum, and any other P combination an error
    if P in operands:
        assert (result is P) == (cond == "R" and {first, second} <= {"P", "zero"})
