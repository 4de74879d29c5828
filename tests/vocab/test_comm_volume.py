"""vocab/comm_volume.py: the one accounting table, against ring figures worked out by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest

from spmd_mypy import I, P, R, S, V
from spmd_mypy.vocab.collectives import Step
from spmd_mypy.vocab.comm_volume import (
    Volume,
    grown,
    received_elements,
    received_fraction,
    runtime_volume,
    size_exponent,
    step_volume,
)


@pytest.mark.parametrize(
    "op, g, local, want",
    [
        ("all_gather", 4, 6, 18),  # receives the 3 other pieces of 6
        ("reduce_scatter", 4, 8, 6),  # a ring passes 3 chunks of 2
        ("all_reduce", 4, 8, 12),  # reduce-scatter 6, then all-gather 6
        ("all_reduce", 3, 4, 6),  # 2 * 2 * 4 / 3 = 5.33, rounded up
        ("all_to_all", 2, 10, 5),  # keeps its own half
        ("convert", 4, 8, 0),
        ("all_gather", 1, 8, 0),  # a group of one moves nothing
    ],
)
def test_received_elements(op: str, g: int, local: int, want: int) -> None:
    assert received_elements(op, g, local) == want


def test_fraction_is_exact() -> None:
    assert received_fraction("all_reduce", 3) == Fraction(4, 3)
    assert received_fraction("reinterpret", 8) == 0


@pytest.mark.parametrize(
    "step, e",
    [
        (Step("all_gather", S(0), R), 1),
        (Step("all_gather", V, I), 1),
        (Step("reduce_scatter", P, S(1)), -1),
        (Step("convert", R, S(0)), -1),
        (Step("convert", S(0), P), 1),
        (Step("all_reduce", P, R), 0),
        (Step("reinterpret", I, R), 0),
    ],
)
def test_size_exponent(step: Step, e: int) -> None:
    assert size_exponent(step) == e


def test_backward_of_a_gather_in_forward_sizes() -> None:
    """all_gather(S(0)->R) then its backward reduce_scatter on the gathered gradient:
    (dp-1)/dp of dp * n(w) = (dp-1) * n(w)."""
    exps = grown({}, Step("all_gather", S(0), R), ("dp",))
    assert exps == {"dp": 1}
    vol = step_volume(Step("reduce_scatter", P, S(0)), ("dp",), "w", exps)
    assert vol.text() == "(dp-1) * n(w) * isz"
    assert vol.evaluate({"dp": 4}, numel=10, itemsize=4) == 3 * 10 * 4


def test_all_reduce_over_two_axes_text_and_value() -> None:
    vol = step_volume(Step("all_reduce", P, R), ("dp", "tp"), "g", {})
    assert vol.text() == "2*(dp*tp-1)/(dp*tp) * n(g) * isz"
    assert vol.evaluate({"dp": 2, "tp": 3}, numel=12, itemsize=2) == Fraction(2 * 5 * 12 * 2, 6)


def test_local_and_runtime_volumes() -> None:
    assert step_volume(Step("convert", I, R), ("tp",), "x", {}).text() == "0"
    vol = runtime_volume("x", "routing")
    assert vol.text() == "data-dependent (routing)"
    with pytest.raises(ValueError):
        vol.evaluate({}, 1, 1)
    assert isinstance(vol, Volume)
