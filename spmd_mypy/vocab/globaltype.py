"""Global SPMD types: a partition spec, partial axes, and optionally dtype and sizes.

A global type says how the ranks' local tensors reassemble into one full
tensor: each dim lists the mesh axes that shard it, major to minor (the
PartitionSpec), and `partial` lists the axes over which the full value is a
pending sum.  Every other mesh axis is Replicate, except the few an explicit
`local` mapping makes Invariant or Varying (axes in local SPMD mode, or an
Invariant value).  Its printed form follows JAX:

    f32[8@dp,16@tp]{P:ep}     dim 0 sharded on dp, dim 1 on tp, partial on ep
    [?@(dp,tp),?]             sizes and dtype unknown; dim 0 on dp then tp
    bf16[4,?]{P:(dp,tp), I:ep, nograd}

Sizes are global (the full tensor's), `?` when unknown.  `str()` is
canonical (axes sorted inside `{}`), and `GlobalType.parse` inverts it.

This module is pure Python: it imports neither torch nor mypy.
"""

from __future__ import annotations

import re
from typing import FrozenSet, Iterable, Mapping, Optional, Sequence, Tuple, Union

from .localtype import AxisType, I, LocalType, P, R, Shard, V
from .spec import PartitionSpec, SpecError, Spmd
from .subaxis import is_sub_axis, keywords_violation, parse_axis_ref, spec_violation

__all__ = ["GlobalType", "DTYPES", "dtype_name"]

Entry = Union[None, str, Tuple[str, ...]]
Sizes = Tuple[Optional[int], ...]

# Torch dtype names -> the short names printed in a global type.
DTYPES: Mapping[str, str] = {
    "float32": "f32",
    "float": "f32",
    "float16": "f16",
    "half": "f16",
    "bfloat16": "bf16",
    "float64": "f64",
    "double": "f64",
    "int64": "i64",
    "long": "i64",
    "int32": "i32",
    "int": "i32",
    "int16": "i16",
    "short": "i16",
    "int8": "i8",
    "uint8": "u8",
    "bool": "bool",
    "complex64": "c64",
    "complex128": "c128",
}
_SHORT = frozenset(DTYPES.values())


def dtype_name(dtype: object) -> Optional[str]:
    """The short name of a dtype given as 'f32', 'float32', 'torch.float32'; None if unknown."""
    if dtype is None:
        return None
    text = str(dtype)
    if text.startswith("torch."):
        text = text[len("torch.") :]
    if text in _SHORT:
        return text
    return DTYPES.get(text)


_LOCAL_LETTERS = {"I": I, "V": V}


