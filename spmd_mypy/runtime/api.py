"""The typed collectives and coercions users call.

Each function validates its src/dst against the vocabulary's table and the
tensor's shape (S dims in range, split sizes consistent with the axis size),
raising CollectiveError before any communication, then runs the primitive
steps through the autograd Function.  Types are erased at runtime: the
checker, not this code, knows the input's type; src is what the caller claims.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from ..vocab.collectives import DEFAULT_SRC, REDUCE_OPS, CollectiveError, Step, plan
from ..vocab.localtype import AxisType, Shard, kind
from ..vocab.spec import Spmd
from .autograd import apply_steps
from .kernels import needs_comm, reduce_values
from .mesh import AxisArg, Comm, DeferredComm, resolve_axis, resolve_axis_lazily
from .redistribute_spec import redistribute_spec

__all__ = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "reinterpret",
    "convert",
    "redistribute",
    "assert_spmd",
    "assert_like",
]

SplitSizes = Optional[Sequence[int]]
PairSizes = Optional[Tuple[Optional[Sequence[int]], Optional[Sequence[int]]]]

@functools.lru_cache(maxsize=1024)
def _plan(op: str, src: AxisType, dst: AxisType, label: object, expert: bool) -> Tuple[Step, ...]:
    return plan(op, src, dst, axis=label, expert_mode=expert)  # type: ignore[arg-type]


# Coercions: with an axis name and no mesh set, they run as far as their steps
# need no communicator (mesh.DeferredComm).  Collectives always communicate.
_LAZY_OPS = frozenset({"reinterpret", "convert"})


def _where(op: str, axis: object, src: object, dst: object) -> str:
    return f"spmd.{op} on axis {axis!r} (src={str(src)}, dst={str(dst)})"  # str(): see vocab.collectives._call_text


def _fail(op: str, comm: Comm, src: AxisType, dst: AxisType, why: str) -> CollectiveError:
    return CollectiveError(f"{_where(op, comm.label, src, dst)}: {why}")


def _norm(op: str, comm: Comm, src: AxisType, dst: AxisType, x: Tensor) -> Tuple[AxisType, AxisType]:
    """src and dst with S dims resolved against x's rank (both keep the rank)."""
    out = []
    for name, t in (("src", src), ("dst", dst)):
        if isinstance(t, Shard):
            if not -x.ndim <= t.dim < x.ndim:
                raise _fail(
                    op, comm, src, dst,
                    f"{name}=S({t.dim}) is out of range for a tensor of rank {x.ndim} "
                    f"(shape {tuple(x.shape)})",
                )
            if t.dim < 0:
                t = Shard(t.dim + x.ndim)
        out.append(t)
    return out[0], out[1]


def _check_sizes(
    op: str, comm: Comm, src: AxisType, dst: AxisType, sizes: Sequence[int], what: str
) -> list[int]:
    sizes = list(sizes)
    if len(sizes) != comm.size or any(
        isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in sizes
    ):
        raise _fail(
            op, comm, src, dst,
            f"{what} must be {comm.size} non-negative ints (one per rank of the axis), got {sizes}",
        )
    return sizes


def _even_or_sizes(
    op: str, comm: Comm, src: AxisType, dst: AxisType, length: int, dim: int, sizes: SplitSizes
) -> Optional[list[int]]:
    """Check the split of a full dim of `length` over the axis; None = even."""
    if sizes is None:
        if length % comm.size:
            raise _fail(
                op, comm, src, dst,
                f"dim {dim} has size {length}, not divisible by the axis size {comm.size}; "
                f"pass split_sizes=[...] (one size per rank) for an uneven split",
            )
        return None
    checked = _check_sizes(op, comm, src, dst, sizes, "split_sizes")
    if sum(checked) != length:
        raise _fail(
            op, comm, src, dst,
            f"split_sizes {checked} sum to {sum(checked)}, but dim {dim} has size {length}",
        )
    return checked


def _stack_dim(op: str, comm: Comm, src: AxisType, dst: AxisType, x: Tensor) -> None:
    if x.ndim == 0 or x.shape[0] != comm.size:
        raise _fail(
            op, comm, src, dst,
            f"dim 0 indexes the ranks of the axis, so it must have size {comm.size}; "
            f"got shape {tuple(x.shape)} (use S(i) to split a dim instead)",
        )


def _sizes_for(
    op: str, steps: Tuple[Step, ...], comm: Comm, x: Tensor, split_sizes: object
) -> object:
    """Validate shapes and split sizes for the primitive steps; return kernel sizes."""
    step = steps[0]
    src, dst = step.src, step.dst
    key = (step.op, kind(src), kind(dst))
    if key[0] == "all_to_all":
        return _a2a_sizes(comm, step, x, split_sizes)
    if split_sizes is not None and "S" not in key[1:]:
        raise _fail(op, comm, src, dst, "split_sizes applies only to an S(i) src or dst")
    if key in (("reduce_scatter", "P", "V"), ("convert", "R", "V"), ("convert", "I", "V")):
        _stack_dim(op, comm, src, dst, x)
    elif key in (("reduce_scatter", "P", "S"), ("convert", "R", "S"), ("convert", "I", "S")):
        d = dst.dim  # type: ignore[union-attr]
        return _even_or_sizes(op, comm, src, dst, x.shape[d], d, split_sizes)  # type: ignore[arg-type]
    elif key[1] == "S" and split_sizes is not None:  # all_gather(S), convert(S, P)
        return _check_sizes(op, comm, src, dst, split_sizes, "split_sizes")  # type: ignore[arg-type]
    return None


