"""Spmd annotations and partition specs, with one canonical string form.

`Spmd(...)` is the metadata users put in `Annotated[Tensor, Spmd(...)]`.  Two
spellings exist:

* per-axis:   Spmd(dp=S(0), tp=R)             -- rank not stated; axes not
                                                named are unknown
* spec form:  Spmd(spec=PartitionSpec("dp", None), tp=R)
                                              -- the spec fixes the rank and
                                                which axes shard which dim;
                                                axes named nowhere are R

Both denote per-axis local types (an axis in the spec is S(dim) there).  The
canonical string (`str(spmd)`) sorts axes by name and is what the mypy plugin
stores in its phantom type, so it must be unique per value:

    "dp=R, tp=S(1)"
    "ep=I, spec=((dp, tp), None)"
    "dp=V, nograd"                (a tensor that carries no gradient: a count, a mask)

This module is pure Python: it imports neither torch nor mypy.
"""

from __future__ import annotations

import re
from typing import Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

from .localtype import AxisType, I, LocalType, P, PartitionedShard, R, Shard, parse_axis_type
from .subaxis import is_sub_axis, keywords_violation, parse_axis_ref, spec_violation

__all__ = ["PartitionSpec", "Spmd", "SpecError", "parse_spmd", "mismatches"]

_AXIS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class SpecError(ValueError):
    """A malformed Spmd annotation or partition spec."""


DimEntry = Tuple[str, ...]  # mesh axes sharding one dim, major to minor


def _check_axis_name(name: object, where: str) -> str:
    """The canonical text of a mesh axis name or sub-axis ('x:(1)2'), or raise."""
    if isinstance(name, str) and is_sub_axis(name):
        try:
            return parse_axis_ref(name).text()
        except ValueError as e:
            raise SpecError(f"{where}: {e}") from None
    if not isinstance(name, str) or not _AXIS_NAME.match(name):
        raise SpecError(f"{where}: mesh axis names are identifiers, got {name!r}")
    if name in ("spec", "nograd"):
        raise SpecError(f"{where}: {name!r} cannot name a mesh axis")
    return name


class PartitionSpec:
    """Which mesh axes shard each tensor dim, major to minor (as in JAX).

    PartitionSpec(("dp", "tp"), None): dim 0 is sharded on dp then tp (dp
    major), dim 1 is not sharded.  Immutable and hashable.
    """

    __slots__ = ("dims", "on_parts")
    dims: Tuple[DimEntry, ...]
    on_parts: bool  # made by of_parts: the axes are parts of a split mesh (not compared)

    def __init__(self, *entries: Union[None, str, Tuple[str, ...]]) -> None:
        self._build(entries, maximal=True)

    @classmethod
    def of_parts(cls, *entries: Union[None, str, Tuple[str, ...]]) -> "PartitionSpec":
        """A spec over a mesh split at its sub-axes (the planner's), where each part
        x:(m)k is a whole axis: adjacent parts of one dim are not merged."""
        out = cls.__new__(cls)
        out._build(entries, maximal=False)
        return out

    def _build(self, entries: Sequence[Union[None, str, Tuple[str, ...]]], maximal: bool) -> None:
        dims: list[DimEntry] = []
        seen: set[str] = set()
        for entry in entries:
            if entry is None:
                axes: DimEntry = ()
            elif isinstance(entry, str):
                axes = (entry,)
            elif isinstance(entry, (tuple, list)):
                axes = tuple(entry)
            else:
                raise SpecError(
                    f"PartitionSpec entries are None, an axis name or a tuple of axis names; got {entry!r}"
                )
            axes = tuple(_check_axis_name(a, "PartitionSpec") for a in axes)
            for a in axes:
                if a in seen:
                    raise SpecError(f"PartitionSpec: mesh axis {a!r} shards more than one dim")
                seen.add(a)
            dims.append(axes)
        if any(is_sub_axis(a) for a in seen):
            bad = spec_violation(dims, maximal=maximal)
            if bad is not None:
                raise SpecError(f"PartitionSpec: {bad}")
        object.__setattr__(self, "dims", tuple(dims))
        object.__setattr__(self, "on_parts", not maximal)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("PartitionSpec is immutable")

    def __reduce__(self) -> Tuple[Callable[..., PartitionSpec], Tuple[object, ...]]:
        return (PartitionSpec.of_parts, tuple(d if d else None for d in self.dims))

    def __len__(self) -> int:
        return len(self.dims)

    def __iter__(self) -> Iterator[DimEntry]:
        return iter(self.dims)

    def __getitem__(self, i: int) -> DimEntry:
        return self.dims[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PartitionSpec) and other.dims == self.dims

    def __hash__(self) -> int:
        return hash(("PartitionSpec", self.dims))

    @property
    def axes(self) -> Tuple[str, ...]:
        """Every sharding axis, in dim order then major-to-minor."""
        return tuple(a for d in self.dims for a in d)

    def dim_of(self, axis: str) -> Optional[int]:
        for i, d in enumerate(self.dims):
            if axis in d:
                return i
        return None

    def canonical(self) -> str:
        parts = []
        for d in self.dims:
            if not d:
                parts.append("None")
            elif len(d) == 1:
                parts.append(d[0])
            else:
                parts.append("(" + ", ".join(d) + ")")
        inner = ", ".join(parts)
        if len(parts) == 1:
            inner += ","
        return f"({inner})"

    def __repr__(self) -> str:
        def one(d: DimEntry) -> str:
            if not d:
                return "None"
            if len(d) == 1:
                return repr(d[0])
            return "(" + ", ".join(repr(a) for a in d) + ")"

        return "PartitionSpec(" + ", ".join(one(d) for d in self.dims) + ")"


