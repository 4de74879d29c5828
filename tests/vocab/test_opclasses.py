"""Per-axis rules of non-collective ops (notes/typing-rules.md)."""

from __future__ import annotations

import pytest

from spmd_mypy import I, P, R, S, V
from spmd_mypy.vocab.opclasses import (
    DIVIDE,
    FACTORY,
    LINEAR,
    MULTILINEAR,
    NONLINEAR,
    SCALAR,
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
    ],
)
def test_op_table(name, namespace, cls) -> None:
    assert op_class(name, namespace) == cls