def _is_sizes(v: object) -> bool:
    return v is None or (
        isinstance(v, (list, tuple)) and all(isinstance(k, int) and not isinstance(k, bool) for k in v)
    )


def _a2a_sizes(comm: Comm, step: Step, x: Tensor, split_sizes: object) -> object:
    src, dst = step.src, step.dst
    if split_sizes is None:
        a, b = None, None
    elif (
        isinstance(split_sizes, (tuple, list))
        and len(split_sizes) == 2
        and all(_is_sizes(v) for v in split_sizes)
    ):
        a, b = split_sizes
    else:
        raise _fail(
            "all_to_all", comm, src, dst,
            f"split_sizes is a pair (src sizes, dst sizes), each a list of ints or None; "
            f"got {split_sizes!r}",
        )
    if isinstance(dst, Shard):
        a = None if a is None else _check_sizes("all_to_all", comm, src, dst, a, "src sizes")
        if dst == src:  # re-splitting one dim: its full size is the sum over ranks
            full = sum(a) if a is not None else x.shape[dst.dim] * comm.size
        else:
            full = x.shape[dst.dim]
        b = _even_or_sizes("all_to_all", comm, src, dst, full, dst.dim, b)
        return None if a is None and b is None else (a, b)
    if a is None and b is None:
        if x.ndim == 0 or x.shape[0] % comm.size:
            raise _fail(
                "all_to_all", comm, src, dst,
                f"dim 0 is split evenly over the {comm.size} ranks, so its size must be a "
                f"multiple of {comm.size}; got shape {tuple(x.shape)} "
                f"(pass split_sizes=(input splits, output splits) for uneven splits)",
            )
        return None
    if a is None or b is None:
        raise _fail(
            "all_to_all", comm, src, dst,
            "V->V with split_sizes needs both lists: (rows sent to each rank, rows received from each rank)",
        )
    a = _check_sizes("all_to_all", comm, src, dst, a, "input splits")
    b = _check_sizes("all_to_all", comm, src, dst, b, "output splits")
    if sum(a) != x.shape[0]:
        raise _fail(
            "all_to_all", comm, src, dst,
            f"input splits {a} sum to {sum(a)}, but dim 0 has size {x.shape[0]}",
        )
    return (a, b)


def _run(
    op: str,
    x: Tensor,
    axis: AxisArg,
    src: AxisType,
    dst: AxisType,
    *,
    expert_mode: bool = False,
    split_sizes: object = None,
) -> Tensor:
    try:
        if op in _LAZY_OPS:  # no mesh is needed until a step needs the communicator
            comm = resolve_axis_lazily(axis, _where(op, axis, src, dst))
        else:
            comm = resolve_axis(axis)
    except CollectiveError as e:
        raise CollectiveError(f"{_where(op, axis, src, dst)}: {str(e)}") from None
    src, dst = _norm(op, comm, src, dst, x)
    if torch.compiler.is_compiling():  # Dynamo traces the plan itself, not the cache
        steps = plan(op, src, dst, axis=comm.label, expert_mode=expert_mode)
    else:
        steps = _plan(op, src, dst, comm.label, expert_mode)
    if not steps:
        return x
    if isinstance(comm, DeferredComm) and any(needs_comm(s) for s in steps):
        comm.resolved()  # the forward needs it: fail before the autograd Function
    sizes = _sizes_for(op, steps, comm, x, split_sizes)
    return apply_steps(x, steps, comm, sizes)  # type: ignore[arg-type]


# -- public functions ------------------------------------------------------------


def all_reduce(
    x: Tensor, axis: AxisArg, *, src: AxisType = DEFAULT_SRC["all_reduce"], dst: AxisType, op: str = "sum"
) -> Tensor:
    """Sum a Partial value over the axis: P -> R (backward all_reduce) or P -> I.

    op="max" / "min": the elementwise max / min over the ranks instead, for
    values without gradient (a logits max); raises CollectiveError when a
    gradient would be recorded (x.requires_grad with grad mode on).
    """
    if op == "sum":
        return _run("all_reduce", x, axis, src, dst)
    return _reduce_no_grad(op, x, axis, src, dst)


def _reduce_no_grad(op: str, x: Tensor, axis: AxisArg, src: AxisType, dst: AxisType) -> Tensor:
    where = f"spmd.all_reduce on axis {axis!r} (src={str(src)}, dst={str(dst)}, op={op!r})"
    if op not in REDUCE_OPS:
        raise CollectiveError(f"{where}: op is one of {sorted(REDUCE_OPS)}")
    if x.requires_grad and torch.is_grad_enabled():
        raise CollectiveError(
            f"{where}: op={op!r} has no gradient, but x requires grad; reduce a detached "
            f"value (x.detach()) or run it under torch.no_grad()"
        )
    try:
        comm = resolve_axis(axis)
    except CollectiveError as e:
        raise CollectiveError(f"{where}: {str(e)}") from None
    plan("all_reduce", src, dst, axis=comm.label)  # the same src/dst as the sum
    return reduce_values(x, comm, op)


