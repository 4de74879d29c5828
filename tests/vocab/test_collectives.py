"""The collective signature table against the design's tables."""

from __future__ import annotations

import pytest

from spmd_mypy import I, P, R, S, V
from spmd_mypy.vocab.collectives import (
    EXPERT_ONLY,
    CollectiveError,
    Step,
    backward,
    backward_step,
    plan,
    primitive_keys,
    signature_text,
)
from spmd_mypy.vocab.localtype import grad_type, kind

LETTER = {"R": R, "I": I, "V": V, "P": P}


def _example(k: str, dim: int):
    return S(dim) if k == "S" else LETTER[k]


# The design's "Comms by forwards-backwards" table plus its S(i) variants,
# transcribed independently of the module under test.
DESIGN_BACKWARDS = {
    ("reinterpret", R, I): ("convert", I, P),
    ("reinterpret", R, V): ("reinterpret", V, P),
    ("reinterpret", R, P): ("reinterpret", R, P),
    ("reinterpret", I, R): ("all_reduce", P, I),
    ("reinterpret", V, P): ("reinterpret", R, V),
    ("convert", R, V): ("convert", V, P),
    ("convert", R, S(1)): ("convert", S(1), P),
    ("convert", R, P): ("convert", R, P),
    ("convert", I, V): ("all_gather", V, I),
    ("convert", I, S(2)): ("all_gather", S(2), I),
    ("convert", I, P): ("reinterpret", R, I),
    ("convert", V, P): ("convert", R, V),
    ("convert", S(0), P): ("convert", R, S(0)),
    ("all_gather", V, R): ("reduce_scatter", P, V),
    ("all_gather", V, I): ("convert", I, V),
    ("all_gather", S(1), R): ("reduce_scatter", P, S(1)),
    ("all_gather", S(0), I): ("convert", I, S(0)),
    ("all_reduce", P, R): ("all_reduce", P, R),
    ("all_reduce", P, I): ("reinterpret", I, R),
    ("reduce_scatter", P, V): ("all_gather", V, R),
    ("reduce_scatter", P, S(3)): ("all_gather", S(3), R),
    ("all_to_all", V, V): ("all_to_all", V, V),
    ("all_to_all", S(0), S(1)): ("all_to_all", S(1), S(0)),
}


@pytest.mark.parametrize("fwd, bwd", DESIGN_BACKWARDS.items(), ids=lambda v: str(v))
def test_backward_matches_design(fwd, bwd) -> None:
    assert backward_step(Step(*fwd)) == Step(*bwd)


def test_every_primitive_is_in_the_design_table() -> None:
    covered = {(op, kind(s), kind(d)) for op, s, d in DESIGN_BACKWARDS}
    assert covered == set(primitive_keys())


@pytest.mark.parametrize("key", primitive_keys())
def test_backward_of_backward_is_forward(key) -> None:
    op, s, d = key
    fwd = Step(op, _example(s, 1), _example(d, 2 if s == "S" else 1))
    assert backward_step(backward_step(fwd)) == fwd


@pytest.mark.parametrize("key", primitive_keys())
def test_backward_types_are_gradient_types(key) -> None:
    # A backward maps grad(dst) to grad(src).
    op, s, d = key
    fwd = Step(op, _example(s, 1), _example(d, 2 if s == "S" else 1))
    bwd = backward_step(fwd)
    assert bwd.src == grad_type(fwd.dst)
    assert bwd.dst == grad_type(fwd.src)


def test_expert_only_set_is_the_noted_one() -> None:
    # From notes/typing-rules.md, plus forms defined through one of them.
    noted = {
        ("reinterpret", "R", "I"),
        ("reinterpret", "R", "P"),
        ("convert", "I", "P"),
        ("reinterpret", "R", "V"),
        ("convert", "V", "P"),
        ("convert", "S", "P"),
    }
    through = {("reinterpret", "I", "V"), ("reinterpret", "I", "P"), ("convert", "R", "I")}
    assert EXPERT_ONLY == noted | through


