"""The pipeline rows (vocab/pipeline.py): directions and partners, the received
type, the handle's type, the boundary check and its message, the report's steps."""

from __future__ import annotations

import pytest

from spmd_mypy import I, P, R, S, Spmd, V
from spmd_mypy.vocab.pipeline import (
    P2P_OPS,
    SendProblem,
    boundary_axis_problem,
    boundary_problems,
    handle_type,
    p2p_step,
    received_type,
    send_message,
)


def test_each_op_pairs_with_the_op_on_the_other_stage() -> None:
    for name, op in P2P_OPS.items():
        partner = P2P_OPS[op.partner]
        assert partner.partner == name
        assert partner.sends != op.sends
        assert partner.offset == -op.offset  # the same message, seen from the other stage


@pytest.mark.parametrize(
    "name, forward, backward",
    [
        ("send_next", "send_next", "recv_next"),  # activations out, their gradient back in
        ("recv_prev", "recv_prev", "send_prev"),
        ("send_prev", "send_prev", "recv_prev"),
        ("recv_next", "recv_next", "send_next"),
    ],
)
def test_backward_is_the_message_back(name: str, forward: str, backward: str) -> None:
    assert p2p_step(name, False).op == forward
    assert p2p_step(name, True).op == backward


def test_received_value_keeps_the_boundary_and_is_v_on_the_pipeline_axis() -> None:
    got = received_type(Spmd(dp=S(0), tp=I), "pp")
    assert (got.axis_type("pp"), got.axis_type("dp"), got.axis_type("tp")) == (V, S(0), I)
    assert not got.nograd and received_type(Spmd(tp=I), "pp", nograd=True).nograd
    assert handle_type("pp").axis_type("pp") == P


def test_boundary_check_per_axis() -> None:
    boundary = Spmd(tp=I)
    assert boundary_problems(Spmd(tp=I, pp=V), boundary, "pp") == []
    assert boundary_problems(Spmd(tp=P), boundary, "pp") == [("tp", P, I)]
    assert boundary_problems(Spmd(tp=S(0), pp=V), boundary, "pp") == [("tp", S(0), I)]
    assert boundary_problems(Spmd(tp=I, pp=R), boundary, "pp") == [("pp", R, V)]
    assert boundary_problems(Spmd(dp=V), boundary, "pp") == []  # tp unknown: gradual
    assert boundary_axis_problem(Spmd(pp=R, tp=I), "pp") == R
    assert boundary_axis_problem(Spmd(pp=V, tp=I), "pp") is None
    assert boundary_axis_problem(Spmd(tp=I), "pp") is None


def test_message_names_axis_types_backward_and_fix() -> None:
    text = send_message(SendProblem(P2P_OPS["send_next"], "pp", "tp", "y", P, I, "Hidden"))
    assert "on axis 'tp': y is P there, but the boundary type Hidden declares I" in text
    assert "in backward the next stage returns its gradient as I where y's gradient is R" in text
    assert text.endswith("Hint: y = spmd.all_reduce(y, 'tp', src=P, dst=I) before the send")
    on_pp = send_message(SendProblem(P2P_OPS["send_next"], "pp", "pp", "y", R, V, "Hidden"))
    assert on_pp.endswith("Hint: y = spmd.reinterpret(y, 'pp', src=R, dst=V, expert_mode=True) before the send")
