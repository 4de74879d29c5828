"""Per-axis local SPMD types: R, I, V, P and S(i) (and PS(i)/PSA(i), seed 004).

On one mesh axis a tensor is Replicate, Invariant, Varying or Partial.  S(i)
is Varying with the extra promise that the per-rank tensors are the shards of
tensor dim i (concatenation, not stacking); in local SPMD it types exactly
like V.

This module is pure Python: it imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import Final, Optional, Union

__all__ = [
    "LocalType",
    "Shard",
    "AxisType",
    "R",
    "I",
    "V",
    "P",
    "S",
    "PartitionedShard",
    "PS",
    "PSA",
    "BY_LETTER",
    "grad_type",
    "kind",
    "local_kind",
    "parse_axis_type",
    "normalize_dim",
]


class LocalType:
    """One of the four local SPMD types.  There are exactly four instances."""

    __slots__ = ("letter", "name")

    def __init__(self, letter: str, name: str) -> None:
        self.letter = letter
        self.name = name

    def __repr__(self) -> str:
        return self.letter

    __str__ = __repr__

    def __reduce__(self) -> str:
        # Pickle (for spawned processes) must hand back the singleton.
        return self.letter

    @property
    def is_varying(self) -> bool:
        return self is V


class Shard:
    """S(i): varying on the axis, and the per-rank tensors shard tensor dim i."""

    __slots__ = ("dim",)
    dim: int

    def __init__(self, dim: int) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"S(dim) takes an int tensor dim, got {dim!r}")
        object.__setattr__(self, "dim", dim)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("S(i) is immutable")

    def __eq__(self, other: object) -> bool:
        # type(...) is: a PartitionedShard of the same dim is another layout.
        return type(other) is type(self) and other.dim == self.dim  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(("S", self.dim))

    def __repr__(self) -> str:
        return f"S({self.dim})"

    __str__ = __repr__

    def __reduce__(self) -> tuple[type, tuple[int]]:
        return (Shard, (self.dim,))

    @property
    def is_varying(self) -> bool:
        return True

    def normalized(self, ndim: int) -> "Shard":
        """This shard with a negative dim resolved against a tensor of rank ndim."""
        return Shard(normalize_dim(self.dim, ndim))


class PartitionedShard(Shard):
    """PS(i) / PSA(i): S(i) whose dim is cut into partitions of sizes known only
    at runtime (seed 004; vocab/partitioned.py has the layouts).

    Unaligned (PS): every rank holds its own slice of every partition, in
    partition order.  Aligned (PSA): every rank holds whole partitions (its
    num_partitions / n of them).  Statically the layout is opaque: two PS
    values meet only if they have the same dim and alignment, and the dim is
    never reshaped, split or concatenated.  A subclass of Shard: wherever the
    rules only ask "does it vary per rank", it is an S(i)."""

    __slots__ = ("aligned",)
    aligned: bool

    def __init__(self, dim: int, aligned: bool = False) -> None:
        super().__init__(dim)
        if not isinstance(aligned, bool):
            raise TypeError(f"PS(dim, aligned=...) takes True or False, got {aligned!r}")
        object.__setattr__(self, "aligned", aligned)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, PartitionedShard) and other.dim == self.dim and other.aligned == self.aligned
        )

    def __hash__(self) -> int:
        return hash(("PS", self.dim, self.aligned))

    def __repr__(self) -> str:
        return f"{'PSA' if self.aligned else 'PS'}({self.dim})"

    __str__ = __repr__

    def __reduce__(self) -> tuple[type, tuple[int, bool]]:  # type: ignore[override]
        return (PartitionedShard, (self.dim, self.aligned))

    def normalized(self, ndim: int) -> "PartitionedShard":
        return PartitionedShard(normalize_dim(self.dim, ndim), self.aligned)


PS = PartitionedShard


def PSA(dim: int) -> PartitionedShard:  # noqa: N802 - a type's name
    """The aligned partitioned shard of tensor dim `dim`: PS(dim, aligned=True)."""
    return PartitionedShard(dim, True)


AxisType = Union[LocalType, Shard]

R: Final = LocalType("R", "Replicate")
I: Final = LocalType("I", "Invariant")  # noqa: E741 - the design's own letter
V: Final = LocalType("V", "Varying")
P: Final = LocalType("P", "Partial")
S = Shard

# Letter -> local type: the one table every reader of a letter uses.
BY_LETTER: Final = {"R": R, "I": I, "V": V, "P": P}

# Forward type -> type of its gradient (the design's forward/backward table).
# S(i) keeps its dim: the gradient of a shard is the same shard.
_GRAD: Final = {R: P, P: R, I: I, V: V}


def grad_type(t: AxisType) -> AxisType:
    """The type of the gradient of a tensor of type t (R<->P, I->I, V->V, S(i)->S(i))."""
    if isinstance(t, Shard):
        return t
    return _GRAD[t]


def kind(t: AxisType) -> str:
    """The letter used to key rule tables: 'R', 'I', 'V', 'P' or 'S'."""
    return "S" if isinstance(t, Shard) else t.letter


def local_kind(t: Optional[AxisType]) -> Optional[str]:
    """The local type a value has on an axis, as a letter: 'R', 'I', 'V' or 'P'
    (S(i) is V: a shard differs per rank); None for None (no type on the axis).
    The letter checks compare: a claim of V fits a value that is S(i)."""
    if t is None:
        return None
    return "V" if isinstance(t, Shard) else t.letter


def normalize_dim(dim: int, ndim: int) -> int:
    """Resolve a possibly negative dim against rank ndim, or raise IndexError."""
    if not -ndim <= dim < ndim:
        raise IndexError(f"dim {dim} is out of range for a tensor of rank {ndim}")
    return dim + ndim if dim < 0 else dim


def parse_axis_type(text: str) -> AxisType:
    """Parse 'R', 'I', 'V', 'P' or 'S(<int>)' (the canonical per-axis form)."""
    t = text.strip()
    found = BY_LETTER.get(t)
    if found is not None:
        return found
    for prefix, make in (("S(", Shard), ("PS(", PartitionedShard), ("PSA(", PSA)):
        if t.startswith(prefix) and t.endswith(")"):
            try:
                return make(int(t[len(prefix):-1].strip()))
            except ValueError:
                pass
    raise ValueError(f"not a local SPMD type: {text!r} (expected R, I, V, P, S(<dim>), PS(<dim>) or PSA(<dim>))")