def _check_shape(
    shape: Optional[Sequence[Optional[int]]], spec: Optional[PartitionSpec]
) -> Optional[Tuple[Optional[int], ...]]:
    if shape is None:
        return None
    if spec is None:
        raise SpecError("Spmd(shape=...) needs spec=PartitionSpec(...): the spec fixes the rank the sizes are of")
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise SpecError(f"Spmd(shape=...) takes a tuple of sizes, got {shape!r}")
    out = tuple(shape)
    if len(out) != len(spec):
        raise SpecError(f"Spmd: shape {out} has {len(out)} sizes, but the spec has rank {len(spec)}")
    for n in out:
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise SpecError(f"Spmd(shape=...) takes non-negative ints (None: unknown), got {n!r}")
    return out if any(n is not None for n in out) else None


# Spmd.of's answers by argument (an Spmd is immutable, so one object serves all).
_MADE: Dict[Tuple[object, ...], "Spmd"] = {}
_MAX_MADE = 65536
_MADE_SORTED: Dict[Tuple[object, ...], "Spmd"] = {}  # Spmd.of_sorted's values
_BY_TEXT: Dict[str, "Spmd"] = {}  # canonical string -> the per-axis value that wrote it (parse_spmd)

class Spmd:
    """The SPMD type of a tensor: a local type per mesh axis, optionally a spec.

    Spmd(tp=V, dp=R); Spmd(dp=S(0), tp=S(1)); Spmd(spec=PartitionSpec("dp", None), tp=R).
    Immutable, hashable, cheap to build (it is evaluated once per annotation).
    """

    __slots__ = ("axes", "spec", "nograd", "rest", "shape", "_text", "_hash")

    axes: Mapping[str, AxisType]
    spec: Optional[PartitionSpec]
    nograd: bool
    # The type on every axis not named (per-axis form).  Only inferred types
    # have one: a factory's result is R on every axis (`*=R` in the canonical
    # form); annotations leave unnamed axes unknown (None).
    rest: Optional[AxisType]
    # The global sizes, where the annotation states them (spec form only; None:
    # not stated; an entry None: that dim's size unknown).
    shape: Optional[Tuple[Optional[int], ...]]
    _text: str  # canonical(), set on first use
    _hash: int  # __hash__(), set on first use

    def __init__(
        self,
        *,
        spec: Optional[PartitionSpec] = None,
        nograd: bool = False,
        shape: Optional[Sequence[Optional[int]]] = None,
        **axes: AxisType,
    ) -> None:
        if not isinstance(nograd, bool):
            raise SpecError(f"Spmd(nograd=...) takes True or False, got {nograd!r}")
        if spec is not None and not isinstance(spec, PartitionSpec):
            raise SpecError(f"Spmd(spec=...) takes a PartitionSpec, got {spec!r}")
        checked: dict[str, AxisType] = {}
        for name in sorted(axes):
            t = axes[name]
            name = _check_axis_name(name, "Spmd")
            if not isinstance(t, (LocalType, Shard)):
                raise SpecError(f"Spmd: axis {name!r} must be R, I, V, P or S(dim), got {t!r}")
            if spec is not None:
                if isinstance(t, Shard):
                    raise SpecError(
                        f"Spmd: axis {name!r} is S({t.dim}) beside spec=; in the spec form, "
                        f"put sharding axes in the PartitionSpec"
                    )
                if name in spec.axes:
                    raise SpecError(
                        f"Spmd: axis {name!r} is in the PartitionSpec and also given as {t}; "
                        f"an axis in the spec is varying (it shards its dim)"
                    )
            checked[name] = t
        if any(is_sub_axis(a) for a in checked) or (spec is not None and any(is_sub_axis(a) for a in spec.axes)):
            parts = spec is not None and spec.on_parts
            bad = spec_violation(spec.dims if spec is not None else (), checked, maximal=not parts)
            if bad is None and not parts:
                bad = keywords_violation({a: str(t) for a, t in checked.items()})
            if bad is not None:
                raise SpecError(f"Spmd: {bad}")
        if spec is not None:
            for i, d in enumerate(spec.dims):
                for a in d:
                    checked[a] = Shard(i)
        object.__setattr__(self, "axes", dict(sorted(checked.items())))
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "nograd", nograd)
        object.__setattr__(self, "rest", None)
        object.__setattr__(self, "shape", _check_shape(shape, spec))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Spmd is immutable")

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (parse_spmd, (self.canonical(),))

    @classmethod
    def of(
        cls,
        axes: Mapping[str, AxisType],
        spec: Optional[PartitionSpec] = None,
        nograd: bool = False,
        rest: Optional[AxisType] = None,
        shape: Optional[Sequence[Optional[int]]] = None,
    ) -> "Spmd":
        """Build from a mapping of axis name to type (the keywords of Spmd(...)),
        the type of every other axis (`rest`, per-axis form only) and the sizes.
        An Spmd is an immutable value: the same arguments give the same object
        (the checker builds one per typed expression, mostly the same few)."""
        key = None
        if cls is Spmd and (shape is None or isinstance(shape, tuple)):
            # types beside values (a subclass may compare equal), and the spec's
            # uncompared `on_parts` (it changes what is valid)
            key = (
                tuple(sorted((a, type(t), t) for a, t in axes.items())),
                spec, spec is not None and spec.on_parts, type(nograd), nograd, type(rest), rest, shape,
            )
            hit = _MADE.get(key)
            if hit is not None:
                return hit
        out = cls(spec=spec, nograd=nograd, shape=shape, **axes)
        if rest is not None:
            if spec is not None:
                raise SpecError("Spmd: the spec form already makes every unnamed axis R")
            if not isinstance(rest, (LocalType, Shard)):
                raise SpecError(f"Spmd: the type of every other axis must be R, I, V, P or S(dim), got {rest!r}")
            object.__setattr__(out, "rest", rest)
        if key is not None:
            if len(_MADE) >= _MAX_MADE:
                _MADE.clear()
            _MADE[key] = out
        return out

    @classmethod
    def of_sorted(cls, items: Tuple[Tuple[str, AxisType], ...], nograd: bool, rest: Optional[AxisType]) -> "Spmd":
        """Spmd.of(dict(items), None, nograd, rest) for per-axis values the
        rules build from checked ones: `items` sorted by axis, each axis a
        checked name and each type an R/I/V/P or shard, `nograd` a bool.
        The checker builds one per typed op, mostly the same few, and these
        need neither the checks nor the keyword form's sorting."""
        key = (items, nograd, rest)
        hit = _MADE_SORTED.get(key)
        if hit is not None:
            return hit
        made = cls.of(dict(items), None, nograd, rest)
        if len(_MADE_SORTED) >= _MAX_MADE:
            _MADE_SORTED.clear()
        _MADE_SORTED[key] = made
        return made

    # -- queries ---------------------------------------------------------------
    @property
    def ndim(self) -> Optional[int]:
        """The tensor rank the annotation fixes (spec form), else None."""
        return None if self.spec is None else len(self.spec)

    def axis_type(self, axis: str) -> Optional[AxisType]:
        """The local type on `axis`; None means unknown (per-axis form, axis not named).

        A sub-axis not named has the type of its named axis (I on dp is I on
        each part of dp; a part of an axis sharding dim i shards dim i too).
        An axis not named whose parts are named has no one type: unknown."""
        t = self.axes.get(axis)
        if t is not None:
            return t
        if is_sub_axis(axis):
            whole = self.axes.get(parse_axis_ref(axis).name)
            if whole is not None:
                return whole
        elif any(is_sub_axis(a) and parse_axis_ref(a).name == axis for a in self.axes):
            return None
        return R if self.spec is not None else self.rest

    def normalized(self, ndim: int) -> "Spmd":
        """Per-axis form with negative S dims resolved against rank ndim."""
        if self.spec is not None:
            if len(self.spec) != ndim:
                raise SpecError(f"Spmd {self} has rank {len(self.spec)}, not {ndim}")
            return self
        out = {}
        for a, t in self.axes.items():
            if isinstance(t, Shard):
                try:
                    t = t.normalized(ndim)
                except IndexError as e:
                    raise SpecError(f"Spmd: axis {a!r}: {e}") from None
            out[a] = t
        return Spmd.of(out, None, self.nograd, self.rest)

    # -- forms -----------------------------------------------------------------
    def canonical(self) -> str:
        try:
            return self._text
        except AttributeError:  # first use: the checker asks for it per typed value
            pass
        spec = self.spec
        parts = [
            f"{a}={t}" for a, t in self.axes.items() if spec is None or a not in spec.axes
        ]
        if self.rest is not None:
            parts.insert(0, f"*={self.rest}")
        if spec is not None:
            parts.append(f"spec={spec.canonical()}")
        if self.shape is not None:
            parts.append("shape=(" + ",".join("?" if n is None else str(n) for n in self.shape) + ",)"[len(self.shape) != 1 :])
        if self.nograd:
            parts.append("nograd")
        text = ", ".join(parts)
        object.__setattr__(self, "_text", text)
        if spec is None and len(_BY_TEXT) < _MAX_MADE:
            _BY_TEXT.setdefault(text, self)
        return text

    __str__ = canonical

    def __repr__(self) -> str:
        spec = self.spec
        parts = [
            f"{a}={t}" for a, t in self.axes.items() if spec is None or a not in spec.axes
        ]
        if spec is not None:
            parts.insert(0, f"spec={spec!r}")
        if self.shape is not None:
            parts.insert(1, f"shape={self.shape!r}")
        if self.nograd:
            parts.append("nograd=True")
        if self.rest is not None:
            return f"Spmd.of({{{', '.join(repr(a) + ': ' + str(t) for a, t in self.axes.items())}}}, nograd={self.nograd}, rest={self.rest})"
        return "Spmd(" + ", ".join(parts) + ")"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Spmd)
            and other.axes == self.axes
            and other.spec == self.spec
            and other.nograd == self.nograd
            and other.rest == self.rest
            and other.shape == self.shape
        )

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            pass
        h = hash((tuple(self.axes.items()), self.spec, self.nograd, self.rest, self.shape))
        object.__setattr__(self, "_hash", h)
        return h


