"""The operator rows reach every table that knows operators (one row per operator).

Expectations written from Python's and the design's rules, not from the rows."""

from __future__ import annotations

from spmd_mypy.vocab import opclasses as oc
from spmd_mypy.vocab import opnames as on
from spmd_mypy.vocab.factor_table import FACTOR_TABLE as TABLE
from spmd_mypy.vocab.operators import OPERATORS, dunders


def test_addition_is_linear_in_every_form() -> None:
    for name in ("__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__neg__"):
        assert oc.op_class(name, "tensor") == oc.LINEAR, name


def test_products_are_multilinear_and_division_divides() -> None:
    for name in ("__mul__", "__rmul__", "__imul__", "__matmul__", "__rmatmul__", "__imatmul__"):
        assert oc.op_class(name, "tensor") == oc.MULTILINEAR, name
    for name in ("__truediv__", "__rtruediv__", "__itruediv__"):
        assert oc.op_class(name, "tensor") == oc.DIVIDE, name


def test_powers_and_comparisons_are_nonlinear_and_comparisons_carry_no_gradient() -> None:
    for name in ("__pow__", "__gt__", "__eq__", "__le__"):
        assert oc.op_class(name, "tensor") == oc.NONLINEAR, name
    assert {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"} <= oc.NO_GRAD_RESULTS
    assert "__add__" not in oc.NO_GRAD_RESULTS


def test_reflected_in_place_and_scalar_forms() -> None:
    # Tensor defines each (2.0 ** x is x.__rpow__(2.0))
    assert oc.REFLECTED == {"__radd__", "__rsub__", "__rmul__", "__rmatmul__", "__rtruediv__", "__rpow__"}
    assert oc.op_class("__rpow__", "tensor") == oc.NONLINEAR
    assert oc.out_of_place("__iadd__") == "__add__" and oc.out_of_place("__imatmul__") == "__matmul__"
    assert {"__add__", "__rmul__", "__itruediv__", "__pow__", "__rpow__"} <= oc.SCALAR_OPERANDS
    assert "__matmul__" not in oc.SCALAR_OPERANDS  # x @ 2 is no product with a number


def test_messages_and_global_functions() -> None:
    assert on.display_name("__matmul__", "tensor") == "'@'"
    assert on.display_name("__iadd__", "tensor") == "'+='"
    assert on.OPERATOR_FUNCTIONS["truediv"] == "div" and on.OPERATOR_FUNCTIONS["pos"] == "positive"


def test_every_row_reaches_every_table() -> None:
    for op in OPERATORS:
        for d in dunders(op):
            assert d in on.OPERATOR_SYMBOLS, d
            if op.cls != oc.NONLINEAR:
                assert oc.TENSOR_METHODS[d] == op.cls, d
            if op.pointwise:
                assert d in TABLE, d
        if op.function is not None:
            assert op.function in TABLE, op.function