def all_gather(
    x: Tensor, axis: AxisArg, *, src: AxisType, dst: AxisType, split_sizes: SplitSizes = None
) -> Tensor:
    """Gather the axis: src V stacks (new dim 0), src S(i) concatenates dim i; dst R or I.

    split_sizes: each rank's size along dim i, for uneven shards.
    """
    return _run("all_gather", x, axis, src, dst, split_sizes=split_sizes)


def reduce_scatter(
    x: Tensor, axis: AxisArg, *, src: AxisType = DEFAULT_SRC["reduce_scatter"], dst: AxisType, split_sizes: SplitSizes = None
) -> Tensor:
    """Sum a Partial value and keep this rank's piece: dst V unbinds dim 0, S(i) splits dim i.

    split_sizes: each rank's size along dim i of the result, for uneven shards.
    """
    return _run("reduce_scatter", x, axis, src, dst, split_sizes=split_sizes)


def all_to_all(
    x: Tensor, axis: AxisArg, *, src: AxisType, dst: AxisType, split_sizes: PairSizes = None
) -> Tensor:
    """V -> V: transpose the axis with dim 0.  S(i) -> S(j): unshard dim i, shard dim j.

    split_sizes: a pair (src sizes, dst sizes).  For S(i) -> S(j): each rank's
    size along dim i, and along dim j of the result (either None if even).
    For V -> V: rows this rank sends to each rank, and receives from each rank.
    """
    return _run("all_to_all", x, axis, src, dst, split_sizes=split_sizes)


def reinterpret(
    x: Tensor, axis: AxisArg, *, src: AxisType, dst: AxisType, expert_mode: bool = False
) -> Tensor:
    """Change the type without touching the local tensor (may change the value)."""
    return _run("reinterpret", x, axis, src, dst, expert_mode=expert_mode)


def convert(
    x: Tensor,
    axis: AxisArg,
    *,
    src: AxisType,
    dst: AxisType,
    expert_mode: bool = False,
    split_sizes: SplitSizes = None,
) -> Tensor:
    """Change the type keeping the value, without communication."""
    return _run("convert", x, axis, src, dst, expert_mode=expert_mode, split_sizes=split_sizes)


def redistribute(
    x: Tensor,
    axis: Optional[AxisArg] = None,
    *,
    src: Union[AxisType, Spmd],
    dst: Union[AxisType, Spmd],
    expert_mode: bool = False,
    split_sizes: Union[SplitSizes, PairSizes] = None,
) -> Tensor:
    """Change the type keeping the value, communicating if needed.

    Per axis:      redistribute(x, "tp", src=P, dst=S(0)) -- the collective or
                   convert of the design's routing table, on one axis.
    Global types:  redistribute(x, src=Spmd(spec=...), dst=Spmd(spec=...)) --
                   no axis; the planner (spmd.plan_redistribute) picks the
                   collectives over the current mesh, flattening axes.
    """
    if axis is None and isinstance(src, Spmd) and isinstance(dst, Spmd):
        if expert_mode or split_sizes is not None:
            raise CollectiveError(
                "spmd.redistribute with Spmd src/dst takes neither expert_mode nor split_sizes "
                "(the spec form plans even shards of value-preserving moves)"
            )
        return redistribute_spec(x, src, dst)
    if isinstance(src, Spmd) or isinstance(dst, Spmd) or axis is None:
        raise CollectiveError(
            f"spmd.redistribute takes either an axis and per-axis types "
            f"(redistribute(x, 'tp', src=P, dst=R)) or no axis and two Spmd types "
            f"(redistribute(x, src=Spmd(...), dst=Spmd(...))); got axis={axis!r}, src={repr(src)}, dst={repr(dst)}"
        )
    return _run("redistribute", x, axis, src, dst, expert_mode=expert_mode, split_sizes=split_sizes)


def assert_spmd(x: Tensor, spmd: Spmd) -> Tensor:
    """Statically: x has this SPMD type from here on (the checker flags a contradiction).

    At runtime returns x unchanged.  The way to type a plain tensor at an
    entry point: a fresh parameter, a batch from a data loader.
    """
    return x


def assert_like(x: Tensor, like: Tensor) -> Tensor:
    """Statically: x's layout follows the same configuration as `like`.

    For a value whose declared type is a Union of layouts chosen by a flag
    (a module's output), inside a function whose layout is a type variable
    with values: x is narrowed to the alternatives that fit `like`'s type.
    At runtime returns x unchanged.
    """
    return x


def reveal_comms(fn: Callable[..., Any]) -> None:
    """Statically: a note listing the collectives fn's types imply in forward and
    backward, with the bytes each moves (the communication report of
    `python -m spmd_mypy.comms`, for one function).  Does nothing at runtime."""
    return None