# -- the canonical parser ------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:([A-Za-z_][A-Za-z0-9_]*:\(\d+\)\d+)|(\()|(\))|(,)|(=)|((?:PSA|PS|S)\(\s*-?\d+\s*\))"
    r"|([A-Za-z_][A-Za-z0-9_]*|\*|\d+|\?))"
)


def _tokens(text: str) -> list[str]:
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise SpecError(f"cannot parse SPMD type {text!r} at position {pos}")
        out.append(m.group(m.lastindex or 0).replace(" ", ""))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> Optional[str]:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, expected: Optional[str] = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            want = expected or "more input"
            raise SpecError(f"cannot parse SPMD type {self.text!r}: expected {want}, got {tok!r}")
        self.i += 1
        return tok

    def spec(self) -> PartitionSpec:
        self.take("(")
        entries: list[Union[None, str, Tuple[str, ...]]] = []
        while self.peek() != ")":
            if self.peek() == "(":
                self.take("(")
                group = []
                while self.peek() != ")":
                    group.append(self.take())
                    if self.peek() == ",":
                        self.take(",")
                self.take(")")
                entries.append(tuple(group))
            else:
                tok = self.take()
                entries.append(None if tok == "None" else tok)
            if self.peek() == ",":
                self.take(",")
        self.take(")")
        return PartitionSpec(*entries)

    def spmd(self) -> Spmd:
        axes: dict[str, AxisType] = {}
        spec = None
        nograd = False
        rest: Optional[AxisType] = None
        shape: Optional[Tuple[Optional[int], ...]] = None
        while self.peek() is not None:
            name = self.take()
            if name == "nograd" and self.peek() in (None, ","):
                nograd = True
                if self.peek() is not None:
                    self.take(",")
                continue
            self.take("=")
            if name == "spec":
                spec = self.spec()
            elif name == "shape":
                shape = self.sizes()
            elif name == "*":
                try:
                    rest = parse_axis_type(self.take())
                except ValueError as e:
                    raise SpecError(str(e)) from None
            else:
                try:
                    axes[name] = parse_axis_type(self.take())
                except ValueError as e:
                    raise SpecError(str(e)) from None
            if self.peek() is not None:
                self.take(",")
        return Spmd.of(axes, spec, nograd, rest, shape)

    def sizes(self) -> Tuple[Optional[int], ...]:
        self.take("(")
        out: list[Optional[int]] = []
        while self.peek() != ")":
            tok = self.take()
            if not (tok == "?" or tok.isdigit()):
                raise SpecError(f"cannot parse SPMD type {self.text!r}: a size is an int or ?, got {tok!r}")
            out.append(None if tok == "?" else int(tok))
            if self.peek() == ",":
                self.take(",")
        self.take(")")
        return tuple(out)


