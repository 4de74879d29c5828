"""Sub-axes "x":(m)k (vocab/subaxis.py) in specs and global types: parsing, the
canonical form, the invariants of Shardy's sharding representation (no overlap,
maximal), and the refined mesh the planner works on.

Expected values come from the seed's own examples and from an independent model:
a sub-axis x:(m)k is the digit of the device's x coordinate in the mixed radix
[m, k, n/(m*k)], so two sub-axes overlap exactly when some device pair is
told apart by both.
"""

from __future__ import annotations

import itertools
import math
import pickle
from typing import List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spmd_mypy import P, PartitionSpec, R, SpecError, Spmd
from spmd_mypy.vocab import parse_spmd
from spmd_mypy.vocab.globaltype import GlobalType
from spmd_mypy.vocab.subaxis import (
    AxisRef,
    merge_dim,
    merge_roles,
    overlap,
    parse_axis_ref,
    refine_mesh,
    spec_violation,
    sub_coord,
)


def test_parse_and_canonical_text() -> None:
    assert parse_axis_ref("x") == AxisRef("x")
    assert parse_axis_ref("x:(2)4") == AxisRef("x", 2, 4)
    assert parse_axis_ref('"x":(2)4') == AxisRef("x", 2, 4)  # Shardy's quoting
    assert parse_axis_ref(" y : ( 1 ) 2 ").text() == "y:(1)2"
    for bad in ["x:(0)2", "x:(1)1", "x:2", "1x", "x:(1)"]:
        with pytest.raises(ValueError):
            parse_axis_ref(bad)
    assert PartitionSpec('"x":(1)2', None) == PartitionSpec("x:(1)2", None)
    assert repr(PartitionSpec(("y", "x:(2)2"))) == "PartitionSpec(('y', 'x:(2)2'))"


def test_seed_examples() -> None:
    # @mesh_xyz = <["x"=2, "y"=8, "z"=2]>: [{"x"}, {"y":(2)2}], local shape 2x4 of 4x8
    s = Spmd(spec=PartitionSpec("x", "y:(2)2"))
    assert str(s) == "spec=(x, y:(2)2)"
    assert parse_spmd(str(s)) == s
    g = GlobalType.from_spmd(s, sizes=(4, 8))
    assert str(g) == "[4@x,8@y:(2)2]"
    assert GlobalType.parse(str(g)) == g
    # mesh_full = <"devices"=8>: [{"devices":(1)4}, {"devices":(4)2}] is mesh_xy's [{"x"}, {"y"}]
    assert spec_violation([("devices:(1)4",), ("devices:(4)2",)], mesh={"devices": 8}) is None
    # explicitly replicated sub-axes beside a sharding sub-axis of the same axis
    assert spec_violation([("x",), ("y:(2)2",)], ["y:(1)2"], {"x": 2, "y": 8, "z": 2}) is None


def test_invariants_name_what_is_wrong() -> None:
    with pytest.raises(SpecError, match=r"x:\(2\)4 \(dim 1\) overlaps x:\(1\)4 \(dim 0\)"):
        PartitionSpec("x:(1)4", "x:(2)4")
    with pytest.raises(SpecError, match=r"write the single sub-axis x:\(1\)8"):
        PartitionSpec(("x:(1)2", "x:(2)4"))
    with pytest.raises(SpecError, match="overlaps x"):
        PartitionSpec("x", "x:(2)2")
    with pytest.raises(SpecError, match="not parts of one split"):
        PartitionSpec("x:(1)2", "x:(3)2")
    with pytest.raises(SpecError, match="overlaps"):
        Spmd(spec=PartitionSpec("x:(1)2"), x=P)  # the whole x pending and a part of it sharding
    assert Spmd(spec=PartitionSpec("x:(1)2"), **{"x:(2)2": P}).axis_type("x:(2)2") is P
    with pytest.raises(SpecError, match="is all of axis 'x'"):
        raise SpecError(spec_violation([("x:(1)4",)], mesh={"x": 4}) or "")
    assert spec_violation([("x:(1)4",)], mesh={"x": 8}) is None
    assert "does not fit" in (spec_violation([("x:(2)4",)], mesh={"x": 4}) or "")


# -- the independent model: which devices a sub-axis tells apart ----------------------


