"""The spec-level redistribute planner: which collectives take a tensor from one
global SPMD type to another, and how much each device receives.

    plan_redistribute(src, dst, shape, mesh) -> RedistPlan

`src` and `dst` are Spmd values.  In the spec form, Spmd(spec=PartitionSpec(...),
dp=P, ...), the spec says which mesh axes shard each dim (major to minor, as in
JAX and Shardy), an axis named outside the spec is P, I or R, and an axis named
nowhere is R.  The per-axis form (dp=S(0), tp=R) is accepted when it converts
unambiguously: it names every mesh axis, no V, at most one S axis per dim.
`shape` is the global shape, `mesh` maps axis names to sizes in mesh order
(the order of the flattened communicators: major to minor).

The planner only moves data; it never changes the value.  Per axis, the moves
it may make are those of the per-axis redistribute (vocab.collectives): an
axis whose per-axis redistribute is rejected (R -> I, I -> P, S(i) -> P) is
rejected here with the same reason.

How a plan is built
-------------------
1. Local steps, which cost nothing: an axis R in src and P in dst is kept on
   coordinate 0 (convert R->P); an axis R or I in src that shards a dim in
   dst is sliced locally (convert R|I->S(j)), appended as the minor axis of
   its dim.
2. Reductions: the P axes that shard a dim in dst are reduce-scattered in one
   collective over their flattened group (each appended as the minor axis of
   its dim); the P axes that become R or I are all-reduced in one collective
   after it, on the smaller tensor.  I -> R is a local convert (its backward
   all-reduces the gradient).
3. Layout moves, in one of two ways:
   A. standard collectives: if some axes change place, first one move to
      the layout "dst, then the axes still to gather as the minor axes of
      the dims they shard now": an all_to_all over a flattened group when
      some axes move as a block from the minor end of one dim to the minor
      end of another, otherwise a permute/exchange (below); then one
      all_gather over the flattened group of the axes to gather.
   B. one exchange straight to dst (when no I axis takes part).
Candidates: A or B, with the slices of step 1 before the reduce-scatter (it
then works on less data) or after it (the scattered axes then come first in
their dims, which can save a move); and, for shapes where those would need
an intermediate shard that does not divide its dim, all-reduce every P axis
and do one exchange.  The candidate with the smallest max_recv_elements
wins; on a tie, the one with fewer collectives; on a tie again, standard
collectives.  A plan's notes say when an exchange won on the number of
collectives alone.

An *exchange* is one all_to_all_single with per-rank split sizes (alltoallv)
over the flattened group of the axes that change: each device sends every
other device exactly the box of its tile that the other needs and does not
hold.  Where the source is replicated inside the group, the copy held by the
receiver itself is used, otherwise the copy whose coordinates on the
replicated axes equal the receiver's.  A *permute* is an exchange in which
every device receives from at most one other device and sends to at most one
(only the devices that move communicate).  Its backward is the same exchange
reversed, summing the pieces that arrive for one element (the gradient of a
replicated value is Partial).

Accounting (max_recv_elements)
------------------------------
Elements each device receives from other devices, summed over the steps, and
the maximum over devices.  L is the device's local element count before the
step, g the size of the step's flattened group:

  all_gather        (g-1) * L              (it receives the g-1 other pieces)
  reduce_scatter    (g-1) * L / g          (ring or recursive halving)
  all_reduce        2 * (g-1) * L / g      (reduce-scatter + all-gather ring),
                                           rounded up to a whole element
  all_to_all        (g-1) * L / g          (it keeps its own 1/g)
  permute/exchange  the exact sum of the boxes it receives from others
  convert           0                      (local)

Lower bounds these are compared against (notes/targets.md): a layout move
cannot receive less than what a device needs and does not hold; a reduction
of a Partial source over g devices costs (g-1)/g (reduce-scatter) or
2(g-1)/g (all-reduce) of its local size.  The exchange meets the first bound
exactly by construction; the flattened collectives meet the second.

This module is pure Python: it imports neither torch nor mypy.
"""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .collectives import CollectiveError, backward_step
from .collectives import plan as primitive_plan
from .localtype import BY_LETTER, AxisType, Shard, V, grad_type
from .spec import PartitionSpec, Spmd

__all__ = [
    "plan_redistribute",
    "RedistPlan",
    "RedistStep",
    "RedistributeError",
    "Piece",
    "exchange_pieces",
    "global_shape",
    "local_shape",
    "grad_spmd",
]

Shape = Tuple[int, ...]
MeshItems = Tuple[Tuple[str, int], ...]
Box = Tuple[Tuple[int, int], ...]  # (start, length) per dim

