"""Sub-axes of a mesh axis, in Shardy's notation `"x":(m)k`.

A mesh axis "x" of size n can be viewed as the reshape [m, k, n/(m*k)] of
its devices; the middle part is the sub-axis x:(m)k.  `m` (the pre-size) is
the product of the sizes of the parts major to it, `k` (its size) is > 1.
A reshape that splits or merges a sharded dim needs them: [8@x] with x=4
viewed as (2, 4) keeps every element in place as [2@x:(1)2, 4@x:(2)2].

The text of a sub-axis is `x:(m)k` (Shardy quotes the name, `"x":(m)k`, and
`parse_axis_ref` accepts that too); it stands wherever a mesh axis name
stands in a PartitionSpec or a global type, so every rule that compares axis
names keeps working, and the few that need sizes or overlap ask here.

Invariants of the axes one type references (Shardy's):
  * no overlap: x:(1)4 and x:(2)4 share the part x:(2)2; "x" overlaps every
    sub-axis of x;
  * they coexist: two disjoint sub-axes are parts of one split of x (the
    later one's pre-size is a multiple of the end of the earlier);
  * maximal: two sub-axes adjacent in one dim, the second starting where the
    first ends (x:(1)2 then x:(2)4), are one sub-axis (x:(1)8), and a
    sub-axis covering all of x (x:(1)n) is "x".  `merge_dim` makes a dim
    maximal; `spec_violation` says which invariant a list of dims breaks.

This module is pure Python: it imports neither torch nor mypy.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, TypeVar

__all__ = [
    "AxisRef",
    "parse_axis_ref",
    "sub_axis_text",
    "is_sub_axis",
    "base_axis",
    "axis_size",
    "overlap",
    "spec_violation",
    "merge_dim",
    "keywords_violation",
    "merge_roles",
    "refine_mesh",
    "sub_coord",
    "indivisible_dim",
]

T = TypeVar("T")

# Compiled on first use (re's own cache): checking code with no sub-axis never parses one.
_REF = r'\s*"?([A-Za-z_][A-Za-z0-9_]*)"?\s*(?::\s*\(\s*(\d+)\s*\)\s*(\d+))?\s*\Z'


class AxisRef(NamedTuple):
    """A full mesh axis (size None: the mesh's) or its sub-axis name:(pre)size."""

    name: str
    pre: int = 1
    size: Optional[int] = None

    @property
    def full(self) -> bool:
        return self.size is None

    def text(self) -> str:
        return self.name if self.size is None else sub_axis_text(self.name, self.pre, self.size)

    def end(self, n: Optional[int] = None) -> Optional[int]:
        """pre * size: where the sub-axis ends (the full axis: n, or None when unknown)."""
        return n if self.size is None else self.pre * self.size


def sub_axis_text(name: str, pre: int, size: int) -> str:
    return f"{name}:({pre}){size}"


def is_sub_axis(text: str) -> bool:
    return ":" in text


def parse_axis_ref(text: str) -> AxisRef:
    """'x' -> AxisRef('x'); 'x:(2)4' or '"x":(2)4' -> AxisRef('x', 2, 4).  Raises ValueError."""
    m = re.match(_REF, text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(
            f"a mesh axis is a name ('tp') or a sub-axis name:(pre-size)size ('tp:(1)2'), got {text!r}"
        )
    name, pre, size = m.group(1), m.group(2), m.group(3)
    if pre is None:
        return AxisRef(name)
    if int(pre) < 1 or int(size) < 2:
        raise ValueError(
            f"sub-axis {text!r}: the pre-size is at least 1 and the size at least 2 "
            f"(a size-1 part shards nothing)"
        )
    return AxisRef(name, int(pre), int(size))


def base_axis(text: str) -> str:
    """The mesh axis a name or sub-axis belongs to ('x:(1)2' -> 'x')."""
    return text.split(":", 1)[0].strip().strip('"')


def axis_size(text: str, mesh: Mapping[str, int]) -> Optional[int]:
    """The number of devices along a mesh axis or sub-axis (None: unknown)."""
    if not is_sub_axis(text):
        return mesh.get(text)
    return parse_axis_ref(text).size


def overlap(a: AxisRef, b: AxisRef) -> bool:
    """Whether the two refer to some common part of one mesh axis."""
    if a.name != b.name:
        return False
    if a.full or b.full:
        return True
    return a.pre < b.pre * b.size and b.pre < a.pre * a.size  # type: ignore[operator]


def _coexist(a: AxisRef, b: AxisRef) -> bool:
    """Two disjoint sub-axes of one axis fit one split of it (divisibility of the boundaries)."""
    lo, hi = (a, b) if a.pre < b.pre else (b, a)
    return hi.pre % (lo.pre * lo.size) == 0  # type: ignore[operator]


def spec_violation(
    dims: Sequence[Sequence[str]],
    others: Iterable[str] = (),
    mesh: Optional[Mapping[str, int]] = None,
    maximal: bool = True,
) -> Optional[str]:
    """Why these dims (and the other axes the type names) break an invariant, or
    None.  maximal=False: the parts of a split mesh, where adjacent parts stay apart."""
    refs: List[Tuple[AxisRef, str]] = []
    for j, d in enumerate(dims):
        for k, text in enumerate(d):
            r = parse_axis_ref(text)
            refs.append((r, f"dim {j}"))
            if k and not r.full and maximal:
                prev = parse_axis_ref(d[k - 1])
                if prev.name == r.name and not prev.full and prev.end() == r.pre:
                    merged = sub_axis_text(r.name, prev.pre, prev.size * r.size)  # type: ignore[operator]
                    return (
                        f"{prev.text()} and {r.text()} are adjacent parts of one dim; write the "
                        f"single sub-axis {merged} (sub-axes are maximal)"
                    )
    refs += [(parse_axis_ref(t), "outside the dims") for t in others]
    for i, (a, wa) in enumerate(refs):
        n = None if mesh is None else mesh.get(a.name)
        if not a.full and n is not None:
            if n % (a.pre * a.size):  # type: ignore[operator]
                return f"sub-axis {a.text()} does not fit axis {a.name!r} of size {n}"
            if a.pre == 1 and a.size == n:
                return f"sub-axis {a.text()} is all of axis {a.name!r}; write {a.name!r}"
        for b, wb in refs[:i]:
            if overlap(a, b):
                same = a == b
                return (
                    f"{a.text()} ({wa}) "
                    + ("is named twice" if same else f"overlaps {b.text()} ({wb})")
                    + "; a mesh axis or part of one shards at most one dim"
                )
            if a.name == b.name and not _coexist(a, b):
                return f"sub-axes {b.text()} and {a.text()} are not parts of one split of {a.name!r}"
    return None


def keywords_violation(roles: Mapping[str, object]) -> Optional[str]:
    """Sub-axes outside the dims (pending sums, replicated, ...) are maximal too: two
    consecutive parts of one axis in one role are one sub-axis."""
    refs = sorted((parse_axis_ref(a), t) for a, t in roles.items() if is_sub_axis(a))
    for (a, ta), (b, tb) in zip(refs, refs[1:]):
        if a.name == b.name and ta == tb and a.end() == b.pre:
            merged = sub_axis_text(a.name, a.pre, a.size * b.size)  # type: ignore[operator]
            return f"{a.text()} and {b.text()} are both {ta}; write the single sub-axis {merged} (sub-axes are maximal)"
    return None


def merge_roles(roles: Mapping[str, T], mesh: Optional[Mapping[str, int]] = None) -> Dict[str, T]:
    """Sub-axes outside the dims in their maximal form: consecutive parts of one
    axis in the same role merged, and written as the axis when they cover it
    (mesh known).  A collective over one part can leave two such parts (I on
    x:(1)2 after I on x:(2)2 is I on x)."""
    out = {a: t for a, t in roles.items() if not is_sub_axis(a)}
    merged: List[Tuple[AxisRef, T]] = []
    for r, t in sorted(((parse_axis_ref(a), t) for a, t in roles.items() if is_sub_axis(a)), key=lambda p: p[0]):
        if merged and merged[-1][0].name == r.name and merged[-1][1] == t and merged[-1][0].end() == r.pre:
            last = merged.pop()[0]
            r = AxisRef(r.name, last.pre, last.size * r.size)  # type: ignore[operator]
        merged.append((r, t))
    for r, t in merged:
        n = None if mesh is None else mesh.get(r.name)
        out[r.name if (r.pre == 1 and r.size == n) else r.text()] = t
    return out


def merge_dim(axes: Sequence[str], mesh: Optional[Mapping[str, int]] = None) -> Tuple[str, ...]:
    """The maximal form of one dim's axes: adjacent consecutive sub-axes merged,
    and a sub-axis covering its whole axis (mesh known) written as the axis."""
    out: List[AxisRef] = []
    for text in axes:
        r = parse_axis_ref(text)
        if out and not r.full and not out[-1].full and out[-1].name == r.name and out[-1].end() == r.pre:
            last = out.pop()
            r = AxisRef(r.name, last.pre, last.size * r.size)  # type: ignore[operator]
        out.append(r)
    texts = []
    for r in out:
        n = None if mesh is None else mesh.get(r.name)
        texts.append(r.name if (not r.full and r.pre == 1 and r.size == n) else r.text())
    return tuple(texts)


def _boundaries(name: str, n: int, refs: Iterable[AxisRef]) -> List[int]:
    cuts = {1, n}
    for r in refs:
        if r.name == name and not r.full:
            cuts |= {r.pre, r.pre * r.size}  # type: ignore[operator]
    out = sorted(cuts)
    for lo, hi in zip(out, out[1:]):
        if hi % lo or n % hi:
            raise ValueError(f"the sub-axes of {name!r} (size {n}) do not fit one split of it: cuts {out}")
    return out


def refine_mesh(
    mesh: Sequence[Tuple[str, int]], texts: Iterable[str]
) -> Tuple[Tuple[Tuple[str, int], ...], Dict[str, Tuple[str, ...]]]:
    """Split every mesh axis at the boundaries of the sub-axes in `texts`.

    Returns the refined mesh (same devices in the same order: each axis
    replaced by its parts, major first, each named by its sub-axis text;
    an axis no sub-axis cuts keeps its name) and, for every axis and
    sub-axis in `texts` and every mesh axis, the parts it covers, major to minor.
    """
    refs = [parse_axis_ref(t) for t in set(texts)]
    items: List[Tuple[str, int]] = []
    parts: Dict[str, Tuple[str, ...]] = {}
    for name, n in mesh:
        cuts = _boundaries(name, n, refs)
        if len(cuts) == 2:  # no cut: every sub-axis named is x:(1)n, all of it
            items.append((name, n))
            parts[name] = (name,)
            parts.update((r.text(), (name,)) for r in refs if r.name == name)
            continue
        pieces = [(sub_axis_text(name, lo, hi // lo), lo, hi) for lo, hi in zip(cuts, cuts[1:])]
        items += [(t, hi // lo) for t, lo, hi in pieces]
        parts[name] = tuple(t for t, _, _ in pieces)
        for r in refs:
            if r.name == name and not r.full:
                parts[r.text()] = tuple(t for t, lo, hi in pieces if r.pre <= lo and hi <= r.pre * r.size)  # type: ignore[operator]
    for r in refs:
        if r.text() not in parts:
            raise ValueError(f"{r.text()!r}: {r.name!r} is not a mesh axis")
    return tuple(items), parts


def sub_coord(text: str, coord: int, n: int) -> int:
    """A device's coordinate along a sub-axis, from its coordinate along the full axis (size n)."""
    r = parse_axis_ref(text)
    if r.full:
        return coord
    return (coord // (n // (r.pre * r.size))) % r.size  # type: ignore[operator]


def indivisible_dim(
    dims: Sequence[Sequence[str]], shape: Sequence[Optional[int]], mesh: Mapping[str, int]
) -> Optional[str]:
    """Why a dim of known size is not divisible by the devices that shard it, or None.

    Shardy allows it (the dim is padded up to a multiple); every shard here
    has the same size, so it is reported with the padding it would need."""
    for j, (axes, size) in enumerate(zip(dims, shape)):
        known = [axis_size(a, mesh) for a in axes]
        if size is None or not axes or None in known:
            continue
        n = 1
        for k in known:
            n *= k  # type: ignore[operator]
        if size % n:
            padded = -(-size // n) * n
            return (
                f"dim {j} has size {size}, sharded on {', '.join(repr(a) for a in axes)} ({n} devices), which "
                f"does not divide it; the ranks' shards would differ in size (Shardy pads the dim to "
                f"{padded}). Hint: pad it to {padded} (torch.nn.functional.pad) before sharding, or use "
                f"the per-axis redistribute with split_sizes"
            )
    return None
