"""The current device mesh, and resolution of an axis argument to a communicator.

An axis argument is a mesh dim name ("tp"), a tuple of names in mesh order
(("dp", "tp"): one collective over the flattened group, dp major), or a
ProcessGroup.  A name may be a sub-axis "tp:(1)2" (vocab/subaxis.py): the
sub-group of the ranks that differ only in that part of their tp coordinate,
from the mesh split at the sub-axes named.  Resolution is cached per mesh, so the hot path of a collective
is one dictionary lookup.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Optional, Tuple, Union

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from ..vocab.axis import axis_names
from ..vocab.collectives import CollectiveError
from ..vocab.subaxis import base_axis, is_sub_axis, parse_axis_ref, refine_mesh
from ._local import simulated_group_coord

__all__ = ["set_mesh", "current_mesh", "Comm", "DeferredComm", "resolve_axis", "resolve_axis_lazily", "AxisArg", "prepare_axes"]

AxisArg = Union[str, Tuple[str, ...], dist.ProcessGroup]

_MESH: contextvars.ContextVar[Optional[DeviceMesh]] = contextvars.ContextVar(
    "spmd_mypy_mesh", default=None
)
# Dynamo cannot trace a ContextVar, so code under torch.compile reads the same
# meshes from this plain stack, which set_mesh keeps in step (Dynamo guards on
# the mesh it reads, so switching meshes recompiles).  Only threads that each
# set their own mesh around compiled code can tell the two apart.
_TRACED: list[DeviceMesh] = []


@contextlib.contextmanager
def set_mesh(mesh: DeviceMesh) -> Iterator[DeviceMesh]:
    """Within the block, axis names resolve against `mesh` (a DeviceMesh with named dims)."""
    if not isinstance(mesh, DeviceMesh) or not mesh.mesh_dim_names:
        raise TypeError("spmd.set_mesh takes a DeviceMesh with named dims (mesh_dim_names=...)")
    if torch.compiler.is_compiling():  # set_mesh inside the compiled function
        _TRACED.append(mesh)
        try:
            yield mesh
        finally:
            _TRACED.pop()
        return
    token = _MESH.set(mesh)
    _TRACED.append(mesh)
    try:
        yield mesh
    finally:
        _TRACED.pop()
        _MESH.reset(token)


def current_mesh() -> Optional[DeviceMesh]:
    if torch.compiler.is_compiling():
        return _TRACED[-1] if _TRACED else None
    return _MESH.get()


class Comm:
    """A communicator for one axis or one flattened group of axes."""

    __slots__ = ("group", "size", "label", "_mesh", "_axes")

    def __init__(
        self,
        group: dist.ProcessGroup,
        size: int,
        label: Union[str, Tuple[str, ...]],
        mesh: Optional[DeviceMesh],
        axes: Tuple[str, ...],
    ) -> None:
        self.group = group
        self.size = size
        self.label = label
        self._mesh = mesh
        self._axes = axes

    def coord(self) -> int:
        """This rank's index in the group (a per-rank symbolic int on simulated ranks)."""
        mesh = self._mesh
        if mesh is None:
            c = simulated_group_coord(self.group)
            return dist.get_rank(self.group) if c is None else c
        c = 0
        for a in self._axes:
            c = c * mesh.size(_dim_names(mesh).index(a)) + mesh.get_local_rank(a)
        return c

    def __repr__(self) -> str:
        return f"Comm({self.label!r}, size={self.size})"


def _dim_names(mesh: DeviceMesh) -> Tuple[str, ...]:
    return tuple(mesh.mesh_dim_names or ())


# (id(mesh), axis) -> Comm.  DeviceMeshes live as long as the program; the
# mesh object is kept in the value so its id cannot be reused while cached.
_CACHE: dict[tuple[int, object], tuple[DeviceMesh, Comm]] = {}