COLLECTIVE_OPS = frozenset(
    {"all_gather", "reduce_scatter", "all_reduce", "all_to_all", "permute", "exchange"}
)


class RedistributeError(CollectiveError):
    """A spec-level redistribute that is invalid or cannot be planned for this shape."""


# -- layouts: the spec form as plain data ------------------------------------------


class _Layout(NamedTuple):
    """dims[j]: the axes sharding dim j, major to minor; other: every other mesh axis -> R/I/P."""

    dims: Tuple[Tuple[str, ...], ...]
    other: Tuple[Tuple[str, str], ...]  # (axis, letter), in mesh order

    def kind(self, axis: str) -> str:
        for a, k in self.other:
            if a == axis:
                return k
        return "S"

    def dim_of(self, axis: str) -> Optional[int]:
        for j, d in enumerate(self.dims):
            if axis in d:
                return j
        return None

    def axis_type(self, axis: str) -> AxisType:
        j = self.dim_of(axis)
        return Shard(j) if j is not None else BY_LETTER[self.kind(axis)]

    def with_dims(self, dims: Sequence[Sequence[str]], kinds: Mapping[str, str], names: Sequence[str]) -> "_Layout":
        """A layout with these dims; axes not in them take `kinds`, else keep their letter."""
        new_dims = tuple(tuple(d) for d in dims)
        in_dims = {a for d in new_dims for a in d}
        old = dict(self.other)
        other = tuple(
            (a, kinds.get(a, old.get(a, "R"))) for a in names if a not in in_dims
        )
        return _Layout(new_dims, other)

    def spmd(self) -> Spmd:
        spec = PartitionSpec(*[(d[0] if len(d) == 1 else d) if d else None for d in self.dims])
        return Spmd.of({a: BY_LETTER[k] for a, k in self.other if k != "R"}, spec)


def _layout_of(spmd: Spmd, which: str, shape: Shape, names: Sequence[str]) -> _Layout:
    if not isinstance(spmd, Spmd):
        raise RedistributeError(f"spmd.redistribute: {which} must be an Spmd(...), got {spmd!r}")
    for a in spmd.axes:
        if a not in names:
            raise RedistributeError(
                f"spmd.redistribute: {which} {spmd} names axis {a!r}, which is not a mesh axis "
                f"(mesh axes: {', '.join(names)})"
            )
    ndim = len(shape)
    if spmd.spec is not None:
        if len(spmd.spec) != ndim:
            raise RedistributeError(
                f"spmd.redistribute: {which} {spmd} has rank {len(spmd.spec)}, but the tensor "
                f"has shape {shape}"
            )
        dims: List[List[str]] = [list(d) for d in spmd.spec.dims]
    else:
        missing = [a for a in names if spmd.axis_type(a) is None]
        if missing:
            raise RedistributeError(
                f"spmd.redistribute: {which} {spmd} does not name axis {missing[0]!r}; in the "
                f"per-axis form name every mesh axis, or use the spec form (unnamed axes are R)"
            )
        dims = [[] for _ in range(ndim)]
        for a in names:
            t = spmd.axis_type(a)
            if isinstance(t, Shard):
                if not -ndim <= t.dim < ndim:
                    raise RedistributeError(
                        f"spmd.redistribute: {which} {spmd}: axis {a!r} is {t}, out of range for "
                        f"shape {shape}"
                    )
                j = t.dim % ndim
                if dims[j]:
                    raise RedistributeError(
                        f"spmd.redistribute: {which} {spmd}: axes {dims[j][0]!r} and {a!r} both "
                        f"shard dim {j}, and the per-axis form does not say which is major; use "
                        f"spec=PartitionSpec(...)"
                    )
                dims[j].append(a)
    in_dims = {a for d in dims for a in d}
    other = []
    for a in names:
        if a in in_dims:
            continue
        t = spmd.axis_type(a)
        if t is V:
            raise RedistributeError(
                f"spmd.redistribute: {which} {spmd}: axis {a!r} is V, which has no global layout; "
                f"use S(dim) when the ranks hold shards of a dim, or the per-axis "
                f"spmd.redistribute(x, {a!r}, src=..., dst=...)"
            )
        assert t is not None and not isinstance(t, Shard)
        other.append((a, t.letter))
    return _Layout(tuple(tuple(d) for d in dims), tuple(other))


def _check_divisible(layout: _Layout, shape: Shape, sizes: Mapping[str, int]) -> Optional[str]:
    for j, d in enumerate(layout.dims):
        n = _prod(sizes[a] for a in d)
        if shape[j] % n:
            return (
                f"dim {j} has size {shape[j]}, not divisible by {n} (the product of the sizes of "
                f"the axes {d} that shard it in {layout.spmd()})"
            )
    return None