def parse_spmd(text: str) -> Spmd:
    """Parse the canonical string form back into an Spmd (inverse of str(spmd))."""
    return _Parser(text).spmd()


def read_canonical(text: str) -> Spmd:
    """parse_spmd, where a string this process wrote (canonical() of a
    per-axis value) is looked up, not parsed: the checker writes a type's
    string when it builds a carrier and reads it back for every operand, and
    the parse round-trips (tests/vocab/test_spec.py).  A spec form is always
    parsed (its value keeps an uncompared `on_parts` that its string does
    not say)."""
    made = _BY_TEXT.get(text)
    return made if made is not None else _Parser(text).spmd()



def _local_kind(t: AxisType) -> str:
    # In local SPMD, S(i) is a Varying value: the two are interchangeable.
    return "V" if isinstance(t, Shard) else t.letter


def hidden_obligations(actual: Spmd, expected: Spmd) -> list[Tuple[str, AxisType]]:
    """Axes where `actual` is P, I with a gradient, or partitioned (PS/PSA),
    and the per-axis `expected` does not name them.

    Code typed by `expected` sees those axes as unknown, so it could apply a
    nonlinear op to a pending sum, mix an Invariant value with per-rank
    values, or reshape a partitioned dim: the obligation the type carries
    would be dropped silently.  (R, V and S(i) carry none: any local use of
    them is sound.)  In the spec form every axis is constrained, and
    `mismatches` checks it.
    """
    if expected.spec is not None:
        return []
    out: list[Tuple[str, AxisType]] = []
    for axis, got in actual.axes.items():
        if expected.axis_type(axis) is not None:
            continue
        if got is P or (got is I and not actual.nograd) or isinstance(got, PartitionedShard):
            out.append((axis, got))
    return out