@pytest.mark.parametrize("op, src, dst", sorted(EXPERT_ONLY))
def test_expert_forms_need_expert_mode(op, src, dst) -> None:
    s, d = _example(src, 0), _example(dst, 0)
    with pytest.raises(CollectiveError, match="expert-only.*expert_mode=True") as e:
        plan(op, s, d, axis="tp")
    assert "'tp'" in str(e.value)
    assert plan(op, s, d, axis="tp", expert_mode=True)


def test_composites_expand_per_design() -> None:
    assert plan("reinterpret", I, V, expert_mode=True) == (
        Step("reinterpret", I, R),
        Step("reinterpret", R, V),
    )
    assert plan("reinterpret", I, P, expert_mode=True) == (
        Step("reinterpret", I, R),
        Step("reinterpret", R, P),
    )
    # Backward of a composite: reversed, each step mapped.
    assert backward(plan("reinterpret", I, V, expert_mode=True)) == (
        Step("reinterpret", V, P),
        Step("all_reduce", P, I),
    )
    assert plan("convert", I, R) == (Step("reinterpret", I, R),)


def test_identity_coercions_have_no_steps() -> None:
    for op in ("reinterpret", "convert", "redistribute"):
        for t in (R, I, V, P):
            assert plan(op, t, t) == ()
    assert plan("redistribute", S(1), S(1)) == ()


@pytest.mark.parametrize(
    "src, dst, step",
    [
        (S(0), R, Step("all_gather", S(0), R)),
        (S(1), I, Step("all_gather", S(1), I)),
        (P, R, Step("all_reduce", P, R)),
        (P, I, Step("all_reduce", P, I)),
        (P, S(0), Step("reduce_scatter", P, S(0))),
        (S(0), S(1), Step("all_to_all", S(0), S(1))),
        (R, S(1), Step("convert", R, S(1))),
        (V, R, Step("all_gather", V, R)),
    ],
)
def test_redistribute_routes(src, dst, step) -> None:
    assert plan("redistribute", src, dst) == (step,)


@pytest.mark.parametrize(
    "op, src, dst, hint",
    [
        ("all_gather", P, R, "spmd.all_reduce(x, 'tp', src=P, dst=R)"),
        ("all_gather", P, S(0), "spmd.reduce_scatter(x, 'tp', src=P, dst=S(0))"),
        ("reduce_scatter", P, R, "spmd.all_reduce(x, 'tp', src=P, dst=R)"),
        ("convert", P, R, "spmd.all_reduce(x, 'tp', src=P, dst=R)"),
        ("convert", P, V, "spmd.reduce_scatter(x, 'tp', src=P, dst=V)"),
        ("all_reduce", V, R, "spmd.reinterpret(x, 'tp', src=V, dst=P)"),
        ("all_reduce", R, R, "multiplies it by the axis size"),
        ("convert", V, R, "spmd.all_gather(x, 'tp', src=V, dst=R)"),
        ("all_to_all", V, S(0), "all_to_all takes V->V, S(i)->S(j)"),
        ("reinterpret", R, S(0), "does not take S(i)"),
        ("redistribute", V, S(0), "no value-preserving way"),
    ],
)
def test_rejections_name_axis_types_and_fix(op, src, dst, hint) -> None:
    with pytest.raises(CollectiveError) as e:
        plan(op, src, dst, axis="tp")
    msg = str(e.value)
    assert f"spmd.{op}" in msg and "'tp'" in msg
    assert str(src) in msg and str(dst) in msg
    assert hint in msg


def test_bad_type_arguments_are_rejected() -> None:
    with pytest.raises(CollectiveError, match="not a local SPMD type"):
        plan("all_reduce", "P", R)  # type: ignore[arg-type]
    with pytest.raises(CollectiveError, match="unknown SPMD operation"):
        plan("broadcast", R, R)


def test_signature_texts() -> None:
    assert signature_text("all_gather") == "all_gather takes src V or S(i) and dst R or I"
    assert signature_text("reduce_scatter") == "reduce_scatter takes src P and dst V or S(i)"
    assert "V->R" not in signature_text("convert")