def _resolve_names(mesh: DeviceMesh, axis: Union[str, Tuple[str, ...]]) -> Comm:
    names = _dim_names(mesh)
    axes = axis_names(axis)
    if not axes:
        raise CollectiveError("an empty tuple of axes names no communicator")
    if any(isinstance(a, str) and is_sub_axis(a) for a in axes):
        mesh, axes = _split_mesh(mesh, axes)
        names = _dim_names(mesh)
    for a in axes:
        if not isinstance(a, str) or a not in names:
            raise CollectiveError(f"{a!r} is not a dim of the current mesh (dims: {names})")
    if len(set(axes)) != len(axes):
        raise CollectiveError("an axis is named twice")
    if len(axes) == 1:
        group = mesh.get_group(axes[0])
        return Comm(group, mesh.size(names.index(axes[0])), axis, mesh, axes)
    if list(axes) != sorted(axes, key=names.index):
        raise CollectiveError(
            f"name the axes in mesh order {tuple(a for a in names if a in axes)} "
            f"(the flattened group is ordered major to minor)"
        )
    if torch.compiler.is_compiling():  # a new group cannot be created in a trace
        return _flattened(mesh, tuple(axes))
    flat = mesh[axes]._flatten()  # private DeviceMesh API: a group over several dims
    size = 1
    for a in axes:
        size *= mesh.size(names.index(a))
    comm = Comm(flat.get_group(), size, axis, mesh, axes)
    if not any(m is mesh and a == tuple(axes) for m, a, _ in _FLATTENED):
        _FLATTENED.append((mesh, tuple(axes), comm))
    return comm


# Meshes split at sub-axes: (mesh, split mesh's (name, size) items, split DeviceMesh).
_SPLIT: list[tuple[DeviceMesh, Tuple[Tuple[str, int], ...], DeviceMesh]] = []


def _split_mesh(mesh: DeviceMesh, axes: Tuple[str, ...]) -> Tuple[DeviceMesh, Tuple[str, ...]]:
    """The mesh with its axes split at these sub-axes (x:(m)k: the devices of x
    reshaped to [m, k, n/(m*k)]), and the parts that make up `axes`, in order.

    The split mesh lists the same ranks in the same order, so a part's group is
    the sub-group of its mesh axis: the ranks that differ only in that digit of
    their coordinate along the axis.  Made once per mesh and split (creating
    its groups is collective: every rank resolves the same names in step)."""
    names = _dim_names(mesh)
    items = tuple((a, mesh.size(i)) for i, a in enumerate(names))
    for a in axes:
        if not isinstance(a, str) or base_axis(a) not in names:
            raise CollectiveError(f"{a!r} is not a dim of the current mesh or a sub-axis of one (dims: {names})")
    try:
        fine, cover = refine_mesh(items, axes)
    except ValueError as e:
        raise CollectiveError(str(e)) from None
    parts = tuple(p for a in axes for p in cover[parse_axis_ref(a).text()])
    for m, f, split in _SPLIT:
        if m is mesh and f == fine:
            return split, parts
    if torch.compiler.is_compiling():
        raise CollectiveError(
            f"under torch.compile, the sub-axes {axes} need their groups made beforehand: run one "
            f"collective on them outside the compiled code first, or call "
            f"spmd_mypy.runtime.mesh.prepare_axes(mesh, {axes})"
        )
    ranks = mesh.mesh.reshape([n for _, n in fine])
    split = DeviceMesh(mesh.device_type, ranks, mesh_dim_names=tuple(a for a, _ in fine))
    _SPLIT.append((mesh, fine, split))
    return split, parts


# Flattened groups made by eager calls, for compiled code (a list: Dynamo traces `is`).
_FLATTENED: list[tuple[DeviceMesh, Tuple[str, ...], Comm]] = []


