"""The steps of a redistribute plan and what each device receives in them.

A `RedistStep` is one collective (or a local convert) over a flattened group
of mesh axes; a `Piece` is one box an exchange sends.  `make_step` builds a
step between two layouts and counts the elements every device receives in it
(the accounting of redistribute_plan.py's docstring: comm_volume.py's table);
`backward_op` is the op of its backward.

This module is pure Python: it imports neither torch nor mypy.
"""

from __future__ import annotations

import functools
import itertools
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .collectives import backward_step
from .comm_volume import received_elements
from .collectives import plan as primitive_plan
from .localtype import AxisType, Shard, V
from .redistribute_layout import (
    Box,
    Layout,
    MeshItems,
    Shape,
    grad_layout,
    layout_of,
    local_shape_of,
    prod,
    tile,
)
from .spec import Spmd

__all__ = [
    "COLLECTIVE_OPS",
    "RedistStep",
    "Piece",
    "exchange_pieces",
    "step_recv_vector",
    "total_recv",
    "make_step",
    "backward_op",
]

COLLECTIVE_OPS = frozenset(
    {"all_gather", "reduce_scatter", "all_reduce", "all_to_all", "permute", "exchange"}
)


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
        return prod(n for _, n in self.src_box)


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


def step_recv_vector(step: RedistStep, shape: Shape, mesh: MeshItems) -> List[int]:
    """Elements each device (mesh-order rank) receives in this step."""
    devices = _device_coords(mesh)
    if step.op in ("permute", "exchange"):
        per_group = _exchange_recv(exchange_pieces(step.src, step.dst, step.axes, shape, mesh), step.axes, mesh)
        sizes = dict(mesh)
        return [per_group[_group_coord(c, step.axes, sizes)] for c in devices]
    sizes = dict(mesh)
    g = prod(sizes[a] for a in step.axes)
    names = [a for a, _ in mesh]
    local_in = prod(local_shape_of(layout_of(step.src, "src", shape, names), shape, sizes))
    return [received_elements(step.op, g, local_in)] * len(devices)


def _exchange_recv(pieces: Sequence[Piece], axes: Sequence[str], mesh: MeshItems) -> List[int]:
    sizes = dict(mesh)
    out = [0] * prod(sizes[a] for a in axes)
    for p in pieces:
        if p.sender != p.receiver:
            out[p.receiver] += p.numel
    return out


def total_recv(vectors: Sequence[Sequence[int]], mesh: MeshItems) -> int:
    world = prod(n for _, n in mesh)
    totals = [0] * world
    for v in vectors:
        for k, x in enumerate(v):
            totals[k] += x
    return max(totals) if totals else 0


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
    src_l = layout_of(src, "src", shape, names)
    dst_l = layout_of(dst, "dst", shape, names)
    if any("P" in (src_l.kind(a), dst_l.kind(a)) for a in axes):
        # A gradient's exchange: the exchange of the forward types, reversed
        # (its receivers sum what arrives for one element).
        fwd = exchange_pieces(
            grad_layout(dst_l).spmd(), grad_layout(src_l).spmd(), axes, shape, mesh
        )
        return tuple(sorted(Piece(p.receiver, p.sender, p.dst_box, p.src_box) for p in fwd))
    replicated = [a for a in axes if src_l.kind(a) != "S"]  # the sender copies them
    g = prod(sizes[a] for a in axes)
    coords = []
    for c in itertools.product(*[range(sizes[a]) for a in axes]):
        full = {a: 0 for a in names}
        full.update(zip(axes, c))
        coords.append(full)
    src_tiles = [tile(src_l, shape, sizes, c) for c in coords]
    dst_tiles = [tile(dst_l, shape, sizes, c) for c in coords]
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


def make_step(
    op: str,
    axes: Sequence[str],
    before: Layout,
    after: Layout,
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
    vec = step_recv_vector(probe, shape, mesh)
    return probe._replace(recv=max(vec) if vec else 0), vec


def backward_op(step: RedistStep) -> str:
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
