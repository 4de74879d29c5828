"""How much each collective moves: one table, read by the planner, the
communication report and the byte counts of the benchmarks and tests.

Per device, with L the element count of the collective's input on that device
and g the size of its group (the product of the axes' sizes):

  op               elements received           output elements
  all_gather       (g-1) * L                   g * L
  reduce_scatter   (g-1)/g * L                 L / g
  all_reduce       2 * (g-1)/g * L (rounded up) L
  all_to_all       (g-1)/g * L                 L
  reinterpret      0                           L
  convert          0                           L, L / g (R|I -> V|S: a slice),
                                               g * L (V|S -> P: stacked or padded)
  send_next & co.  L (a recv; a send: what      L
                   the peer receives)

These are the ring algorithms' figures (a ring sends what it receives, so
they are also the bytes each device sends); an all_reduce is a
reduce-scatter then an all-gather.  Bytes are elements times the dtype's
size.  `Volume` is the same figure as a formula of named axis sizes and a
named element count, for the report (`text`) and for checking it against a
run (`evaluate`); a step whose sizes are known only at run time (the
partitioned shards' conversions, split by routing) has a `runtime` reason
instead of a formula.

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Dict, Final, Iterable, Mapping, NamedTuple, Tuple

from .collectives import Step
from .localtype import kind
from .pipeline import P2P_OPS
from .subaxis import axis_size

__all__ = [
    "VOLUME",
    "COMMUNICATING",
    "received_elements",
    "received_fraction",
    "size_exponent",
    "Volume",
    "step_volume",
    "grown",
    "runtime_volume",
]


class _Row(NamedTuple):
    times: int  # k in k * (g-1) / g**per_g * L
    per_g: int
    round_up: bool = False  # a non-divisible L: whole elements, rounded up


# op -> elements each device receives, as k * (g-1) / g**e of its input.
VOLUME: Final[Dict[str, _Row]] = {
    "all_gather": _Row(1, 0),
    "reduce_scatter": _Row(1, 1),
    "all_reduce": _Row(2, 1, True),
    "all_to_all": _Row(1, 1),
}
COMMUNICATING: Final = frozenset(VOLUME) | frozenset(P2P_OPS)


def received_elements(op: str, g: int, local_in: int) -> int:
    """Elements one device receives in `op` over a group of g on an input of local_in
    elements (0 for a local op: convert, reinterpret, permute handled by callers)."""
    row = VOLUME.get(op)
    if row is None:
        return 0
    num, den = row.times * (g - 1) * local_in, g**row.per_g
    return -(-num // den) if row.round_up else num // den


def received_fraction(op: str, g: int) -> Fraction:
    """received_elements / local_in, exactly."""
    row = VOLUME.get(op)
    return Fraction(row.times * (g - 1), g**row.per_g) if row is not None else Fraction(0)


# Output size / input size of one primitive, as a power of g: a gather grows the
# tensor, a scatter or a slice shrinks it, V|S -> P stacks (V) or pads (S).
_SIZE: Final[Dict[Tuple[str, str, str], int]] = {
    **{("all_gather", s, d): 1 for s in "VS" for d in "RI"},
    **{("reduce_scatter", "P", d): -1 for d in "VS"},
    **{("convert", s, d): -1 for s in "RI" for d in "VS"},
    **{("convert", s, "P"): 1 for s in "VS"},
}


def size_exponent(step: Step) -> int:
    """e such that the step's output has g**e times its input's elements."""
    return _SIZE.get((step.op, kind(step.src), kind(step.dst)), 0)


class Volume(NamedTuple):
    """coef * prod(g_group - 1) * prod(axis ** exp) * n(size) * isz, as a formula.

    `minus_one` holds the groups (tuples of axis names) each giving a factor
    (g-1); `exps` the powers of single axis sizes; `size` the name of the
    element count the formula is in; `isz` stands for the dtype's bytes.
    """

    coef: Fraction
    minus_one: Tuple[Tuple[str, ...], ...]
    exps: Tuple[Tuple[str, int], ...]
    size: str
    runtime: str = ""  # non-empty: the bytes depend on sizes known only at run time (why)

    def evaluate(self, sizes: Mapping[str, int], numel: int, itemsize: int) -> Fraction:
        if self.runtime:
            raise ValueError(f"no static byte count: {self.runtime}")
        value = self.coef * numel * itemsize
        for group in self.minus_one:
            value *= _prod(_size(a, sizes) for a in group) - 1
        for axis, e in self.exps:
            value *= Fraction(_size(axis, sizes)) ** e
        return value

    def text(self) -> str:
        if self.runtime:
            return f"data-dependent ({self.runtime})"
        if self.coef == 0:
            return "0"
        parts = [] if self.coef == 1 else [str(self.coef)]
        parts += [f"({'*'.join(g)}-1)" for g in self.minus_one]
        parts += [a if e == 1 else f"{a}**{e}" for a, e in self.exps if e > 0]
        den = [a if e == -1 else f"{a}**{-e}" for a, e in self.exps if e < 0]
        text = "*".join(parts)
        if den:
            text = (text or "1") + "/" + (den[0] if len(den) == 1 else "(" + "*".join(den) + ")")
        return f"{text} * n({self.size}) * isz" if text else f"n({self.size}) * isz"


def _size(axis: str, sizes: Mapping[str, int]) -> int:
    """An axis's size from the mesh sizes; a sub-axis `x:(m)k` has k devices."""
    n = axis_size(axis, sizes)
    if n is None:
        raise KeyError(axis)
    return n


def _prod(values: Iterable[int]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def step_volume(step: Step, axes: Tuple[str, ...], size: str, exps: Mapping[str, int]) -> Volume:
    """What `step` over `axes` receives per device, its input being n(size) times
    prod(axis ** exps[axis]) elements (the powers earlier steps grew or shrank it by)."""
    row = VOLUME.get(step.op)
    if row is None:
        if step.op in P2P_OPS:  # a message between pipeline stages: all of it
            return Volume(Fraction(1), (), tuple(sorted(exps.items())), size)
        return Volume(Fraction(0), (), (), size)
    total = dict(exps)
    for a in axes:
        total[a] = total.get(a, 0) - row.per_g
    return Volume(Fraction(row.times), (axes,), tuple(sorted((a, e) for a, e in total.items() if e)), size)


def runtime_volume(size: str, why: str) -> Volume:
    """A step whose bytes depend on sizes known only at run time."""
    return Volume(Fraction(0), (), (), size, why)


def grown(exps: Mapping[str, int], step: Step, axes: Tuple[str, ...]) -> Dict[str, int]:
    """The powers of the axes' sizes after `step` (its output's size relative to n)."""
    out = dict(exps)
    e = size_exponent(step)
    for a in axes:
        out[a] = out.get(a, 0) + e
    return {a: v for a, v in out.items() if v}
