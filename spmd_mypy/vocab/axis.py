"""`Axis`: the mesh axis a ProcessGroup stands for, written in an annotation.

    TpGroup = Annotated[ProcessGroup, Axis("tp")]
    def get_tensor_model_parallel_group() -> TpGroup: ...

At runtime an annotation is inert (nothing reads it); the checker reads it
like `Spmd(...)` and then types a collective whose axis argument is such a
group as if the axis name had been written.  Several names (`Axis("dp",
"tp")`) stand for the flattened group of those axes, in mesh order.
"""

from __future__ import annotations

from typing import Tuple, Union

__all__ = ["Axis", "axis_names", "axis_text", "parse_axis_text"]


class Axis:
    """The mesh axis (or axes, flattened in mesh order) a ProcessGroup stands for."""

    __slots__ = ("names",)

    def __init__(self, *names: str) -> None:
        if not names or not all(isinstance(n, str) and n.isidentifier() for n in names):
            raise ValueError(f"Axis takes one or more axis names, e.g. Axis('tp'); got {names!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"Axis names an axis twice: {names!r}")
        self.names: Tuple[str, ...] = tuple(names)

    def __repr__(self) -> str:
        return f"Axis({', '.join(repr(n) for n in self.names)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Axis) and other.names == self.names

    def __hash__(self) -> int:
        return hash(("Axis", self.names))


def axis_text(names: Tuple[str, ...]) -> str:
    """The canonical text of a group's axes (the checker's carrier literal): 'tp', 'dp,tp'."""
    return ",".join(names)


def parse_axis_text(text: str) -> Tuple[str, ...]:
    return tuple(text.split(","))


def axis_names(axis: Union[str, Tuple[str, ...]]) -> Tuple[str, ...]:
    """The axis names an axis argument stands for: one name, or the tuple of
    a flattened group's ("tp" -> ("tp",), ("dp", "tp") -> itself)."""
    return axis if isinstance(axis, tuple) else (axis,)
