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
step, g the size of the step's flattened group (the table in comm_volume.py,
which the communication report and the benchmarks' byte counts read too):

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

The layouts the search works on are in redistribute_layout.py; the steps,
the exchange pieces and the accounting in redistribute_steps.py.

This module is pure Python: it imports neither torch nor mypy.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import List, Mapping, Sequence, Tuple

from .collectives import CollectiveError
from .collectives import plan as primitive_plan
from .redistribute_layout import (
    Box,
    Layout,
    MeshItems,
    RedistributeError,
    Shape,
    check_divisible,
    coarse,
    global_shape,
    grad_spmd,
    grad_layout,
    layout_of,
    local_shape,
    mesh_items,
    prod,
    refined,
    shape_tuple,
)
from .redistribute_steps import Piece, RedistStep, backward_op, exchange_pieces, make_step, step_recv_vector, total_recv
from .spec import Spmd

__all__ = [
    "plan_redistribute",
    "RedistPlan",
    "RedistStep",
    "RedistributeError",
    "Piece",
    "Box",
    "exchange_pieces",
    "global_shape",
    "local_shape",
    "grad_spmd",
]


class RedistPlan:
    """A redistribute plan: the steps, and the volume each device receives.

    Immutable.  `max_recv_elements` is the most elements any one device
    receives over the whole plan (see the module docstring for the
    accounting); `volume` is that in units of the full tensor.
    """

    __slots__ = ("src", "dst", "shape", "mesh", "steps", "max_recv_elements", "notes", "base_mesh")

    src: Spmd
    dst: Spmd
    shape: Shape
    mesh: MeshItems
    steps: Tuple[RedistStep, ...]
    max_recv_elements: int
    notes: Tuple[str, ...]
    base_mesh: MeshItems  # the mesh asked for; `mesh` splits it at the sub-axes src and dst name

    def __init__(
        self,
        src: Spmd,
        dst: Spmd,
        shape: Shape,
        mesh: MeshItems,
        steps: Tuple[RedistStep, ...],
        max_recv_elements: int,
        notes: Tuple[str, ...] = (),
        base_mesh: MeshItems = (),
    ) -> None:
        for name, value in (
            ("src", src),
            ("dst", dst),
            ("shape", tuple(shape)),
            ("mesh", tuple(mesh)),
            ("steps", tuple(steps)),
            ("max_recv_elements", max_recv_elements),
            ("notes", tuple(notes)),
            ("base_mesh", tuple(base_mesh) or tuple(mesh)),
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
        return prod(self.shape)

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
            src_l = grad_layout(layout_of(s.dst, "dst", self.shape, names))
            dst_l = grad_layout(layout_of(s.src, "src", self.shape, names))
            op = backward_op(s)
            steps.append(make_step(op, s.axes, src_l, dst_l, self.shape, sizes, names)[0])
        total = total_recv(
            [step_recv_vector(st, self.shape, self.mesh) for st in steps], self.mesh
        )
        return RedistPlan(
            grad_spmd(self.dst, dict(self.mesh)), grad_spmd(self.src, dict(self.mesh)), self.shape,
            self.mesh, tuple(steps), total, (), self.base_mesh,
        )

    def text(self) -> str:
        mesh = ", ".join(f"{a}={n}" for a, n in self.mesh)
        n = self.numel
        if self.base_mesh != self.mesh:
            base = ", ".join(f"{a}={n}" for a, n in self.base_mesh)
            mesh += f"; mesh ({base}) split at the sub-axes"
        lines = [
            f"redistribute shape {list(self.shape)} on mesh ({mesh})",
            f"  from {coarse(self.src, self.base_mesh)}",
            f"  to   {coarse(self.dst, self.base_mesh)}",
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


class _Builder:
    """Accumulates steps and the per-device received elements of a candidate plan."""

    def __init__(self, shape: Shape, mesh: MeshItems) -> None:
        self.shape = shape
        self.mesh = mesh
        self.sizes = dict(mesh)
        self.names = [a for a, _ in mesh]
        self.steps: List[RedistStep] = []
        self.vectors: List[List[int]] = []

    def add(self, op: str, axes: Sequence[str], before: Layout, after: Layout) -> Layout:
        bad = check_divisible(after, self.shape, self.sizes)
        if bad is not None:
            raise _NotDivisible(bad)
        step, vec = make_step(op, axes, before, after, self.shape, self.sizes, self.names)
        self.steps.append(step)
        self.vectors.append(vec)
        return after

    def key(self, preference: int) -> Tuple[int, int, int]:
        return (total_recv(self.vectors, self.mesh), sum(s.is_collective for s in self.steps), preference)


class _NotDivisible(Exception):
    pass


def _mesh_order(names: Sequence[str], axes: Sequence[str]) -> bool:
    idx = [names.index(a) for a in axes]
    return idx == sorted(idx)


def _slice(b: _Builder, cur: Layout, dst: Layout) -> Layout:
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


def _pre_phase(b: _Builder, src: Layout, dst: Layout, scatter: bool, slices: str) -> Layout:
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


def _exchange_axes(cur: Layout, dst: Layout, names: Sequence[str]) -> List[str]:
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


def _move(b: _Builder, cur: Layout, target: Layout) -> Layout:
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


def _layout_standard(b: _Builder, cur: Layout, dst: Layout) -> Layout:
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


def _layout_exchange(b: _Builder, cur: Layout, dst: Layout) -> Layout:
    if cur == dst:
        return cur
    axes = _exchange_axes(cur, dst, b.names)
    if any("I" in (cur.kind(a), dst.kind(a)) for a in axes):
        raise _NotApplicable()
    return b.add("exchange", axes, cur, dst)


class _NotApplicable(Exception):
    pass


def _candidates(src: Layout, dst: Layout, shape: Shape, mesh: MeshItems) -> List[Tuple[Tuple[int, int, int], _Builder]]:
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


def _validate_axes(src: Layout, dst: Layout, src_spmd: Spmd, dst_spmd: Spmd, names: Sequence[str]) -> None:
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
    n = prod(shape)
    world = prod(size for _, size in mesh)
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
    src_l = layout_of(src, "src", shape, names)
    dst_l = layout_of(dst, "dst", shape, names)
    for layout in (src_l, dst_l):
        bad = check_divisible(layout, shape, sizes)
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
            f"standard collectives ({ops}) receive the same {_frac(key[0], prod(shape))} N in "
            f"{standard[0][1]} collectives; the exchange needs {key[1]}",
        )
    return RedistPlan(src_l.spmd(), dst_l.spmd(), shape, mesh, tuple(best.steps), key[0], notes)


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
    items = mesh_items(mesh)
    fine, (src, dst) = refined(items, [src, dst])
    plan = _plan_cached(src, dst, shape_tuple(shape), fine)
    if fine == items:
        return plan
    return RedistPlan(plan.src, plan.dst, plan.shape, plan.mesh, plan.steps, plan.max_recv_elements, plan.notes, items)
