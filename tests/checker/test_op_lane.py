"""The op hooks' quick lane answers as the general path does.

op_inference.typed_quietly is the lane's way through the rules (op_lane.py):
it must give the result the general path's _infer_typed gives for the same
operands, and step aside (None) exactly where that reports a broken rule.
Checked here on random operands of every class the lane takes, in both
forms (per axis and spec), with and without gradient, with scalars.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import List, Optional, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from spmd_mypy import I, P, PartitionSpec, R, S, Spmd, V
from spmd_mypy.plugin import op_inference
from spmd_mypy.vocab.opclasses import DIVIDE, LINEAR, MULTILINEAR, NONLINEAR, SCALAR

AXES = ("dp", "ep", "tp")
axis_type = st.sampled_from([R, I, V, P, S(0), S(1), S(-1)])


@st.composite
def per_axis(draw: st.DrawFn) -> Spmd:
    axes = draw(st.dictionaries(st.sampled_from(AXES), axis_type, min_size=1, max_size=3))
    rest = draw(st.sampled_from([None, None, R, V]))
    return Spmd.of(axes, None, draw(st.booleans()), rest)


@st.composite
def spec_form(draw: st.DrawFn) -> Spmd:
    dims = draw(st.lists(st.sampled_from([None, "dp", "tp"]), min_size=1, max_size=3))
    seen = set()
    entries = []
    for d in dims:
        entries.append(None if d is None or d in seen else d)
        seen.add(d)
    named = {a for a in entries if a is not None}
    others = {a: draw(st.sampled_from([R, I, V, P])) for a in AXES if a not in named and draw(st.booleans())}
    return Spmd(spec=PartitionSpec(*entries), nograd=draw(st.booleans()), **others)


operand = per_axis() | spec_form()


def _general(cls: str, values: List[object], no_grad: bool) -> Tuple[Optional[Spmd], bool]:
    """The general path's answer: (result, whether a rule was broken)."""
    # a call outside any function or declared type: the checker's api the error
    # branch reads (_declared_partial) holds an empty type context
    api = SimpleNamespace(expr_checker=SimpleNamespace(type_context=[None]))
    stub = SimpleNamespace(api=api, context=SimpleNamespace(line=1))
    name = "argmax" if no_grad else "mul"  # of the name, only NO_GRAD_RESULTS membership matters
    broken: List[str] = []
    result, failed = op_inference._infer_typed(
        stub, name, cls, "torch", [("x", v) for v in values], 0, lambda axis, message: broken.append(message)
    )
    return result, failed or bool(broken)


@settings(max_examples=400, deadline=None)
@given(
    cls=st.sampled_from([LINEAR, MULTILINEAR, DIVIDE, NONLINEAR]),
    first=operand,
    more=st.lists(operand | st.just(SCALAR), max_size=2),
    no_grad=st.booleans(),
)
def test_the_lane_gives_the_general_paths_result(cls: str, first: Spmd, more: List[object], no_grad: bool) -> None:
    values = [first, *more]
    expected, broken = _general(cls, values, no_grad)
    got = op_inference.typed_quietly(cls, values, no_grad)
    if broken or expected is None:
        assert got is None
    else:
        assert got == expected
        assert got.canonical() == expected.canonical()


def test_the_lane_steps_aside_where_a_rule_is_broken() -> None:
    # F.gelu(P) is the classic: a Partial operand in a nonlinear op
    assert op_inference.typed_quietly(NONLINEAR, [Spmd(tp=P)], False) is None
    # and the same value through a linear op is typed
    assert op_inference.typed_quietly(LINEAR, [Spmd(tp=P), SCALAR], False) is None  # P + 1.0: partial-scalar
    assert op_inference.typed_quietly(MULTILINEAR, [Spmd(tp=P), SCALAR], False) == Spmd(tp=P)
