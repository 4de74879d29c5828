"""The gradient-sync contract: what a parameter's declared type says about
its gradient after backward, per axis, and whether the code that finishes
gradients sums each pending gradient exactly once.

After `loss.backward()` a parameter's `.grad` holds, on each axis, the
gradient type of its declared type (the design's table, localtype.grad_type):

  declared   gradient   state     what the finishing code must do on the axis
  I          I          complete  nothing: autograd already summed it (a
                                  convert(I -> R) in forward did the all-reduce)
  R          P          pending   sum it over the axis exactly once (DDP's
                                  all-reduce over dp, Megatron's all-reduce of
                                  the sequence-parallel LayerNorm weights over tp)
  V, S(i)    V, S(i)    sharded   nothing: each rank's gradient is its own shard's
  P          R          -         not a parameter's type (no contract)

A parameter tied over an axis (the embedding and the LM head held by the
first and the last pipeline stage, `spmd.tie(w, "pp")`) is one parameter
stored once per stage: each copy's gradient is its stage's addend, pending
over that axis whatever its declared type says there.

The finishing code is a list of sums (`Sum`): over an axis, either of
every parameter pending there (`spmd.sync_grads(model, axis)`: DDP, FSDP,
finalize-grads), of every parameter whatever its state (a loop over
`model.parameters()` reducing `p.grad`), or of named parameters
(`spmd.sync_grad(w, axis)`, a loop over a tuple of typed parameters).
`check_contract` counts the sums of each parameter on each axis and returns
the problems: a pending gradient summed never or twice, a complete or
sharded one summed at all.  Pure Python; the plugin and the runtime both
read these tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Final, List, Mapping, Optional, Sequence, Tuple

from .localtype import AxisType, local_kind
from .spec import Spmd

COMPLETE: Final = "complete"
PENDING: Final = "pending"
SHARDED: Final = "sharded"

# Declared letter on an axis -> the state of the gradient after backward.
GRAD_STATES: Final[Mapping[str, str]] = {"I": COMPLETE, "R": PENDING, "V": SHARDED}

# What summing a gradient in each state over its axis does (messages).
WRONG_SUM: Final[Mapping[str, str]] = {
    COMPLETE: (
        "its gradient is complete after backward (autograd already summed it over '{axis}'), "
        "so summing it again multiplies it by the size of '{axis}'"
    ),
    SHARDED: (
        "each rank's gradient belongs to its own shard, so summing over '{axis}' adds the "
        "other ranks' shard gradients into it"
    ),
}

# Sum kinds: what a piece of finishing code sums over its axis.
PENDING_ONLY: Final = "pending"  # spmd.sync_grads(model, axis): the parameters pending there
EVERY: Final = "every"  # a loop over model.parameters(): every parameter
NAMED: Final = "named"  # spmd.sync_grad(w, axis), a loop over typed parameters


def summed_by_sync_grads(state: Optional[str]) -> bool:
    """Whether `spmd.sync_grads(model, axis)` sums a parameter whose gradient is
    in `state` on the axis: every one not complete or sharded there (pending,
    or declaring nothing on the axis, which DDP sums too)."""
    return state not in (COMPLETE, SHARDED)


def grad_state(t: Optional[AxisType]) -> Optional[str]:
    """The state of a parameter's gradient on an axis where it is declared t
    (None: unknown there, or a P parameter, which has no contract)."""
    letter = local_kind(t)
    return GRAD_STATES.get(letter) if letter is not None else None


@dataclass(frozen=True)
class Param:
    """A parameter as the contract sees it: its dotted path in the module,
    its declared type, the axes it is tied over, where it is declared."""

    path: str
    spmd: Spmd
    tied: Tuple[str, ...] = ()
    line: Optional[int] = None  # its declaration, when in the checked file

    def state(self, axis: str) -> Optional[str]:
        if axis in self.tied:
            return PENDING
        return grad_state(self.spmd.axis_type(axis))

    def declared(self, axis: str) -> str:
        """The declared type on the axis, as messages write it."""
        t = self.spmd.axis_type(axis)
        shown = f"{axis}={t}" if t is not None else f"{axis} not named"
        return f"{shown}, tied over '{axis}'" if axis in self.tied else shown


@dataclass(frozen=True)
class Sum:
    """One piece of finishing code: sums gradients over `axis` at `line`."""

    line: int
    axis: str
    kind: str  # PENDING_ONLY, EVERY or NAMED
    params: Tuple[str, ...] = ()  # NAMED: the parameters' paths; else a submodule's, if any
    text: str = ""  # the code, as written

    def covers(self, param: Param) -> bool:
        if self.kind == NAMED:
            return param.path in self.params
        # PENDING_ONLY, EVERY: params names the submodule, if not the root ("layers.*": each layer)
        inside = not self.params or any(param.path.startswith(f"{m}.") for m in self.params)
        return inside and (self.kind == EVERY or summed_by_sync_grads(param.state(self.axis)))


@dataclass(frozen=True)
class Problem:
    """A broken contract: `line` is the finishing code's line (None: the
    finishing code as a whole, which misses a sum); `message` says it all."""

    kind: str  # "missing", "twice" or "wrong-axis"
    param: Param
    axis: str
    line: Optional[int]
    message: str


def contract_axes(params: Sequence[Param], sums: Sequence[Sum]) -> List[str]:
    """The axes the contract is checked on: every axis a sum names or a
    parameter is pending on (tied over, or declared R)."""
    axes = {s.axis for s in sums}
    for p in params:
        axes.update(p.tied)
        axes.update(a for a, t in p.spmd.axes.items() if grad_state(t) == PENDING)
    return sorted(axes)


def check_contract(
    params: Sequence[Param], sums: Sequence[Sum], root: str, where: str, fix: Optional[Callable[[str], str]] = None
) -> List[Problem]:
    """The problems of finishing code `sums` for the parameters of the module
    written `root` in the code; `where` names the finishing code (messages);
    `fix(axis)`, if given, is the call a missing sum's hint names (else the
    sum of the one parameter, `sum_call`).  A sum that is wrong for several
    parameters is one problem naming them all."""
    out: List[Problem] = []
    for axis in contract_axes(params, sums):
        extra: Dict[Tuple[str, int], List[Param]] = {}  # (kind, line) -> parameters
        firsts: Dict[Tuple[str, int], Sum] = {}
        for p in params:
            state = p.state(axis)
            hits = [s for s in sums if s.axis == axis and s.covers(p)]
            if state == PENDING and not hits:
                hint = fix(axis) if fix is not None else sum_call(root, p.path, axis)
                out.append(Problem("missing", p, axis, None, missing_message(p, axis, root, where, hint)))
            elif state == PENDING and len(hits) > 1:
                extra.setdefault(("twice", hits[1].line), []).append(p)
                firsts[("twice", hits[1].line)] = hits[0]
            elif state in WRONG_SUM and hits:
                extra.setdefault(("wrong-axis", hits[0].line), []).append(p)
        by_line = {s.line: s for s in sums if s.axis == axis}
        for (kind, line), ps in extra.items():
            here = by_line[line]
            if kind == "twice":
                msg = twice_message(ps, axis, root, firsts[(kind, line)], here)
            else:
                msg = wrong_axis_message(ps, axis, root, here)
            out.append(Problem(kind, ps[0], axis, line, msg))
    return out


def missing_message(p: Param, axis: str, root: str, where: str, hint: str) -> str:
    why = (
        f"it is tied over '{axis}', so each copy's backward leaves only its own stage's addend"
        if axis in p.tied
        else "it is R there, so each rank's backward leaves its addend (P) in .grad"
    )
    return (
        f"gradient of {shown_path(root, p.path)} ({p.declared(axis)}) is never summed over '{axis}' by "
        f"{where}: {why}, and the ranks step with different partial gradients. "
        f"Hint: {hint}"
    )


def shown_path(root: str, path: str) -> str:
    """`model.layers.*.ln_w` (each element of a module list) as `model.layers[*].ln_w`."""
    return f"{root}.{path}".replace(".*", "[*]")


def sum_call(root: str, path: str, axis: str) -> str:
    """The call that sums one parameter's gradient over `axis` (a loop over a module list's elements)."""
    if path.startswith("*."):  # each element of a list of model chunks
        return f"for chunk in {root}: {sum_call('chunk', path[2:], axis)}"
    head, star, tail = path.partition(".*.")
    if not star:
        return f"spmd.sync_grad({root}.{path}, '{axis}')"
    return f"for m in {root}.{head}: {sum_call('m', tail, axis)}"


def _names(ps: Sequence[Param], axis: str, root: str) -> str:
    shown = ", ".join(f"{shown_path(root, p.path)} ({p.declared(axis)})" for p in ps)
    return f"gradient of {shown} is" if len(ps) == 1 else f"gradients of {shown} are"


def twice_message(ps: Sequence[Param], axis: str, root: str, first: Sum, second: Sum) -> str:
    return (
        f"{_names(ps, axis, root)} summed over '{axis}' twice "
        f"(line {first.line}: {first.text}; line {second.line}: {second.text}): the second sum adds "
        f"every rank's already summed gradient, multiplying it by the size of '{axis}'. "
        f"Hint: delete `{second.text}` (line {first.line} already sums it)"
    )


def wrong_axis_message(ps: Sequence[Param], axis: str, root: str, s: Sum) -> str:
    states = {p.state(axis) for p in ps}
    reasons = sorted(WRONG_SUM[st].format(axis=axis) for st in states if st is not None and st in WRONG_SUM)
    return (
        f"{_names(ps, axis, root)} summed over '{axis}' by `{s.text}`, but not pending there: "
        f"{'; '.join(reasons)}. Hint: delete `{s.text}`"
    )


def pending_axes(spmd: Optional[Spmd], tied: Sequence[str] = ()) -> Dict[str, str]:
    """axis -> state for every axis a declared type (and ties) names."""
    out: Dict[str, str] = {}
    if spmd is not None:
        for a, t in spmd.axes.items():
            s = grad_state(t)
            if s is not None:
                out[a] = s
    for a in tied:
        out[a] = PENDING
    return out