class GlobalType:
    """A global SPMD type.  Immutable and hashable.

    GlobalType(("dp", None), partial={"tp"}, sizes=(8, 16), dtype="f32")
    is f32[8@dp,16]{P:tp}.  `spec` takes a PartitionSpec or its entries;
    `local` maps an unsharded, non-partial axis to I or V (R needs no entry).
    """

    __slots__ = ("spec", "partial", "local", "dtype", "sizes", "nograd")

    spec: PartitionSpec
    partial: FrozenSet[str]
    local: Mapping[str, LocalType]
    dtype: Optional[str]
    sizes: Sizes
    nograd: bool

    def __init__(
        self,
        spec: Union[PartitionSpec, Sequence[Entry]],
        partial: Iterable[str] = (),
        *,
        local: Optional[Mapping[str, LocalType]] = None,
        dtype: object = None,
        sizes: Optional[Sequence[Optional[int]]] = None,
        nograd: bool = False,
    ) -> None:
        if not isinstance(spec, PartitionSpec):
            if isinstance(spec, (str, bytes)) or not isinstance(spec, Sequence):
                raise SpecError(f"GlobalType: spec is a PartitionSpec or a sequence of entries, got {spec!r}")
            spec = PartitionSpec(*spec)
        if isinstance(partial, str):
            partial = (partial,)
        part = frozenset(_axis_name(a) for a in partial)
        used = set(spec.axes)
        for a in sorted(part):
            if a in used:
                raise SpecError(f"GlobalType: axis {a!r} both shards a dim and is partial")
        loc = {_axis_name(a): t for a, t in (local or {}).items()}
        for a in sorted(loc):
            t = loc[a]
            if t is R:
                continue
            if t not in (I, V):
                raise SpecError(
                    f"GlobalType: local axis {a!r} must be I or V (S(i) goes in the spec, P in partial), got {t!r}"
                )
            if a in used or a in part:
                raise SpecError(f"GlobalType: axis {a!r} is {t} and also in the spec or partial")
        loc = {a: t for a, t in sorted(loc.items()) if t is not R}
        if any(is_sub_axis(a) for a in (*used, *part, *loc)):
            bad = spec_violation(spec.dims, (*sorted(part), *loc), maximal=not spec.on_parts) or keywords_violation(
                {**{a: "P" for a in part}, **{a: str(t) for a, t in loc.items()}}
            )
            if bad is not None:
                raise SpecError(f"GlobalType: {bad}")
        rank = len(spec)
        if sizes is None:
            fixed: Sizes = (None,) * rank
        else:
            fixed = tuple(sizes)
            if len(fixed) != rank:
                raise SpecError(f"GlobalType: {len(fixed)} sizes for a spec of rank {rank}")
            for s in fixed:
                if s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 0):
                    raise SpecError(f"GlobalType: sizes are non-negative ints or None, got {s!r}")
        name = dtype_name(dtype)
        if dtype is not None and name is None:
            raise SpecError(f"GlobalType: unknown dtype {dtype!r}")
        if not isinstance(nograd, bool):
            raise SpecError(f"GlobalType: nograd is True or False, got {nograd!r}")
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "partial", part)
        object.__setattr__(self, "local", loc)
        object.__setattr__(self, "dtype", name)
        object.__setattr__(self, "sizes", fixed)
        object.__setattr__(self, "nograd", nograd)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("GlobalType is immutable")

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (GlobalType.parse, (str(self),))

    # -- queries ---------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.spec)

    @property
    def axes(self) -> FrozenSet[str]:
        """Every mesh axis this type names (sharding, partial or local)."""
        return frozenset(self.spec.axes) | self.partial | frozenset(self.local)

    def axis_type(self, axis: str) -> AxisType:
        """The local type on one axis: S(dim) if it shards a dim, P, I, V, else R."""
        d = self.spec.dim_of(axis)
        if d is not None:
            return Shard(d)
        if axis in self.partial:
            return P
        return self.local.get(axis, R)

    def replace(
        self,
        *,
        spec: Union[None, PartitionSpec, Sequence[Entry]] = None,
        partial: Optional[Iterable[str]] = None,
        local: Optional[Mapping[str, LocalType]] = None,
        dtype: object = ...,
        sizes: object = ...,
        nograd: Optional[bool] = None,
    ) -> "GlobalType":
        """A copy with some fields changed (sizes reset to unknown if the rank changes)."""
        new_spec = self.spec if spec is None else spec
        rank = len(new_spec) if isinstance(new_spec, PartitionSpec) else len(list(new_spec))
        if sizes is ...:
            sizes = self.sizes if rank == self.ndim else None
        return GlobalType(
            new_spec,
            self.partial if partial is None else partial,
            local=self.local if local is None else local,
            dtype=self.dtype if dtype is ... else dtype,
            sizes=sizes,  # type: ignore[arg-type]
            nograd=self.nograd if nograd is None else nograd,
        )

    # -- Spmd conversion -------------------------------------------------------
    def to_spmd(self) -> Spmd:
        """The Spmd (spec form) of this type: sharding axes in the spec, P/I/V as
        keywords, the known sizes as its shape."""
        axes: dict[str, AxisType] = {a: P for a in self.partial}
        axes.update(self.local)
        return Spmd.of(axes, spec=self.spec, nograd=self.nograd, shape=self.sizes)

    @classmethod
    def from_spmd(
        cls,
        spmd: Spmd,
        *,
        ndim: Optional[int] = None,
        sizes: Optional[Sequence[Optional[int]]] = None,
        dtype: object = None,
    ) -> "GlobalType":
        """The global type of an Spmd annotation.

        Spec form: the spec as is, P axes partial, I/V axes local.  Per-axis
        form (needs `ndim`): S(i) axes shard dim i; two axes on one dim are
        ambiguous (their order is not stated) and rejected; axes the
        annotation does not name are taken as R (an inferred type whose
        unnamed axes are all R is exact; another `rest` is rejected).
        """
        rest = getattr(spmd, "rest", None)  # the type of unnamed axes, if inferred
        if rest is not None and rest is not R:
            raise SpecError(f"{spmd}: every unnamed axis is {rest}; a global type names its non-R axes")
        if spmd.spec is not None:
            if ndim is not None and ndim != len(spmd.spec):
                raise SpecError(f"{spmd}: the spec has rank {len(spmd.spec)}, not {ndim}")
            spec = spmd.spec
            entries: list[Entry] = [d if d else None for d in spec.dims]
            if sizes is None:
                sizes = spmd.shape
        else:
            if ndim is None:
                raise SpecError(
                    f"{spmd}: a per-axis annotation has no rank; pass ndim to read it as a global type"
                )
            by_dim: dict[int, list[str]] = {}
            for a, t in spmd.normalized(ndim).axes.items():
                if isinstance(t, Shard):
                    by_dim.setdefault(t.dim, []).append(a)
            entries = []
            for d in range(ndim):
                names = by_dim.get(d, [])
                if len(names) > 1:
                    raise SpecError(
                        f"{spmd}: axes {', '.join(repr(n) for n in names)} all shard dim {d} and "
                        f"the per-axis form does not say which is major; write "
                        f"Spmd(spec=PartitionSpec(...)) instead"
                    )
                entries.append(names[0] if names else None)
        partial = [a for a, t in spmd.axes.items() if t is P]
        local = {a: t for a, t in spmd.axes.items() if isinstance(t, LocalType) and t in (I, V)}
        return cls(entries, partial, local=local, dtype=dtype, sizes=sizes, nograd=spmd.nograd)

    # -- text ------------------------------------------------------------------
    def __str__(self) -> str:
        dims = []
        for size, axes in zip(self.sizes, self.spec.dims):
            text = "?" if size is None else str(size)
            if len(axes) == 1:
                text += "@" + axes[0]
            elif axes:
                text += "@(" + ",".join(axes) + ")"
            dims.append(text)
        extra = []
        for letter, names in (
            ("P", sorted(self.partial)),
            ("I", sorted(a for a, t in self.local.items() if t is I)),
            ("V", sorted(a for a, t in self.local.items() if t is V)),
        ):
            if len(names) == 1:
                extra.append(f"{letter}:{names[0]}")
            elif names:
                extra.append(f"{letter}:(" + ",".join(names) + ")")
        if self.nograd:
            extra.append("nograd")
        tail = "{" + ", ".join(extra) + "}" if extra else ""
        return f"{self.dtype or ''}[{','.join(dims)}]{tail}"

    __repr__ = __str__

    @classmethod
    def parse(cls, text: str) -> "GlobalType":
        """Parse the printed form, e.g. 'f32[8@dp,?@(dp2,tp)]{P:ep, I:x}'."""
        m = _TEXT.match(text.strip())
        if m is None:
            raise SpecError(f"cannot parse global type {text!r}")
        dtype, body, tail = m.group(1) or None, m.group(2).strip(), m.group(3)
        sizes: list[Optional[int]] = []
        entries: list[Entry] = []
        if body:
            for part in _split_dims(body, text):
                dm = _DIM.match(part.strip())
                if dm is None:
                    raise SpecError(f"cannot parse dim {part.strip()!r} of global type {text!r}")
                sizes.append(None if dm.group(1) == "?" else int(dm.group(1)))
                one, group = dm.group(2), dm.group(3)
                if one:
                    entries.append(one)
                elif group is not None:
                    entries.append(tuple(a.strip() for a in group.split(",")))
                else:
                    entries.append(None)
        partial: list[str] = []
        local: dict[str, LocalType] = {}
        nograd = False
        for item in _split_dims(tail or "", text):
            item = item.strip()
            if not item:
                continue
            if item == "nograd":
                nograd = True
                continue
            im = _EXTRA.match(item)
            if im is None:
                raise SpecError(f"cannot parse {item!r} in global type {text!r}")
            names = [im.group(2)] if im.group(2) else [a.strip() for a in im.group(3).split(",")]
            if im.group(1) == "P":
                partial.extend(names)
            else:
                for a in names:
                    local[a] = _LOCAL_LETTERS[im.group(1)]
        return cls(entries, partial, local=local, dtype=dtype, sizes=sizes, nograd=nograd)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, GlobalType)
            and other.spec == self.spec
            and other.partial == self.partial
            and other.local == self.local
            and other.dtype == self.dtype
            and other.sizes == self.sizes
            and other.nograd == self.nograd
        )

    def __hash__(self) -> int:
        return hash((self.spec, self.partial, tuple(self.local.items()), self.dtype, self.sizes, self.nograd))