def _prod(xs: Iterable[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def _local_shape(layout: _Layout, shape: Shape, sizes: Mapping[str, int]) -> Shape:
    return tuple(shape[j] // _prod(sizes[a] for a in d) for j, d in enumerate(layout.dims))


def _tile(layout: _Layout, shape: Shape, sizes: Mapping[str, int], coords: Mapping[str, int]) -> Box:
    """The global box a device with these coordinates holds."""
    out = []
    for j, d in enumerate(layout.dims):
        idx, n = 0, 1
        for a in d:
            idx = idx * sizes[a] + coords[a]
            n *= sizes[a]
        length = shape[j] // n
        out.append((idx * length, length))
    return tuple(out)


def _grad_layout(layout: _Layout) -> _Layout:
    """The layout of the gradient: the same dims, each other axis's gradient type."""
    return _Layout(layout.dims, tuple((a, str(grad_type(BY_LETTER[k]))) for a, k in layout.other))


# -- steps and plans ----------------------------------------------------------------


class RedistStep(NamedTuple):
    """One step of a plan: a collective (or a local convert) over `axes`, a flattened
    group in mesh order, taking the whole tensor from type `src` to type `dst`.

    `recv` is the most elements any one device receives in this step.
    """

    op: str
    axes: Tuple[str, ...]
    src: Spmd
    dst: Spmd
    recv: int

    @property
    def is_collective(self) -> bool:
        return self.op in COLLECTIVE_OPS

    def flat_types(self) -> Optional[Tuple[AxisType, AxisType]]:
        """(src, dst) of the one per-axis primitive on the flattened group, or None.

        None means the step is not a single per-axis primitive: an exchange, or
        a gather/scatter over axes of several dims or out of mesh order, which
        the runtime runs stacked (V) with a local reorder.
        """
        if self.op in ("permute", "exchange"):
            return None
        s = {self.src.axis_type(a) for a in self.axes}
        d = {self.dst.axis_type(a) for a in self.axes}
        if len(s) != 1 or len(d) != 1:
            return None
        st, dt = s.pop(), d.pop()
        assert st is not None and dt is not None
        for spmd, t in ((self.src, st), (self.dst, dt)):
            if isinstance(t, Shard):  # the group must be the minor end of its dim, in mesh order
                assert spmd.spec is not None
                dim = spmd.spec.dims[t.dim]
                if dim[len(dim) - len(self.axes):] != self.axes:
                    return None
        return st, dt

    def types_text(self) -> str:
        flat = self.flat_types()
        if flat is not None:
            return f"{flat[0]}->{flat[1]}"
        return ", ".join(
            f"{a} {self.src.axis_type(a)}->{self.dst.axis_type(a)}" for a in self.axes
        )

    def text(self) -> str:
        where = self.axes[0] if len(self.axes) == 1 else "(" + ", ".join(self.axes) + ")"
        form = ""
        if self.op in ("all_gather", "reduce_scatter") and self.flat_types() is None:
            form = " (stacked, local reorder)"
        return f"{self.op} over {where}: {self.types_text()}{form}; {self.src} -> {self.dst}"

    def __repr__(self) -> str:
        return f"RedistStep({self.text()}; recv {self.recv})"


class Piece(NamedTuple):
    """One box of an exchange: `sender` -> `receiver` (coordinates in the step's group).

    src_box is in the sender's local tensor, dst_box in the receiver's, both as
    (start, length) per dim.
    """

    sender: int
    receiver: int
    src_box: Box
    dst_box: Box

    @property
    def numel(self) -> int:
        return _prod(n for _, n in self.src_box)


class RedistPlan:
    """A redistribute plan: the steps, and the volume each device receives.

    Immutable.  `max_recv_elements` is the most elements any one device
    receives over the whole plan (see the module docstring for the
    accounting); `volume` is that in units of the full tensor.
    """

    __slots__ = ("src", "dst", "shape", "mesh", "steps", "max_recv_elements", "notes")

    src: Spmd
    dst: Spmd
    shape: Shape
    mesh: MeshItems
    steps: Tuple[RedistStep, ...]
    max_recv_elements: int
    notes: Tuple[str, ...]

    def __init__(
        self,
        src: Spmd,
        dst: Spmd,
        shape: Shape,
        mesh: MeshItems,
        steps: Tuple[RedistStep, ...],
        max_recv_elements: int,
        notes: Tuple[str, ...] = (),
    ) -> None:
        for name, value in (
            ("src", src),
            ("dst", dst),
            ("shape", tuple(shape)),
            ("mesh", tuple(mesh)),
            ("steps", tuple(steps)),
            ("max_recv_elements", max_recv_elements),
            ("notes", tuple(notes)),
        ):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("RedistPlan is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RedistPlan) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__
        )

    def __hash__(self) -> int:
        return hash((self.src, self.dst, self.shape, self.mesh, self.steps))

    @property
    def numel(self) -> int:
        """N: the element count of the full (global) tensor."""
        return _prod(self.shape)

    @property
    def volume(self) -> Fraction:
        """max_recv_elements in units of the full tensor size N."""
        return Fraction(self.max_recv_elements, self.numel) if self.numel else Fraction(0)

    @property
    def collectives(self) -> int:
        return sum(1 for s in self.steps if s.is_collective)

    def backward(self) -> "RedistPlan":
        """The plan the backward pass runs: the steps reversed, each replaced by
        its backward (the per-axis table's row), on the gradient types."""
        sizes = dict(self.mesh)
        names = [a for a, _ in self.mesh]
        steps = []
        for s in reversed(self.steps):
            src_l = _grad_layout(_layout_of(s.dst, "dst", self.shape, names))
            dst_l = _grad_layout(_layout_of(s.src, "src", self.shape, names))
            op = _backward_op(s)
            steps.append(_make_step(op, s.axes, src_l, dst_l, self.shape, sizes, names)[0])
        total = _total_recv(
            [_step_recv_vector(st, self.shape, self.mesh) for st in steps], self.mesh
        )
        return RedistPlan(
            grad_spmd(self.dst, dict(self.mesh)), grad_spmd(self.src, dict(self.mesh)), self.shape,
            self.mesh, tuple(steps), total, (),
        )

    def text(self) -> str:
        mesh = ", ".join(f"{a}={n}" for a, n in self.mesh)
        n = self.numel
        lines = [
            f"redistribute shape {list(self.shape)} on mesh ({mesh})",
            f"  from {self.src}",
            f"  to   {self.dst}",
        ]
        if not self.steps:
            lines.append("  (no steps: the types are equal)")
        for i, s in enumerate(self.steps, 1):
            lines.append(f"  {i}. {s.text()}; recv {s.recv} = {_frac(s.recv, n)} N")
        lines.append(
            f"  {self.collectives} collective(s); each device receives at most "
            f"{self.max_recv_elements} elements = {_frac(self.max_recv_elements, n)} N (N = {n})"
        )
        lines += [f"  note: {t}" for t in self.notes]
        return "\n".join(lines)

    __str__ = text

    def __repr__(self) -> str:
        steps = "; ".join(f"{s.op} over {', '.join(s.axes)}" for s in self.steps) or "none"
        return (
            f"RedistPlan({self.src} -> {self.dst}, shape={self.shape}, steps=[{steps}], "
            f"max_recv_elements={self.max_recv_elements} ({_frac(self.max_recv_elements, self.numel)} N))"
        )


def _frac(k: int, n: int) -> str:
    return str(Fraction(k, n)) if n else "0"


# -- recv accounting ------------------------------------------------------------------


def _uniform_recv(op: str, g: int, local_in: int) -> int:
    if op == "all_gather":
        return (g - 1) * local_in
    if op in ("reduce_scatter", "all_to_all"):
        return (g - 1) * local_in // g
    if op == "all_reduce":
        return -(-2 * (g - 1) * local_in // g)
    return 0


def _device_coords(mesh: MeshItems) -> List[Dict[str, int]]:
    names = [a for a, _ in mesh]
    return [
        dict(zip(names, c)) for c in itertools.product(*[range(n) for _, n in mesh])
    ]


def _group_coord(coords: Mapping[str, int], axes: Sequence[str], sizes: Mapping[str, int]) -> int:
    c = 0
    for a in axes:
        c = c * sizes[a] + coords[a]
    return c


def _step_recv_vector(step: RedistStep, shape: Shape, mesh: MeshItems) -> List[int]:
    """Elements each device (mesh-order rank) receives in this step."""
    devices = _device_coords(mesh)
    if step.op in ("permute", "exchange"):
        per_group = _exchange_recv(exchange_pieces(step.src, step.dst, step.axes, shape, mesh), step.axes, mesh)
        sizes = dict(mesh)
        return [per_group[_group_coord(c, step.axes, sizes)] for c in devices]
    sizes = dict(mesh)
    g = _prod(sizes[a] for a in step.axes)
    names = [a for a, _ in mesh]
    local_in = _prod(_local_shape(_layout_of(step.src, "src", shape, names), shape, sizes))
    return [_uniform_recv(step.op, g, local_in)] * len(devices)


def _exchange_recv(pieces: Sequence[Piece], axes: Sequence[str], mesh: MeshItems) -> List[int]:
    sizes = dict(mesh)
    out = [0] * _prod(sizes[a] for a in axes)
    for p in pieces:
        if p.sender != p.receiver:
            out[p.receiver] += p.numel
    return out


def _total_recv(vectors: Sequence[Sequence[int]], mesh: MeshItems) -> int:
    world = _prod(n for _, n in mesh)
    totals = [0] * world
    for v in vectors:
        for k, x in enumerate(v):
            totals[k] += x
    return max(totals) if totals else 0


# -- exchanges ------------------------------------------------------------------------


@functools.lru_cache(maxsize=512)
def exchange_pieces(
    src: Spmd, dst: Spmd, axes: Tuple[str, ...], shape: Shape, mesh: MeshItems
) -> Tuple[Piece, ...]:
    """The boxes an exchange over `axes` sends, sorted by (sender, receiver).

    Coordinates are in the flattened group of `axes` (mesh order, major to
    minor).  The other axes are the same on both sides of the exchange (they
    only select which group a device is in), so the boxes are the same in
    every group.  Every element of a receiver's tile comes from exactly one
    piece; a receiver that holds an element itself takes it from itself.
    """
    names = [a for a, _ in mesh]
    sizes = dict(mesh)
    src_l = _layout_of(src, "src", shape, names)
    dst_l = _layout_of(dst, "dst", shape, names)
    if any("P" in (src_l.kind(a), dst_l.kind(a)) for a in axes):
        # A gradient's exchange: the exchange of the forward types, reversed
        # (its receivers sum what arrives for one element).
        fwd = exchange_pieces(
            _grad_layout(dst_l).spmd(), _grad_layout(src_l).spmd(), axes, shape, mesh
        )
        return tuple(sorted(Piece(p.receiver, p.sender, p.dst_box, p.src_box) for p in fwd))
    replicated = [a for a in axes if src_l.kind(a) != "S"]  # the sender copies them
    g = _prod(sizes[a] for a in axes)
    coords = []
    for c in itertools.product(*[range(sizes[a]) for a in axes]):
        full = {a: 0 for a in names}
        full.update(zip(axes, c))
        coords.append(full)
    src_tiles = [_tile(src_l, shape, sizes, c) for c in coords]
    dst_tiles = [_tile(dst_l, shape, sizes, c) for c in coords]
    pieces = []
    for s in range(g):
        for r in range(g):
            if any(coords[s][a] != coords[r][a] for a in replicated):
                continue
            sbox, dbox = [], []
            for (s0, sn), (d0, dn) in zip(src_tiles[s], dst_tiles[r]):
                lo, hi = max(s0, d0), min(s0 + sn, d0 + dn)
                if hi <= lo:
                    break
                sbox.append((lo - s0, hi - lo))
                dbox.append((lo - d0, hi - lo))
            else:
                pieces.append(Piece(s, r, tuple(sbox), tuple(dbox)))
    return tuple(pieces)


def _is_permute(pieces: Sequence[Piece]) -> bool:
    sends: Dict[int, int] = {}
    recvs: Dict[int, int] = {}
    for p in pieces:
        if p.sender != p.receiver:
            sends[p.sender] = sends.get(p.sender, 0) + 1
            recvs[p.receiver] = recvs.get(p.receiver, 0) + 1
    return all(v <= 1 for v in sends.values()) and all(v <= 1 for v in recvs.values())


# -- building steps -------------------------------------------------------------------


def _make_step(
    op: str,
    axes: Sequence[str],
    before: _Layout,
    after: _Layout,
    shape: Shape,
    sizes: Mapping[str, int],
    names: Sequence[str],
) -> Tuple[RedistStep, List[int]]:
    axes = tuple(a for a in names if a in axes)
    mesh = tuple((a, sizes[a]) for a in names)
    src, dst = before.spmd(), after.spmd()
    if op in ("permute", "exchange"):
        pieces = exchange_pieces(src, dst, axes, shape, mesh)
        op = "permute" if _is_permute(pieces) else "exchange"
    probe = RedistStep(op, axes, src, dst, 0)
    vec = _step_recv_vector(probe, shape, mesh)
    return probe._replace(recv=max(vec) if vec else 0), vec


def _backward_op(step: RedistStep) -> str:
    if step.op in ("permute", "exchange"):
        return "exchange"
    flat = step.flat_types()
    s: Optional[AxisType]
    d: Optional[AxisType]
    if flat is not None:
        s, d = flat
    else:  # stacked forms run the V rows of the table
        s, d = step.src.axis_type(step.axes[0]), step.dst.axis_type(step.axes[0])
        s, d = (V if isinstance(s, Shard) else s), (V if isinstance(d, Shard) else d)
    assert s is not None and d is not None
    prims = primitive_plan(step.op, s, d)
    ops = {backward_step(p).op for p in prims}
    return ops.pop() if len(ops) == 1 else "convert"


class _Builder:
    """Accumulates steps and the per-device received elements of a candidate plan."""

    def __init__(self, shape: Shape, mesh: MeshItems) -> None:
        self.shape = shape
        self.mesh = mesh
        self.sizes = dict(mesh)
        self.names = [a for a, _ in mesh]
        self.steps: List[RedistStep] = []
        self.vectors: List[List[int]] = []

    def add(self, op: str, axes: Sequence[str], before: _Layout, after: _Layout) -> _Layout:
        bad = _check_divisible(after, self.shape, self.sizes)
        if bad is not None:
            raise _NotDivisible(bad)
        step, vec = _make_step(op, axes, before, after, self.shape, self.sizes, self.names)
        self.steps.append(step)
        self.vectors.append(vec)
        return after

    def key(self, preference: int) -> Tuple[int, int, int]:
        return (_total_recv(self.vectors, self.mesh), sum(s.is_collective for s in self.steps), preference)


class _NotDivisible(Exception):
    pass


def _mesh_order(names: Sequence[str], axes: Sequence[str]) -> bool:
    idx = [names.index(a) for a in axes]
    return idx == sorted(idx)


def _slice(b: _Builder, cur: _Layout, dst: _Layout) -> _Layout:
    """Local converts R|I -> S(j) for the axes that shard a dim in dst: runs of
    dst-order axes of one kind, in mesh order, each appended as minor axes."""
    names = b.names
    for j, want in enumerate(dst.dims):
        runs: List[List[str]] = []
        for a in want:
            k = cur.kind(a)
            if k not in ("R", "I"):
                runs.append([])
            elif runs and runs[-1] and cur.kind(runs[-1][-1]) == k and names.index(a) > names.index(runs[-1][-1]):
                runs[-1].append(a)
            else:
                runs.append([a])
        for run in runs:
            if run:
                dims = [list(d) for d in cur.dims]
                dims[j] += run
                cur = b.add("convert", run, cur, cur.with_dims(dims, {}, names))
    return cur


def _pre_phase(b: _Builder, src: _Layout, dst: _Layout, scatter: bool, slices: str) -> _Layout:
    """Local converts and reductions.  slices: "first" (before the reduce-scatter,
    which then works on less data), "after" (so the scattered axes come first
    in their dims) or "none" (the exchange does them)."""
    names = b.names
    cur = src
    to_p = [a for a in names if cur.kind(a) == "R" and dst.kind(a) == "P"]
    if to_p:
        cur = b.add("convert", to_p, cur, cur.with_dims(cur.dims, {a: "P" for a in to_p}, names))
    if slices == "first":
        cur = _slice(b, cur, dst)
    reduce_s = [a for a in names if cur.kind(a) == "P" and dst.kind(a) == "S"] if scatter else []
    if reduce_s:
        dims = [list(d) + [a for a in dst.dims[j] if a in reduce_s] for j, d in enumerate(cur.dims)]
        cur = b.add("reduce_scatter", reduce_s, cur, cur.with_dims(dims, {}, names))
    if slices == "after":
        cur = _slice(b, cur, dst)
    reduce_r = [a for a in names if cur.kind(a) == "P" and dst.kind(a) != "P"]
    if reduce_r:
        to_i = any(dst.kind(a) == "I" for a in reduce_r)
        kinds = {a: ("I" if to_i else "R") for a in reduce_r}
        cur = b.add("all_reduce", reduce_r, cur, cur.with_dims(cur.dims, kinds, names))
    i_to_r = [a for a in names if cur.kind(a) == "I" and dst.kind(a) == "R"]
    if i_to_r:
        cur = b.add("convert", i_to_r, cur, cur.with_dims(cur.dims, {a: "R" for a in i_to_r}, names))
    return cur


def _exchange_axes(cur: _Layout, dst: _Layout, names: Sequence[str]) -> List[str]:
    """The axes an exchange from cur to dst must span: every axis whose role
    changes, and the axes of every dim that changes, except a common major prefix."""
    axes = set()
    for a in names:
        if cur.kind(a) != dst.kind(a) or (cur.kind(a) == "S" and cur.dim_of(a) != dst.dim_of(a)):
            axes.add(a)
    for c, d in zip(cur.dims, dst.dims):
        if c == d:
            continue
        k = 0
        while k < min(len(c), len(d)) and c[k] == d[k]:
            k += 1
        axes |= set(c[k:]) | set(d[k:])
    return [a for a in names if a in axes]


def _move(b: _Builder, cur: _Layout, target: _Layout) -> _Layout:
    """One collective from cur to target (same S axes, other places)."""
    names = b.names
    changed = [j for j, (c, t) in enumerate(zip(cur.dims, target.dims)) if c != t]
    if len(changed) == 2:
        for i, j in (changed, changed[::-1]):
            ci, ti, cj, tj = cur.dims[i], target.dims[i], cur.dims[j], target.dims[j]
            moved = ci[len(ti):]
            if ci[: len(ti)] == ti and moved and tj == cj + moved and _mesh_order(names, moved):
                return b.add("all_to_all", moved, cur, target)
    return b.add("exchange", _exchange_axes(cur, target, names), cur, target)


def _layout_standard(b: _Builder, cur: _Layout, dst: _Layout) -> _Layout:
    names = b.names
    gather_r = [a for a in names if cur.kind(a) == "S" and dst.kind(a) == "R"]
    gather_i = [a for a in names if cur.kind(a) == "S" and dst.kind(a) == "I"]
    target_dims = [
        tuple(want) + tuple(a for a in have if a in gather_r) + tuple(a for a in have if a in gather_i)
        for want, have in zip(dst.dims, cur.dims)
    ]
    target = cur.with_dims(target_dims, {}, names)
    if target.dims != cur.dims:
        cur = _move(b, cur, target)
    for group, letter in ((gather_i, "I"), (gather_r, "R")):
        if group:
            dims = [[a for a in d if a not in group] for d in cur.dims]
            cur = b.add("all_gather", group, cur, cur.with_dims(dims, {a: letter for a in group}, names))
    return cur


def _layout_exchange(b: _Builder, cur: _Layout, dst: _Layout) -> _Layout:
    if cur == dst:
        return cur
    axes = _exchange_axes(cur, dst, b.names)
    if any("I" in (cur.kind(a), dst.kind(a)) for a in axes):
        raise _NotApplicable()
    return b.add("exchange", axes, cur, dst)


class _NotApplicable(Exception):
    pass


def _candidates(src: _Layout, dst: _Layout, shape: Shape, mesh: MeshItems) -> List[Tuple[Tuple[int, int, int], _Builder]]:
    out = []
    for pref, (scatter, slices, layout) in enumerate(
        (
            (True, "first", _layout_standard),
            (True, "after", _layout_standard),
            (True, "first", _layout_exchange),
            (True, "after", _layout_exchange),
            (False, "none", _layout_exchange),
        )
    ):
        b = _Builder(shape, mesh)
        try:
            cur = _pre_phase(b, src, dst, scatter, slices)
            cur = layout(b, cur, dst)
        except (_NotDivisible, _NotApplicable):
            continue
        assert cur == dst, (cur, dst)
        out.append((b.key(pref), b))
    return out


def _validate_axes(src: _Layout, dst: _Layout, src_spmd: Spmd, dst_spmd: Spmd, names: Sequence[str]) -> None:
    for a in names:
        s, d = src.axis_type(a), dst.axis_type(a)
        try:
            primitive_plan("redistribute", s, d, axis=a)
        except CollectiveError as e:
            raise RedistributeError(
                f"spmd.redistribute from {src_spmd} to {dst_spmd}: axis {a!r} goes from {s} to "
                f"{d}, which is not a redistribution ({e})"
            ) from None


def _notes(b: _Builder, shape: Shape, mesh: MeshItems) -> Tuple[str, ...]:
    notes = []
    n = _prod(shape)
    world = _prod(size for _, size in mesh)
    for s, vec in zip(b.steps, b.vectors):
        if s.op in ("permute", "exchange"):
            moving = sum(1 for v in vec if v)
            notes.append(
                f"{s.op} over ({', '.join(s.axes)}): one all_to_all_single with per-rank split "
                f"sizes; {moving} of {world} devices receive, each exactly what it needs and does "
                f"not hold (at most {_frac(s.recv, n)} N)"
            )
    return tuple(notes)


@functools.lru_cache(maxsize=1024)
def _plan_cached(src: Spmd, dst: Spmd, shape: Shape, mesh: MeshItems) -> RedistPlan:
    names = [a for a, _ in mesh]
    sizes = dict(mesh)
    src_l = _layout_of(src, "src", shape, names)
    dst_l = _layout_of(dst, "dst", shape, names)
    for layout in (src_l, dst_l):
        bad = _check_divisible(layout, shape, sizes)
        if bad is not None:
            raise RedistributeError(
                f"spmd.redistribute from {src_l.spmd()} to {dst_l.spmd()}: {bad}; the spec form "
                f"needs even shards (use the per-axis redistribute with split_sizes for uneven ones)"
            )
    _validate_axes(src_l, dst_l, src_l.spmd(), dst_l.spmd(), names)
    found = _candidates(src_l, dst_l, shape, mesh)
    if not found:
        raise RedistributeError(
            f"spmd.redistribute from {src_l.spmd()} to {dst_l.spmd()} on shape {shape}: every plan "
            f"needs an intermediate shard that does not divide its dim; use sizes divisible by the "
            f"product of the axes of both specs"
        )
    key, best = min(found, key=lambda kb: kb[0])
    notes = _notes(best, shape, mesh)
    standard = min((kb for kb in found if kb[0][2] < 2), key=lambda kb: kb[0], default=None)
    if standard is not None and standard[1] is not best and standard[0][0] == key[0]:
        ops = " + ".join(s.op for s in standard[1].steps if s.is_collective)
        notes += (
            f"standard collectives ({ops}) receive the same {_frac(key[0], _prod(shape))} N in "
            f"{standard[0][1]} collectives; the exchange needs {key[1]}",
        )
    return RedistPlan(src_l.spmd(), dst_l.spmd(), shape, mesh, tuple(best.steps), key[0], notes)


def _mesh_items(mesh: Any) -> MeshItems:
    items = mesh.items() if isinstance(mesh, Mapping) else mesh
    try:
        out = tuple((str(a), int(n)) for a, n in items)
    except (TypeError, ValueError):
        raise RedistributeError(
            f"spmd.plan_redistribute: mesh maps axis names to sizes in mesh order, got {mesh!r}"
        ) from None
    if not out or any(n < 1 for _, n in out) or len({a for a, _ in out}) != len(out):
        raise RedistributeError(
            f"spmd.plan_redistribute: mesh maps distinct axis names to positive sizes, got {mesh!r}"
        )
    return out


def _shape_tuple(shape: object) -> Shape:
    try:
        out = tuple(int(s) for s in shape)  # type: ignore[attr-defined]
    except TypeError:
        raise RedistributeError(f"spmd.plan_redistribute: shape is a tuple of ints, got {shape!r}") from None
    if any(s < 0 for s in out):
        raise RedistributeError(f"spmd.plan_redistribute: negative size in shape {out}")
    return out


# -- public functions -----------------------------------------------------------------


def plan_redistribute(
    src: Spmd, dst: Spmd, shape: Sequence[int], mesh: Mapping[str, int]
) -> RedistPlan:
    """Plan redistribute(x: src -> dst) for a global `shape` on `mesh` (names -> sizes,
    in mesh order), without running anything.  Raises RedistributeError (a
    CollectiveError) for an invalid transition or shape.
    """
    for which, t in (("src", src), ("dst", dst)):
        if not isinstance(t, Spmd):
            raise RedistributeError(f"spmd.plan_redistribute: {which} must be an Spmd(...), got {t!r}")
    return _plan_cached(src, dst, _shape_tuple(shape), _mesh_items(mesh))


def global_shape(spmd: Spmd, local: Sequence[int], mesh: Mapping[str, int]) -> Shape:
    """The global shape of a tensor of type `spmd` whose local shape is `local`."""
    items = _mesh_items(mesh)
    sizes = dict(items)
    layout = _layout_of(spmd, "src", tuple(local), [a for a, _ in items])
    return tuple(n * _prod(sizes[a] for a in d) for n, d in zip(local, layout.dims))


def local_shape(spmd: Spmd, shape: Sequence[int], mesh: Mapping[str, int]) -> Shape:
    """The local shape of a tensor of type `spmd` and global shape `shape`."""
    items = _mesh_items(mesh)
    layout = _layout_of(spmd, "spmd", tuple(shape), [a for a, _ in items])
    return _local_shape(layout, tuple(shape), dict(items))


def grad_spmd(spmd: Spmd, mesh: Mapping[str, int]) -> Spmd:
    """The type of the gradient of a tensor of (spec-form) type `spmd`: R <-> P, I and S stay."""
    items = _mesh_items(mesh)
    assert spmd.spec is not None, "grad_spmd takes the spec form"
    layout = _layout_of(spmd, "spmd", (0,) * len(spmd.spec), [a for a, _ in items])
    return _grad_layout(layout).spmd()
