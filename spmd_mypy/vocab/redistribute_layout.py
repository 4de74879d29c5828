"""Layouts of the spec-level redistribute: a global SPMD type as plain data.

A `Layout` says, per dim, which mesh axes shard it (major to minor) and, for
every other mesh axis, its letter (R, I or P).  Here also: shapes and mesh
items as tuples, the tile a device holds, local and global shapes, and the
gradient's layout.  The planner (redistribute_plan.py) and the receive counts
(redistribute_steps.py) work on layouts.

This module is pure Python: it imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .collectives import CollectiveError
from .localtype import BY_LETTER, AxisType, Shard, V, grad_type
from .spec import PartitionSpec, SpecError, Spmd
from .subaxis import base_axis, is_sub_axis, merge_dim, parse_axis_ref, refine_mesh

__all__ = [
    "Shape",
    "MeshItems",
    "Box",
    "RedistributeError",
    "Layout",
    "layout_of",
    "check_divisible",
    "prod",
    "local_shape_of",
    "tile",
    "grad_layout",
    "mesh_items",
    "shape_tuple",
    "global_shape",
    "local_shape",
    "grad_spmd",
    "refined",
    "coarse",
]

Shape = Tuple[int, ...]
MeshItems = Tuple[Tuple[str, int], ...]
Box = Tuple[Tuple[int, int], ...]  # (start, length) per dim


class RedistributeError(CollectiveError):
    """A spec-level redistribute that is invalid or cannot be planned for this shape."""


class Layout(NamedTuple):
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

    def with_dims(self, dims: Sequence[Sequence[str]], kinds: Mapping[str, str], names: Sequence[str]) -> "Layout":
        """A layout with these dims; axes not in them take `kinds`, else keep their letter."""
        new_dims = tuple(tuple(d) for d in dims)
        in_dims = {a for d in new_dims for a in d}
        old = dict(self.other)
        other = tuple(
            (a, kinds.get(a, old.get(a, "R"))) for a in names if a not in in_dims
        )
        return Layout(new_dims, other)

    def spmd(self) -> Spmd:
        spec = PartitionSpec.of_parts(*[(d[0] if len(d) == 1 else d) if d else None for d in self.dims])
        return Spmd.of({a: BY_LETTER[k] for a, k in self.other if k != "R"}, spec)


def layout_of(spmd: Spmd, which: str, shape: Shape, names: Sequence[str]) -> Layout:
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
    return Layout(tuple(tuple(d) for d in dims), tuple(other))


def check_divisible(layout: Layout, shape: Shape, sizes: Mapping[str, int]) -> Optional[str]:
    for j, d in enumerate(layout.dims):
        n = prod(sizes[a] for a in d)
        if shape[j] % n:
            return (
                f"dim {j} has size {shape[j]}, not divisible by {n} (the product of the sizes of "
                f"the axes {d} that shard it in {layout.spmd()})"
            )
    return None


def prod(xs: Iterable[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def local_shape_of(layout: Layout, shape: Shape, sizes: Mapping[str, int]) -> Shape:
    return tuple(shape[j] // prod(sizes[a] for a in d) for j, d in enumerate(layout.dims))


def tile(layout: Layout, shape: Shape, sizes: Mapping[str, int], coords: Mapping[str, int]) -> Box:
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


def grad_layout(layout: Layout) -> Layout:
    """The layout of the gradient: the same dims, each other axis's gradient type."""
    return Layout(layout.dims, tuple((a, str(grad_type(BY_LETTER[k]))) for a, k in layout.other))


def mesh_items(mesh: Any) -> MeshItems:
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


def shape_tuple(shape: object) -> Shape:
    try:
        out = tuple(int(s) for s in shape)  # type: ignore[attr-defined]
    except TypeError:
        raise RedistributeError(f"spmd.plan_redistribute: shape is a tuple of ints, got {shape!r}") from None
    if any(s < 0 for s in out):
        raise RedistributeError(f"spmd.plan_redistribute: negative size in shape {out}")
    return out