def _digit(ref: AxisRef, c: int, n: int) -> int:
    if ref.full:
        return c
    return (c // (n // (ref.pre * ref.size))) % ref.size  # type: ignore[operator]


@st.composite
def split_of(draw: st.DrawFn, n: int) -> List[AxisRef]:
    """A random split of an axis of size n into parts, major first, as sub-axes."""
    parts: List[AxisRef] = []
    pre = 1
    while pre < n:
        k = draw(st.sampled_from([d for d in range(2, n // pre + 1) if (n // pre) % d == 0]))
        parts.append(AxisRef("x", pre, k))
        pre *= k
    return parts


def _run(parts: List[AxisRef], i: int, j: int) -> AxisRef:
    """The sub-axis made of parts i..j-1 of a split."""
    return AxisRef("x", parts[i].pre, math.prod(p.size for p in parts[i:j]))  # type: ignore[misc]


@settings(max_examples=200)
@given(st.sampled_from([4, 6, 8, 12, 16]), st.data())
def test_overlap_is_sharing_a_part(n: int, data: st.DataObject) -> None:
    parts = data.draw(split_of(n))
    spans = [(i, j) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)]
    (i, j), (k, m) = data.draw(st.sampled_from(spans)), data.draw(st.sampled_from(spans))
    a, b = _run(parts, i, j), _run(parts, k, m)
    shares = bool(set(range(i, j)) & set(range(k, m)))
    assert overlap(a, b) == shares == overlap(b, a)
    # and sharing a part is what makes the two digits dependent across the devices
    joint = {(_digit(a, c, n), _digit(b, c, n)) for c in range(n)}
    assert (len(joint) < a.size * b.size) == shares  # type: ignore[operator]
    assert overlap(a, AxisRef("x")) and not overlap(a, AxisRef("y", a.pre, a.size))
    if not shares:
        assert spec_violation([(a.text(),), (b.text(),)], mesh={"x": n}) is None or (
            a.pre == 1 and a.size == n
        )
    else:
        assert spec_violation([(a.text(),), (b.text(),)]) is not None


@settings(max_examples=200)
@given(st.sampled_from([2, 4, 8, 12, 16]), st.data())
def test_a_split_is_valid_and_merges_back_to_the_axis(n: int, data: st.DataObject) -> None:
    parts = data.draw(split_of(n))
    texts = [p.text() for p in parts]
    mesh = {"x": n}
    if len(parts) > 1:
        # each part on its own dim: a valid spec, and the digits form the x coordinate
        assert spec_violation([(t,) for t in texts], mesh=mesh) is None
        for c in range(n):
            digits = [_digit(p, c, n) for p in parts]
            back = 0
            for p, d in zip(parts, digits):
                back = back * p.size + d  # type: ignore[operator]
            assert back == c
            assert digits == [sub_coord(t, c, n) for t in texts]
        # all parts in one dim: not maximal, and merge_dim gives the full axis
        assert spec_violation([tuple(texts)]) is not None
    assert merge_dim(texts, mesh) == ("x",)
    # every part in one role outside the dims: the axis (a sub-axis without the mesh)
    assert merge_roles({t: P for t in texts}, mesh) == {"x": P}
    assert merge_roles({t: P for t in texts}) == {f"x:(1){n}": P}
    # two roles alternating never merge across
    mixed = {t: (P if k % 2 else R) for k, t in enumerate(texts)}
    assert len(parts) == 1 or merge_roles(mixed, mesh) == mixed
    # any run of consecutive parts merges into one sub-axis of their product
    i = data.draw(st.integers(0, len(parts) - 1))
    j = data.draw(st.integers(i + 1, len(parts)))
    run = merge_dim(texts[i:j])
    assert len(run) == 1
    merged = parse_axis_ref(run[0])
    assert merged.pre == parts[i].pre and merged.size == math.prod(p.size for p in parts[i:j])  # type: ignore[misc]
    others = texts[:i] + texts[j:]
    # the merged run and the remaining parts: pairwise disjoint, a valid type
    spec = [(run[0],)] + [(t,) for t in others]
    assert spec_violation(spec, mesh=mesh) is None or (i == 0 and j == len(parts))
    g = GlobalType([s[0] for s in spec])
    assert GlobalType.parse(str(g)) == g
    assert pickle.loads(pickle.dumps(g.to_spmd())) == g.to_spmd()


@settings(max_examples=100)
@given(st.sampled_from([4, 8, 12]), st.data())
def test_refined_mesh_keeps_the_devices_in_order(n: int, data: st.DataObject) -> None:
    parts = data.draw(split_of(n))
    used = data.draw(st.lists(st.sampled_from([p.text() for p in parts]), unique=True, min_size=1))
    items, cover = refine_mesh((("d", 2), ("x", n)), used)
    names = [a for a, _ in items]
    assert names[0] == "d" and math.prod(s for _, s in items) == 2 * n
    # device x=c has, along the refined parts, the digits of c; the parts of a used
    # sub-axis, read major to minor, give its own digit
    for c in range(n):
        coords = {}
        rest = c
        for a, s in reversed(items[1:]):
            coords[a] = rest % s
            rest //= s
        for t in used:
            v = 0
            for p in cover[t]:
                v = v * dict(items)[p] + coords[p]
            assert v == sub_coord(t, c, n)
    assert cover["x"] == tuple(names[1:])


def test_refine_an_axis_no_sub_axis_cuts() -> None:
    items, cover = refine_mesh((("dp", 2), ("tp", 4)), ["tp:(1)2"])
    assert items == (("dp", 2), ("tp:(1)2", 2), ("tp:(2)2", 2))
    assert cover == {"dp": ("dp",), "tp": ("tp:(1)2", "tp:(2)2"), "tp:(1)2": ("tp:(1)2",)}
    with pytest.raises(ValueError):
        refine_mesh((("tp", 4),), ["tp:(1)3"])
    with pytest.raises(ValueError):
        refine_mesh((("tp", 4),), ["ep:(1)2"])


def test_sub_axes_in_global_text_round_trip() -> None:
    for text in ["f32[2@x:(1)2,4@x:(2)2]", "[8@(y,x:(2)2),4]{P:x:(1)2}", "[?@x:(4)2]{I:(x:(1)2,y)}"]:
        assert str(GlobalType.parse(text)) == text
    for r in itertools.product(["x:(1)2"], ["x:(2)2"]):
        assert GlobalType([r[0], r[1]]).to_spmd().spec == PartitionSpec(*r)
    assert Spmd(spec=PartitionSpec("x:(1)2"), y=R) == parse_spmd("spec=(x:(1)2,), y=R")


# -- static sizes: Spmd(shape=...) and the divisibility check ------------------------------


def test_spmd_shape_round_trips_and_is_checked() -> None:
    s = Spmd(spec=PartitionSpec("dp", None, "tp"), shape=(4, None, 16))
    assert str(s) == "spec=(dp, None, tp), shape=(4,?,16)"
    assert parse_spmd(str(s)) == s and pickle.loads(pickle.dumps(s)) == s
    assert s != Spmd(spec=PartitionSpec("dp", None, "tp"))
    assert str(Spmd(spec=PartitionSpec("dp"), shape=(8,))) == "spec=(dp,), shape=(8,)"
    assert Spmd(spec=PartitionSpec("dp"), shape=(None,)).shape is None  # nothing known: no shape
    g = GlobalType.from_spmd(s)
    assert str(g) == "[4@dp,?,16@tp]" and g.to_spmd() == s
    for bad, words in [
        (lambda: Spmd(dp=P, shape=(4,)), "needs spec="),
        (lambda: Spmd(spec=PartitionSpec("dp"), shape=(4, 4)), "rank 1"),
        (lambda: Spmd(spec=PartitionSpec("dp"), shape=(-1,)), "non-negative"),
        (lambda: Spmd(spec=PartitionSpec("dp"), shape="4"), "tuple of sizes"),
    ]:
        with pytest.raises(SpecError, match=words):
            bad()


def test_indivisible_dims_are_named_with_their_padding() -> None:
    from spmd_mypy.vocab.subaxis import indivisible_dim

    mesh = {"x": 8, "y": 2, "z": 3}
    # the seed's example: tensor<7x3x8> sharded [{"x"}, {"y"}, {"z"}]
    text = indivisible_dim([("x",), ("y",), ("z",)], (7, 3, 8), mesh)
    assert text is not None and text.startswith("dim 0 has size 7, sharded on 'x' (8 devices)")
    assert "pads the dim to 8" in text
    assert indivisible_dim([("x",), ("y",), ("z",)], (8, 4, 9), mesh) is None
    assert "dim 1" in (indivisible_dim([(), ("y", "x:(1)2")], (4, 6), mesh) or "")  # 2 * 2 devices
    assert indivisible_dim([("x",)], (None,), mesh) is None  # size unknown: nothing to say


def test_mesh_setting_is_read(tmp_path: "pytest.TempPathFactory") -> None:
    from spmd_mypy.plugin import config

    def read(value: str) -> object:
        ini = tmp_path / "mypy.ini"  # type: ignore[operator]
        ini.write_text(f"[spmd_mypy]\nmesh = {value}\n")
        return config.load(str(ini)).mesh

    assert read("dp:4, tp:8") == (("dp", 4), ("tp", 8))
    assert read("dp=4, tp = 2") == (("dp", 4), ("tp", 2))
    assert read("dp:0, tp:x, 3:2") == ()
    assert config.Settings().mesh == ()
