"""Point-to-point sends and receives between pipeline stages, with autograd
(vocab/pipeline.py has the rows and the typing).

    Hidden = Annotated[Tensor, Spmd(tp=S(0))]      # the boundary type, shared
    # stage k (not the last)
    y = stage_forward(x)
    done = spmd.send_next(y, "pp", spmd=Hidden)   # y to stage k+1
    ...
    done.backward()                                # receives y's gradient from stage k+1
    # stage k+1 (not the first)
    h = spmd.recv_prev((b, s, d), "pp", spmd=Hidden)  # requires grad; pp=V, tp=S(0)
    loss = stage_forward(h)
    loss.backward()                               # sends h's gradient to stage k

Every op is an autograd Function, so the backward of each message is the
message back: a send's backward receives the gradient of the value sent
from the stage it went to, a receive's backward sends the gradient of the
value received to the stage it came from.  A send returns a zero-dim tensor
(`done`) whose backward runs the sender's half of backward; run it where the
schedule runs that stage's backward (1F1B, GPipe: the same order on both
stages, as with Megatron's send_backward / recv_backward).  A receive
waits for its message (`dist.recv`); a send does not wait for the receiver
(`dist.isend`, so the sends of a 1F1B schedule's steady state, forward and
backward at once, cannot wait on each other); `wait_sends()` waits for
them.  Types are
erased at runtime (`spmd=` is for the checker; the runtime only checks it
names an Spmd).
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from ..vocab.collectives import CollectiveError
from ..vocab.pipeline import P2P_OPS, P2POp
from ..vocab.spec import Spmd
from .mesh import AxisArg, Comm, resolve_axis

__all__ = ["send_next", "send_prev", "recv_prev", "recv_next", "wait_sends", "Boundary"]

# The boundary type: an Spmd(...), or a type alias Annotated[Tensor, Spmd(...)]
# (the one the stage functions' signatures use).  `object` to mypy, which has
# no type for "an Annotated alias"; the plugin reads the argument statically.
Boundary = object


def _peer(op: P2POp, axis: AxisArg) -> Tuple[Comm, int]:
    """The axis's communicator and the global rank of the stage `op` talks to."""
    comm = resolve_axis(axis)
    stage = comm.coord() + op.offset
    if not 0 <= stage < comm.size:
        raise CollectiveError(
            f"spmd.{op.name} on axis {comm.label!r}: stage {comm.coord()} of {comm.size} has no "
            f"{op.peer} stage (the pipeline is not a ring); guard the call with the stage's position"
        )
    return comm, dist.get_global_rank(comm.group, stage)


# Sends in flight, each with its buffer (kept alive until delivered).  A send
# does not wait for the receiver: in a 1F1B schedule stage k sends microbatch
# i+1 forward while stage k+1 sends microbatch i's gradient back, and two
# blocking sends facing each other would wait forever (gloo's send waits for
# the matching receive).  Messages between two ranks arrive in order.
_IN_FLIGHT: List[Tuple[Any, Tensor]] = []


def _send(t: Tensor, comm: Comm, peer: int) -> None:
    buf = t.detach().contiguous()
    _IN_FLIGHT.append((dist.isend(buf, peer, group=comm.group), buf))
    still = []
    for work, kept in _IN_FLIGHT:
        if work.is_completed():
            work.wait()  # returns at once, or raises the send's error
        else:
            still.append((work, kept))
    _IN_FLIGHT[:] = still


def wait_sends() -> None:
    """Wait until every send of this rank has been received (before changing a
    sent tensor in place, or at the end of a step)."""
    while _IN_FLIGHT:
        work, _ = _IN_FLIGHT.pop(0)
        work.wait()


def _recv(shape: Sequence[int], dtype: torch.dtype, device: Any, comm: Comm, peer: int) -> Tensor:
    buf = torch.empty(tuple(shape), dtype=dtype, device=device)
    dist.recv(buf, peer, group=comm.group)
    return buf