def _flattened(mesh: DeviceMesh, axes: Tuple[str, ...]) -> Comm:
    for m, a, comm in _FLATTENED:
        if m is mesh and a == axes:
            return comm
    raise CollectiveError(
        f"under torch.compile, the axes {axes} need their flattened group made beforehand: "
        f"run one collective on them outside the compiled code first, or call "
        f"spmd_mypy.runtime.mesh.prepare_axes(mesh, {axes})"
    )


def prepare_axes(mesh: DeviceMesh, *axes: Tuple[str, ...]) -> None:
    """Make the flattened group of each tuple of axes now (for code compiled later)."""
    for a in axes:
        _resolve_names(mesh, a)


def _resolve_group(mesh: Optional[DeviceMesh], group: dist.ProcessGroup) -> Comm:
    size = dist.get_world_size(group)
    if mesh is not None:
        # A mesh dim's own group: use the mesh coordinate (works on simulated ranks).
        for a in _dim_names(mesh):
            if mesh.get_group(a) is group:
                return Comm(group, size, a, mesh, (a,))
    return Comm(group, size, f"group of size {size}", None, ())


def resolve_axis(axis: AxisArg) -> Comm:
    mesh = current_mesh()
    if torch.compiler.is_compiling():  # resolved once per trace: no cache to guard on
        return _resolve(mesh, axis)
    key = (id(mesh), axis if not isinstance(axis, dist.ProcessGroup) else id(axis))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is mesh:
        return hit[1]
    comm = _resolve(mesh, axis)
    _CACHE[key] = (mesh, comm)  # type: ignore[assignment]
    return comm


def _resolve(mesh: Optional[DeviceMesh], axis: AxisArg) -> Comm:
    if isinstance(axis, dist.ProcessGroup):
        return _resolve_group(mesh, axis)
    if isinstance(axis, (str, tuple)):
        if mesh is None:
            raise CollectiveError("no mesh is set; wrap the code in `with spmd.set_mesh(mesh):`")
        return _resolve_names(mesh, axis)
    raise CollectiveError(
        f"the axis argument is a mesh dim name, a tuple of names or a ProcessGroup; got {axis!r}"
    )


class DeferredComm(Comm):
    """The communicator of an axis name used with no mesh set, resolved on first
    use: a reinterpret or convert whose steps neither communicate nor need the
    rank (`reinterpret(x, "tp", src=V, dst=P)`, forward and backward) runs
    without a mesh; a step that needs the group, its size or this rank's
    coordinate resolves the name then (a mesh may be set by then) or raises
    CollectiveError saying what to do."""

    __slots__ = ("_name", "_done", "_where")

    def __init__(self, axis: Union[str, Tuple[str, ...]], where: str = "") -> None:
        self._name = axis
        self._done: Optional[Comm] = None
        self._where = where
        self.label = axis

    def resolved(self) -> Comm:
        if self._done is None:
            if current_mesh() is None:
                raise CollectiveError(
                    (f"{self._where}: " if self._where else "")
                    + f"axis {self._name!r} is a mesh dim name, and this step needs its communicator "
                    f"(its size, this rank's coordinate or a collective) but no mesh is set: wrap the "
                    f"code in `with spmd.set_mesh(mesh):`, or pass the axis's ProcessGroup instead of "
                    f"its name"
                )
            self._done = resolve_axis(self._name)
        return self._done

    @property
    def group(self) -> dist.ProcessGroup:  # type: ignore[override]
        return self.resolved().group

    @property
    def size(self) -> int:  # type: ignore[override]
        return self.resolved().size

    def coord(self) -> int:
        return self.resolved().coord()

    def __repr__(self) -> str:
        return f"DeferredComm({self._name!r})"


def resolve_axis_lazily(axis: AxisArg, where: str = "") -> Comm:
    """resolve_axis, except that a name (or tuple of names) with no mesh set gives
    a DeferredComm instead of an error (reinterpret and convert: see there);
    `where` names the call in its error."""
    if isinstance(axis, (str, tuple)) and current_mesh() is None:
        return DeferredComm(axis, where)
    return resolve_axis(axis)
