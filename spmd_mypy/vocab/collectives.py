"""Signatures of every collective and coercion, as data.

Each primitive is keyed by (op, src kind, dst kind), where a kind is a letter
R, I, V, P or S (for S(i)).  Its row gives the backward primitive, following
the design's forward/backward table; the backward of a backward is the
forward, which `test_vocab` checks.  In a backward row, "src"/"dst" stand for
the forward's own S(i) argument, so all_gather(S(2), R) has backward
reduce_scatter(P, S(2)).

`plan(op, src, dst, ...)` validates a call and expands it into primitive
steps (composites such as reinterpret(I, V) = reinterpret(I, R) then
reinterpret(R, V); redistribute routed to the collective or convert that
preserves the value).  `backward(steps)` gives the steps of the backward pass.
The runtime executes these steps; the mypy plugin reads the same table to
type the calls.  Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import Final, NamedTuple, Sequence, Tuple, Union

from .localtype import BY_LETTER, AxisType, I, P, PartitionedShard, R, Shard, V, grad_type, kind
from .partitioned import boundary_consequence, boundary_fix

__all__ = [
    "Step",
    "CollectiveError",
    "COMM_OPS",
    "PUBLIC_OPS",
    "DEFAULT_SRC",
    "EXPERT_ONLY",
    "plan",
    "backward",
    "signature_text",
    "REDUCE_OPS",
]

COMM_OPS: Final = frozenset({"all_gather", "all_reduce", "reduce_scatter", "all_to_all"})
PUBLIC_OPS: Final = COMM_OPS | {"reinterpret", "convert", "redistribute"}
# src= where a call leaves it out: a reduction reduces a P value.
DEFAULT_SRC: Final[dict[str, AxisType]] = {"all_reduce": P, "reduce_scatter": P}


class Step(NamedTuple):
    """One primitive on one axis (or one flattened group of axes)."""

    op: str
    src: AxisType
    dst: AxisType

    def __str__(self) -> str:
        return f"{self.op}({self.src}->{self.dst})"


class _Row(NamedTuple):
    back_op: str
    back_src: str  # a kind letter, or "src"/"dst" to reuse the forward's S(i)
    back_dst: str
    expert: bool = False
    why: str = ""  # what the coercion does that makes it expert-only


# (op, src kind, dst kind) -> row.  Straight from the design's tables.
_PRIMITIVES: Final[dict[Tuple[str, str, str], _Row]] = {
    ("all_gather", "V", "R"): _Row("reduce_scatter", "P", "V"),
    ("all_gather", "V", "I"): _Row("convert", "I", "V"),
    ("all_gather", "S", "R"): _Row("reduce_scatter", "P", "src"),
    ("all_gather", "S", "I"): _Row("convert", "I", "src"),
    ("all_reduce", "P", "R"): _Row("all_reduce", "P", "R"),
    ("all_reduce", "P", "I"): _Row("reinterpret", "I", "R"),
    ("reduce_scatter", "P", "V"): _Row("all_gather", "V", "R"),
    ("reduce_scatter", "P", "S"): _Row("all_gather", "dst", "R"),
    ("all_to_all", "V", "V"): _Row("all_to_all", "V", "V"),
    ("all_to_all", "S", "S"): _Row("all_to_all", "dst", "src"),
    ("reinterpret", "R", "I"): _Row(
        "convert", "I", "P", True, "its backward keeps only rank 0's gradient"
    ),
    ("reinterpret", "R", "V"): _Row(
        "reinterpret", "V", "P", True, "its backward sums the ranks' gradients"
    ),
    ("reinterpret", "R", "P"): _Row(
        "reinterpret", "R", "P", True, "it multiplies the value by the axis size"
    ),
    ("reinterpret", "I", "R"): _Row("all_reduce", "P", "I"),
    ("reinterpret", "V", "P"): _Row("reinterpret", "R", "V"),
    ("convert", "R", "V"): _Row("convert", "V", "P"),
    ("convert", "R", "S"): _Row("convert", "dst", "P"),
    ("convert", "I", "V"): _Row("all_gather", "V", "I"),
    ("convert", "I", "S"): _Row("all_gather", "dst", "I"),
    ("convert", "R", "P"): _Row("convert", "R", "P"),
    ("convert", "I", "P"): _Row(
        "reinterpret", "R", "I", True, "its backward turns a replicated gradient invariant unsummed"
    ),
    ("convert", "V", "P"): _Row(
        "convert", "R", "V", True, "it grows the tensor by a leading dim of the axis size"
    ),
    ("convert", "S", "P"): _Row(
        "convert", "R", "src", True, "it pads each shard with zeros to the full size"
    ),
}

# Coercions defined as a sequence of primitives.
_COMPOSITES: Final[dict[Tuple[str, str, str], Tuple[Tuple[str, str, str], ...]]] = {
    ("reinterpret", "I", "V"): (("reinterpret", "I", "R"), ("reinterpret", "R", "V")),
    ("reinterpret", "I", "P"): (("reinterpret", "I", "R"), ("reinterpret", "R", "P")),
    ("convert", "R", "I"): (("reinterpret", "R", "I"),),
    ("convert", "I", "R"): (("reinterpret", "I", "R"),),
}

# redistribute(src, dst): value preserving; the collective when one is needed,
# otherwise the convert that preserves the value.
_REDISTRIBUTE: Final[dict[Tuple[str, str], str]] = {
    ("S", "R"): "all_gather",
    ("S", "I"): "all_gather",
    ("V", "R"): "all_gather",
    ("V", "I"): "all_gather",
    ("P", "R"): "all_reduce",
    ("P", "I"): "all_reduce",
    ("P", "S"): "reduce_scatter",
    ("P", "V"): "reduce_scatter",
    ("S", "S"): "all_to_all",
}

EXPERT_ONLY: Final = frozenset(
    (op, s, d) for (op, s, d), row in _PRIMITIVES.items() if row.expert
) | frozenset(
    key
    for key, parts in _COMPOSITES.items()
    if any(_PRIMITIVES[p].expert for p in parts)
)

# What each public op accepts, for messages: derived from the table.
def _accepted(op: str) -> list[Tuple[str, str]]:
    return [(k[1], k[2]) for k in list(_PRIMITIVES) + list(_COMPOSITES) if k[0] == op]


def _letter(k: str) -> str:
    return "S(i)" if k == "S" else k


def signature_text(op: str) -> str:
    """E.g. "all_gather takes src V or S(i) and dst R or I"."""
    if op == "redistribute":
        return "redistribute takes any value-preserving src/dst pair"
    pairs = _accepted(op)
    order = "RIVPS"
    srcs = sorted({a for a, _ in pairs}, key=order.index)
    dsts = sorted({b for _, b in pairs}, key=order.index)
    if len(pairs) == len(srcs) * len(dsts):
        return (
            f"{op} takes src {' or '.join(map(_letter, srcs))} "
            f"and dst {' or '.join(map(_letter, dsts))}"
        )
    listed = ", ".join(
        "S(i)->S(j)" if a == b == "S" else f"{_letter(a)}->{_letter(b)}" for a, b in pairs
    )
    return f"{op} takes {listed}"


class CollectiveError(TypeError):
    """An invalid src/dst for a collective or coercion, found before any communication."""


AxisLabel = Union[str, Tuple[str, ...]]


def _axis_text(axis: AxisLabel) -> str:
    if isinstance(axis, tuple):
        return "axes (" + ", ".join(repr(a) for a in axis) + ")"
    return f"axis {axis!r}"


# Messages format types with an explicit str()/repr(): under torch.compile, Dynamo
# folds those into constant text, but not an f-string's implicit formatting.
def _call_text(op: str, axis: AxisLabel, src: AxisType, dst: AxisType, extra: str = "") -> str:
    return f"spmd.{op}(x, {axis!r}, src={str(src)}, dst={str(dst)}{extra})"


def _hint(op: str, axis: AxisLabel, src: AxisType, dst: AxisType) -> str:
    """The call that does what the user most likely meant."""
    sk, dk = kind(src), kind(dst)
    if sk == "P" and op in ("all_gather", "all_to_all", "convert", "reinterpret"):
        if dk in ("R", "I"):
            return "a Partial value is reduced, not gathered: " + _call_text("all_reduce", axis, P, dst)
        if dk in ("V", "S"):
            return "a Partial value is reduced, not gathered: " + _call_text(
                "reduce_scatter", axis, P, dst
            )
        return "the only way out of P is a reduction (all_reduce or reduce_scatter)"
    if op == "reduce_scatter" and dk in ("R", "I"):
        return "to keep the whole reduced tensor: " + _call_text("all_reduce", axis, P, dst)
    if op == "all_reduce" and sk in ("V", "S"):
        return (
            f"to sum the ranks' values, reinterpret them first: "
            f"{_call_text('reinterpret', axis, V, P)}, then all_reduce with src=P "
            f"(to stack or concatenate them instead: all_gather)"
        )
    if op == "all_reduce" and sk in ("R", "I"):
        return "the value is already the same on every rank; reducing it again multiplies it by the axis size"
    if op == "all_gather" and sk in ("R", "I"):
        return "the value is already whole on every rank; no gather is needed"
    if op == "convert" and sk == "V" and dk in ("R", "I"):
        return "gathering needs communication: " + _call_text("all_gather", axis, src, dst)
    return signature_text(op)


def _resolve(ref: str, fwd: Step) -> AxisType:
    if ref == "src":
        return fwd.src
    if ref == "dst":
        return fwd.dst
    return BY_LETTER[ref]


def plan(
    op: str,
    src: AxisType,
    dst: AxisType,
    *,
    axis: AxisLabel = "?",
    expert_mode: bool = False,
) -> Tuple[Step, ...]:
    """Validate op(src -> dst) and return its primitive steps, or raise CollectiveError.

    An identity coercion (src == dst for reinterpret/convert/redistribute)
    returns no steps.
    """
    if op not in PUBLIC_OPS:
        raise CollectiveError(f"unknown SPMD operation {op!r}")
    for name, t in (("src", src), ("dst", dst)):
        if not isinstance(t, Shard) and t not in (R, I, V, P):
            raise CollectiveError(
                f"spmd.{op} on {_axis_text(axis)}: {name}={repr(t)} is not a local SPMD type "
                f"(use R, I, V, P or S(dim))"
            )
    sk, dk = kind(src), kind(dst)
    if op == "redistribute":
        if src == dst:
            return ()
        routed = _REDISTRIBUTE.get((sk, dk), "convert")
        try:
            return plan(routed, src, dst, axis=axis, expert_mode=expert_mode)
        except CollectiveError as e:
            raise CollectiveError(
                f"spmd.redistribute on {_axis_text(axis)}: no value-preserving way from "
                f"{str(src)} to {str(dst)} ({str(e)})"
            ) from None
    if op in ("reinterpret", "convert") and src == dst:
        return ()
    if op == "reinterpret" and (sk == "S" or dk == "S"):
        raise CollectiveError(
            f"spmd.reinterpret on {_axis_text(axis)}: src={str(src)}, dst={str(dst)}: reinterpret does not take "
            f"S(i) (it would be the same as V); use V, or convert to keep the value"
        )
    key = (op, sk, dk)
    parts: Tuple[Tuple[str, str, str], ...]
    if key in _PRIMITIVES:
        parts = (key,)
    elif key in _COMPOSITES:
        parts = _COMPOSITES[key]
    else:
        raise CollectiveError(
            f"spmd.{op} on {_axis_text(axis)}: src={str(src)}, dst={str(dst)} is not allowed "
            f"({signature_text(op)}); hint: {_hint(op, axis, src, dst)}"
        )
    if key in EXPERT_ONLY and not expert_mode:
        why = next(_PRIMITIVES[p].why for p in parts if _PRIMITIVES[p].expert)
        raise CollectiveError(
            f"spmd.{op} on {_axis_text(axis)}: src={str(src)}, dst={str(dst)} is expert-only: {why}. "
            f"Pass expert_mode=True if that is intended"
            + (
                f", or use spmd.convert(x, {axis!r}, src={str(src)}, dst={str(dst)}) to keep the value"
                if op == "reinterpret" and ("convert", sk, dk) in _PRIMITIVES
                and ("convert", sk, dk) not in EXPERT_ONLY
                else ""
            )
        )
    steps = []
    for p_op, p_src, p_dst in parts:
        s = src if p_src == sk else _resolve(p_src, Step(op, src, dst))
        d = dst if p_dst == dk else _resolve(p_dst, Step(op, src, dst))
        steps.append(Step(p_op, s, d))
    return tuple(steps)


def backward_step(step: Step) -> Step:
    """The primitive the backward pass runs for one forward primitive."""
    row = _PRIMITIVES[(step.op, kind(step.src), kind(step.dst))]
    return Step(row.back_op, _resolve(row.back_src, step), _resolve(row.back_dst, step))


def backward(steps: Sequence[Step]) -> Tuple[Step, ...]:
    """Backward steps of a forward sequence: reversed, each mapped by the table."""
    return tuple(backward_step(s) for s in reversed(steps))


def primitive_keys() -> Tuple[Tuple[str, str, str], ...]:
    """Every primitive (op, src kind, dst kind) in the table (for tests and docs)."""
    return tuple(_PRIMITIVES)



def fix_call(got: AxisType, want: AxisType, axis: AxisLabel, name: str = "x") -> str | None:
    """The call that turns a `got` value into a `want` one, for hints; None if none fits.

    Prefers the value-preserving route (the collective or convert of
    redistribute), then a plain reinterpret; never an expert-only form.
    """
    if isinstance(got, PartitionedShard) or isinstance(want, PartitionedShard):
        return boundary_fix(got, want, str(axis), name) if got != want else None
    sk, dk = kind(got), kind(want)
    if got == want or {sk, dk} <= {"V", "S"}:
        return None
    if sk == "V" and dk in ("R", "I"):
        return None  # all_gather(V) stacks the ranks' values: a new shape, rarely the fix
    op = _REDISTRIBUTE.get((sk, dk), "convert")
    for candidate in (op, "reinterpret"):
        try:
            if plan(candidate, got, want, axis=axis):
                return f"spmd.{candidate}({name}, {axis!r}, src={got}, dst={want})"
        except CollectiveError:
            continue
    return None


def mismatch_consequence(got: AxisType, want: AxisType, axis: AxisLabel, nograd: bool = False) -> str:
    """What goes wrong when a `got` value is used where `want` is expected
    (`nograd`: the value carries no gradient, so only its forward values count)."""
    partitioned = boundary_consequence(got, want, str(axis))
    if partitioned is not None:
        return partitioned
    sk, dk = kind(got), kind(want)
    if nograd and sk in ("R", "I") and isinstance(want, Shard):
        return f"each rank holds the whole value where its shard of dim {want.dim} over {axis!r} is expected"
    if sk == "P":
        return f"the pending sum over {axis!r} was never taken, so each rank holds only its addend"
    if dk == "P":
        return f"it would be summed over {axis!r} as if it were a pending sum"
    if sk in ("V", "S"):
        return f"the ranks hold different values where one value per {axis!r} group is expected"
    if sk == "I" and dk == "R":
        return (
            f"the gradient of the R use is Partial over {axis!r} and would never be all-reduced "
            f"into the Invariant gradient"
        )
    if sk == "R" and dk == "I":
        return f"the gradient (Partial over {axis!r}) would be used as if already reduced"
    return f"its gradient would be {grad_type(got)} where {grad_type(want)} is expected"


# -- reduce ops of all_reduce ---------------------------------------------------------
# A separate, small table: "sum" is the pending sum the type P stands for, with
# the gradient rows above.  "max" and "min" reduce a pending max/min (the
# vocabulary-parallel cross-entropy's logits max); no gradient formula is given
# for them, so the runtime allows them only where no gradient is recorded.

REDUCE_OPS: Final[dict[str, bool]] = {"sum": True, "max": False, "min": False}
"""Reduce op of all_reduce -> whether it is differentiable."""