class _Send(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, comm: Comm, peer: int) -> Tensor:
        ctx.comm, ctx.peer, ctx.shape, ctx.dtype, ctx.device = comm, peer, x.shape, x.dtype, x.device
        _send(x, comm, peer)
        return x.new_zeros(())

    @staticmethod
    def backward(ctx: Any, _done: Tensor) -> Tuple[Optional[Tensor], None, None]:
        return _recv(ctx.shape, ctx.dtype, ctx.device, ctx.comm, ctx.peer), None, None


class _Recv(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, anchor: Tensor, shape: Sequence[int], dtype: torch.dtype, comm: Comm, peer: int) -> Tensor:
        ctx.comm, ctx.peer = comm, peer
        return _recv(shape, dtype, anchor.device, comm, peer)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[None, ...]:
        _send(grad, ctx.comm, ctx.peer)
        return None, None, None, None, None


def _check_spmd(op: P2POp, spmd: Optional[Boundary]) -> None:
    """spmd= is an Spmd or an alias Annotated[Tensor, Spmd(...)] (the type is the
    checker's); a receive may leave it out when its target is annotated."""
    if spmd is None and not op.sends:
        return
    found = [spmd] if isinstance(spmd, Spmd) else [m for m in getattr(spmd, "__metadata__", ()) if isinstance(m, Spmd)]
    if not found:
        raise CollectiveError(
            f"spmd.{op.name}: spmd= is the boundary type, an Spmd(...) or an alias "
            f"Annotated[Tensor, Spmd(...)], not {spmd!r}"
        )


def _sent(op: P2POp, x: Tensor, axis: AxisArg, spmd: Boundary) -> Tensor:
    _check_spmd(op, spmd)
    comm, peer = _peer(op, axis)
    if x.requires_grad and torch.is_grad_enabled():
        return _Send.apply(x, comm, peer)
    _send(x, comm, peer)
    return x.new_zeros(())


def _received(
    op: P2POp,
    shape: Sequence[int],
    axis: AxisArg,
    spmd: Optional[Boundary],
    dtype: torch.dtype,
    device: Any,
    requires_grad: bool,
) -> Tensor:
    _check_spmd(op, spmd)
    comm, peer = _peer(op, axis)
    if not (requires_grad and torch.is_grad_enabled()):
        return _recv(shape, dtype, device, comm, peer)
    anchor = torch.empty(0, device=device, requires_grad=True)  # gives the received value a backward node
    return _Recv.apply(anchor, tuple(shape), dtype, comm, peer)


def send_next(x: Tensor, axis: AxisArg, *, spmd: Boundary) -> Tensor:
    """Send x to the next stage of the pipeline axis (Megatron's send_forward).

    `spmd` is the boundary type the next stage's recv_prev declares (the
    checker checks x against it).  Returns a zero-dim tensor whose backward
    receives x's gradient from the next stage and carries it into x's graph.
    """
    return _sent(P2P_OPS["send_next"], x, axis, spmd)


def send_prev(x: Tensor, axis: AxisArg, *, spmd: Boundary) -> Tensor:
    """Send x to the previous stage (a value flowing toward earlier stages);
    the returned tensor's backward receives x's gradient from that stage."""
    return _sent(P2P_OPS["send_prev"], x, axis, spmd)


def recv_prev(
    shape: Sequence[int],
    axis: AxisArg,
    *,
    spmd: Optional[Boundary] = None,
    dtype: torch.dtype = torch.float32,
    device: Any = None,
    requires_grad: bool = True,
) -> Tensor:
    """Receive the previous stage's send_next (Megatron's recv_forward): a tensor
    of `shape` of the boundary type `spmd` (V on the pipeline axis); without
    spmd=, the annotation of the target declares it (`h: Hidden = ...`).  Its
    backward sends the gradient back to the previous stage."""
    return _received(P2P_OPS["recv_prev"], shape, axis, spmd, dtype, device, requires_grad)


def recv_next(
    shape: Sequence[int],
    axis: AxisArg,
    *,
    spmd: Optional[Boundary] = None,
    dtype: torch.dtype = torch.float32,
    device: Any = None,
    requires_grad: bool = True,
) -> Tensor:
    """Receive the next stage's send_prev; its backward sends the gradient back there."""
    return _received(P2P_OPS["recv_next"], shape, axis, spmd, dtype, device, requires_grad)