def mismatches(actual: Spmd, expected: Spmd) -> list[Tuple[str, AxisType, AxisType]]:
    """Axes where a value of type `actual` cannot stand for `expected`.

    Checked on every axis `expected` constrains (every axis it names; in the
    spec form also every axis `actual` names, which the spec makes R).  An
    axis `actual` does not know is never a mismatch (gradual typing).  S(i)
    and V are interchangeable (local SPMD).  A partitioned value (PS(i),
    PSA(i)) fits only its own layout: code typed V or S(i) could reshape,
    cut or join the partitioned dim or meet per-rank values with rows that
    are not the rank's own partitions (DESIGN.md, seed 004); a per-rank value
    (V, S(j)) fits a partitioned declaration, which is how a layout the
    checker cannot see (sizes known after routing) enters.  A value without gradient
    (nograd) that is R or I fits R, I and V: only forward values matter.  Returns (axis, actual type,
    expected type) triples, sorted by axis.
    """
    axes = set(expected.axes)
    if expected.spec is not None:
        axes |= set(actual.axes)
    out: list[Tuple[str, AxisType, AxisType]] = []
    for axis in sorted(axes):
        want = expected.axis_type(axis)
        got = actual.axis_type(axis)
        if want is None or got is None:
            continue
        if isinstance(got, PartitionedShard):
            if got != want:
                out.append((axis, got, want))
            continue
        if _local_kind(got) == _local_kind(want):
            continue
        if actual.nograd and got in (R, I) and want not in (P,) and not isinstance(want, Shard):
            continue  # the same value on every rank, and no gradient to route
        out.append((axis, got, want))
    return out