_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?::\(\d+\)\d+)?"  # an axis or a sub-axis x:(m)k


def _axis_name(a: object) -> str:
    """The canonical text of a mesh axis or sub-axis name, or raise SpecError."""
    if isinstance(a, str) and a.isidentifier():
        return a
    try:
        return parse_axis_ref(a).text()  # type: ignore[arg-type]
    except ValueError:
        raise SpecError(f"GlobalType: axes are mesh axis names or sub-axes ('x:(1)2'), got {a!r}") from None

_TEXT = re.compile(r"([A-Za-z][A-Za-z0-9]*)?\[(.*)\]\s*(?:\{(.*)\})?\Z")
_DIM = re.compile(rf"(\?|\d+)(?:@(?:({_NAME})|\(\s*({_NAME}(?:\s*,\s*{_NAME})*)\s*\)))?\Z")
_EXTRA = re.compile(rf"([PIV]):(?:({_NAME})|\(\s*({_NAME}(?:\s*,\s*{_NAME})*)\s*\))\Z")


def _split_dims(body: str, text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(body):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SpecError(f"unbalanced parentheses in global type {text!r}")
        elif ch == "," and depth == 0:
            parts.append(body[start:k])
            start = k + 1
    if depth:
        raise SpecError(f"unbalanced parentheses in global type {text!r}")
    parts.append(body[start:])
    return parts