def refined(items: MeshItems, spmds: Sequence[Spmd]) -> Tuple[MeshItems, Tuple[Spmd, ...]]:
    """The mesh split at the sub-axes the types name, and the types on it.

    A sub-axis x:(m)k is a part of axis x: splitting x at every boundary of
    the sub-axes named gives a mesh of whole axes over the same devices in
    the same order (x's parts major first, named by their sub-axis text), on
    which each sub-axis, and x itself, is a run of parts.  Types without
    sub-axes come back unchanged.
    """
    texts = {a for s in spmds for a in s.axes}
    if not any(is_sub_axis(a) for a in texts):
        return items, tuple(spmds)
    try:
        new_items, cover = refine_mesh(items, texts)
    except ValueError as e:
        raise RedistributeError(f"spmd.redistribute: {e}") from None
    out = []
    for s in spmds:
        if s.spec is None:
            raise RedistributeError(f"spmd.redistribute: {s} names a sub-axis; write it in the spec form")
        dims = [tuple(p for a in d for p in cover.get(a, (a,))) for d in s.spec.dims]
        axes = {p: t for a, t in s.axes.items() if a not in s.spec.axes for p in cover.get(a, (a,))}
        try:
            spec = PartitionSpec.of_parts(*[d if d else None for d in dims])
            out.append(Spmd.of(axes, spec, s.nograd))
        except SpecError as e:
            raise RedistributeError(f"spmd.redistribute: {s}: {e}") from None
    return new_items, tuple(out)


def coarse(spmd: Spmd, items: MeshItems) -> Spmd:
    """A type on a split mesh written on the mesh `items` again: adjacent parts
    of one axis merged into the sub-axis (or the axis) they make up."""
    if spmd.spec is None or not any(is_sub_axis(a) for a in spmd.axes):
        return spmd
    sizes = dict(items)
    dims = [merge_dim(d, sizes) for d in spmd.spec.dims]
    by_type: Dict[AxisType, List[str]] = {}
    for a, t in spmd.axes.items():
        if a not in spmd.spec.axes:
            by_type.setdefault(t, []).append(a)
    axes: Dict[str, AxisType] = {}
    for t, names in by_type.items():
        names.sort(key=lambda a: (base_axis(a), parse_axis_ref(a).pre))
        axes.update((a, t) for a in merge_dim(names, sizes))
    return Spmd.of(axes, PartitionSpec(*[d if d else None for d in dims]), spmd.nograd)


def global_shape(spmd: Spmd, local: Sequence[int], mesh: Mapping[str, int]) -> Shape:
    """The global shape of a tensor of type `spmd` whose local shape is `local`."""
    items, (spmd,) = refined(mesh_items(mesh), [spmd])
    sizes = dict(items)
    layout = layout_of(spmd, "src", tuple(local), [a for a, _ in items])
    return tuple(n * prod(sizes[a] for a in d) for n, d in zip(local, layout.dims))


def local_shape(spmd: Spmd, shape: Sequence[int], mesh: Mapping[str, int]) -> Shape:
    """The local shape of a tensor of type `spmd` and global shape `shape`."""
    items, (spmd,) = refined(mesh_items(mesh), [spmd])
    layout = layout_of(spmd, "spmd", tuple(shape), [a for a, _ in items])
    return local_shape_of(layout, tuple(shape), dict(items))


def grad_spmd(spmd: Spmd, mesh: Mapping[str, int]) -> Spmd:
    """The type of the gradient of a tensor of (spec-form) type `spmd`: R <-> P, I and S stay."""
    items = mesh_items(mesh)
    assert spmd.spec is not None, "grad_spmd takes the spec form"
    layout = layout_of(spmd, "spmd", (0,) * len(spmd.spec), [a for a, _ in items])
    return grad_layout(layout).spmd()
