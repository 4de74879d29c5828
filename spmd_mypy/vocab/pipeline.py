"""Pipeline stages: point-to-point sends and receives between neighbouring
stages of a pipeline axis, as data (no torch, no mypy).

    ACT: Final = Spmd(tp=S(0))                        # the boundary type, shared
    h = spmd.recv_prev((b, s, d), "pp", spmd=ACT)     # stage k+1: h is pp=V, tp=S(0)
    spmd.send_next(y, "pp", spmd=ACT).backward()      # stage k: y must be tp=S(0)

On the pipeline axis every stage holds its own value (V).  On every other
axis the received value has the boundary type the call declares (`spmd=`),
and a send is checked against the same declaration: the value sent must fit
it, since the receiving stage computes on it as that type and, in backward,
returns the gradient of that type.  Each op is a row: the stage offset it
talks to in forward, whether it sends or receives, and the op on the other
stage it pairs with.  The backward of each op is its partner's direction
for the gradient: sending activations forward receives their gradient from
the next stage; receiving them sends their gradient back.
"""

from __future__ import annotations

from typing import Dict, Final, List, NamedTuple, Optional, Tuple

from .collectives import Step, fix_call, mismatch_consequence
from .localtype import P, V, AxisType, grad_type, local_kind
from .spec import Spmd, mismatches

__all__ = [
    "P2POp",
    "P2P_OPS",
    "received_type",
    "handle_type",
    "boundary_problems",
    "boundary_axis_problem",
    "SendProblem",
    "send_message",
    "backward_text",
    "p2p_step",
]


class P2POp(NamedTuple):
    """One point-to-point op between stages of a pipeline axis."""

    name: str
    sends: bool  # True: the op sends its tensor; False: it receives one
    offset: int  # the stage it talks to in forward: +1 the next, -1 the previous
    partner: str  # the op the other stage runs for the same message

    @property
    def peer(self) -> str:
        return "next" if self.offset > 0 else "previous"


P2P_OPS: Final[Dict[str, P2POp]] = {
    op.name: op
    for op in (
        P2POp("send_next", True, +1, "recv_prev"),  # activations forward (Megatron's send_forward)
        P2POp("recv_prev", False, -1, "send_next"),  # Megatron's recv_forward
        P2POp("send_prev", True, -1, "recv_next"),  # a value flowing toward earlier stages
        P2POp("recv_next", False, +1, "send_prev"),
    )
}
"""Each op, by name: its direction and its partner."""


def p2p_step(name: str, in_backward: bool) -> Step:
    """The message an op sends or receives in forward, or in backward (the
    message back: send_next's backward receives from the next stage, as
    `recv_next` would; recv_prev's sends to the previous one).  Steps of the
    communication report; the value is V on the pipeline axis throughout."""
    op = P2P_OPS[name]
    sends = op.sends != in_backward
    return Step(("send_" if sends else "recv_") + ("next" if op.offset > 0 else "prev"), V, V)


def backward_text(op: P2POp) -> str:
    """What the op's backward does (the autograd of the runtime)."""
    if op.sends:
        return f"receives the gradient of the value sent from the {op.peer} stage"
    return f"sends the gradient of the value received back to the {op.peer} stage"


def boundary_axis_problem(boundary: Spmd, axis: str) -> Optional[AxisType]:
    """The boundary's type on the pipeline axis when it is not V (each stage's
    own value): such a boundary cannot be declared."""
    got = boundary.axes.get(axis)
    return None if got is None or local_kind(got) == "V" else got


def received_type(boundary: Spmd, axis: str, nograd: bool = False) -> Spmd:
    """The type of a received value: the boundary's axes, V on the pipeline axis
    (`nograd`: received with requires_grad=False)."""
    axes: Dict[str, AxisType] = dict(boundary.axes)
    axes[axis] = V
    return Spmd.of(axes, boundary.spec, nograd, boundary.rest if boundary.spec is None else None)


def handle_type(axis: str) -> Spmd:
    """The type of what a send returns: a zero-dim zero whose backward runs the
    sender's half of backward.  It is the sending stage's addend of the
    pipeline's loss (the last stage's addend is its loss, reinterpreted V -> P
    over the pipeline axis; every other stage's is this zero), so it is P on
    the pipeline axis and `done.backward()` seeds the right gradient."""
    return Spmd.of({axis: P})


def boundary_problems(actual: Spmd, boundary: Spmd, axis: str) -> List[Tuple[str, AxisType, AxisType]]:
    """Axes where a value of type `actual` does not fit the boundary type of a
    send over the pipeline axis `axis` (V there): (axis, found, declared)."""
    expected: Dict[str, AxisType] = dict(boundary.axes)
    expected[axis] = V
    return mismatches(actual, Spmd.of(expected, boundary.spec, False, None))


class SendProblem(NamedTuple):
    op: P2POp
    pipeline_axis: str
    axis: str
    value: str  # the value sent, as written
    found: AxisType
    declared: AxisType
    boundary: str  # the boundary type as written (a Final name, or Spmd(...))


def send_message(p: SendProblem) -> str:
    """The error of a send whose value does not fit the declared boundary type:
    the axis, both types, the forward and backward consequences, the fix."""
    on_pp = p.axis == p.pipeline_axis
    declared = "every stage holds its own value (V)" if on_pp else f"the boundary type {p.boundary} declares {p.declared}"
    text = (
        f"spmd.{p.op.name} over {p.pipeline_axis!r} on axis {p.axis!r}: {p.value} is {p.found} there, but {declared}; "
        f"the {p.op.peer} stage computes on it as {p.declared}: "
        f"{mismatch_consequence(p.found, p.declared, p.axis)}; in backward the {p.op.peer} stage returns "
        f"its gradient as {grad_type(p.declared)} where {p.value}'s gradient is {grad_type(p.found)}"
    )
    if on_pp:  # a stage's own copy of a replicated value: keep the local tensor, its gradient pending (P)
        fix = f"spmd.reinterpret({p.value}, {p.axis!r}, src=R, dst=V, expert_mode=True)" if str(p.found) == "R" else None
    else:
        fix = fix_call(p.found, p.declared, p.axis, p.value)
    if fix is not None:
        if all(part.isidentifier() for part in p.value.split(".")):
            return text + f". Hint: {p.value} = {fix} before the send"
        return text + f". Hint: send {fix}"
    if on_pp:
        return text
    return text + f". Hint: make {p.value} {p.declared} on {p.axis!r} first, or declare the boundary {p.found} there"
