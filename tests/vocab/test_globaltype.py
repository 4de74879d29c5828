"""GlobalType: the value, its JAX-style text, and conversion from/to Spmd."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spmd_mypy import I, P, PartitionSpec, R, S, SpecError, Spmd, V
from spmd_mypy.vocab.globaltype import GlobalType, dtype_name

AXES = ["dp", "tp", "ep", "cp", "pp"]


@st.composite
def global_types(draw: st.DrawFn) -> GlobalType:
    names = draw(st.permutations(AXES))
    rank = draw(st.integers(0, 4))
    entries: list[object] = []
    k = 0
    for _ in range(rank):
        take = draw(st.integers(0, 2))
        group = names[k : k + take]
        k += len(group)
        entries.append(None if not group else group[0] if len(group) == 1 else tuple(group))
    rest = names[k:]
    chosen = {n: draw(st.sampled_from([R, I, V, P])) for n in rest[: draw(st.integers(0, len(rest)))]}
    sizes = draw(st.none() | st.lists(st.none() | st.integers(0, 64), min_size=rank, max_size=rank))
    return GlobalType(
        entries,
        [a for a, t in chosen.items() if t is P],
        local={a: t for a, t in chosen.items() if t in (I, V)},
        dtype=draw(st.sampled_from([None, "f32", "bf16", "i64", "bool"])),
        sizes=sizes,
        nograd=draw(st.booleans()),
    )


# -- the printed form, written by hand -------------------------------------------


@pytest.mark.parametrize(
    "value, text",
    [
        (GlobalType(("dp", "tp"), sizes=(8, 16), dtype="f32"), "f32[8@dp,16@tp]"),
        (GlobalType(("dp", "tp"), ["ep"], sizes=(8, 16), dtype="float32"), "f32[8@dp,16@tp]{P:ep}"),
        (GlobalType(("dp", None)), "[?@dp,?]"),
        (GlobalType((("dp", "tp"), None), sizes=(8, None)), "[8@(dp,tp),?]"),
        (GlobalType(()), "[]"),
        (GlobalType((), ["tp", "dp"], dtype="f32"), "f32[]{P:(dp,tp)}"),
        (GlobalType((None,), local={"ep": I, "x": V, "y": I}), "[?]{I:(ep,y), V:x}"),
        (GlobalType((None,), ["tp"], local={"ep": I}, nograd=True), "[?]{P:tp, I:ep, nograd}"),
        (GlobalType((None,), local={"tp": R}), "[?]"),  # R needs no entry
        (GlobalType(PartitionSpec("dp"), sizes=[0], dtype="torch.bfloat16"), "bf16[0@dp]"),
    ],
)
def test_text(value: GlobalType, text: str) -> None:
    assert str(value) == text
    assert repr(value) == text
    assert GlobalType.parse(text) == value


def test_parse_tolerates_spaces() -> None:
    assert GlobalType.parse(" f32[ 8@dp , ?@( dp2 , tp ) ] {P:ep} ") == GlobalType(
        ("dp", ("dp2", "tp")), ["ep"], sizes=(8, None), dtype="f32"
    )


@pytest.mark.parametrize(
    "text",
    ["f32[8@dp", "[8@]", "[8@dp@tp]", "[x]", "[?]{Q:tp}", "[?]{P:}", "[?@(dp]", "[?@dp,?@dp]", "[?@dp]{P:dp}"],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(SpecError):
        GlobalType.parse(text)


@given(global_types())
def test_text_round_trip(t: GlobalType) -> None:
    assert GlobalType.parse(str(t)) == t
    assert str(GlobalType.parse(str(t))) == str(t)
    assert pickle.loads(pickle.dumps(t)) == t
    assert hash(GlobalType.parse(str(t))) == hash(t)


# -- validation -------------------------------------------------------------------


@pytest.mark.parametrize(
    "build, fragment",
    [
        (lambda: GlobalType(("dp", "dp")), "shards more than one dim"),
        (lambda: GlobalType(("dp",), ["dp"]), "both shards a dim and is partial"),
        (lambda: GlobalType(("dp",), local={"tp": P}), "must be I or V"),
        (lambda: GlobalType(("dp",), local={"dp": I}), "also in the spec or partial"),
        (lambda: GlobalType((None,), ["tp"], local={"tp": V}), "also in the spec or partial"),
        (lambda: GlobalType(("dp",), sizes=(8, 4)), "2 sizes for a spec of rank 1"),
        (lambda: GlobalType(("dp",), sizes=(-1,)), "non-negative ints"),
        (lambda: GlobalType(("dp",), sizes=(True,)), "non-negative ints"),
        (lambda: GlobalType(("dp",), dtype="f33"), "unknown dtype"),
        (lambda: GlobalType("dp"), "sequence of entries"),
        (lambda: GlobalType((None,), ["not an axis"]), "mesh axis names"),
        (lambda: GlobalType((None,), nograd=1), "True or False"),  # type: ignore[arg-type]
    ],
)
def test_invalid(build, fragment: str) -> None:
    with pytest.raises(SpecError, match=fragment):
        build()


def test_immutable_and_queries() -> None:
    t = GlobalType((("dp", "tp"), None), ["ep"], local={"x": I}, sizes=(8, 4))
    with pytest.raises(AttributeError):
        t.spec = PartitionSpec(None)  # type: ignore[misc]
    assert t.ndim == 2
    assert t.axes == frozenset({"dp", "tp", "ep", "x"})
    assert t.axis_type("dp") == S(0)
    assert t.axis_type("tp") == S(0)
    assert t.axis_type("ep") is P
    assert t.axis_type("x") is I
    assert t.axis_type("other") is R
    assert str(t.replace(spec=(None, "dp"))) == "[8,4@dp]{P:ep, I:x}"
    assert str(t.replace(spec=(None,))) == "[?]{P:ep, I:x}"  # rank changed: sizes unknown
    assert str(t.replace(partial=(), dtype="f16", nograd=True)) == "f16[8@(dp,tp),4]{I:x, nograd}"


@pytest.mark.parametrize(
    "given_name, short",
    [("f32", "f32"), ("float32", "f32"), ("torch.float32", "f32"), ("half", "f16"), ("long", "i64"), (None, None), ("f33", None)],
)
def test_dtype_name(given_name: object, short: object) -> None:
    assert dtype_name(given_name) == short


# -- Spmd conversion ------------------------------------------------------------------


def test_to_spmd_examples() -> None:
    t = GlobalType((("dp", "tp"), None), ["ep"], local={"x": I}, nograd=True)
    assert t.to_spmd() == Spmd(spec=PartitionSpec(("dp", "tp"), None), ep=P, x=I, nograd=True)
    assert str(t.to_spmd()) == "ep=P, x=I, spec=((dp, tp), None), nograd"
    assert GlobalType(()).to_spmd() == Spmd(spec=PartitionSpec())


def test_from_spmd_spec_form() -> None:
    s = Spmd(spec=PartitionSpec(None, "tp"), dp=P, ep=V, pp=R)
    t = GlobalType.from_spmd(s, sizes=(4, 8), dtype="f32")
    assert str(t) == "f32[4,8@tp]{P:dp, V:ep}"
    with pytest.raises(SpecError, match="rank 2, not 3"):
        GlobalType.from_spmd(s, ndim=3)


def test_from_spmd_per_axis_form() -> None:
    assert str(GlobalType.from_spmd(Spmd(dp=S(0), tp=S(-1), ep=P), ndim=3)) == "[?@dp,?,?@tp]{P:ep}"
    assert str(GlobalType.from_spmd(Spmd(tp=I), ndim=1)) == "[?]{I:tp}"
    with pytest.raises(SpecError, match="no rank; pass ndim"):
        GlobalType.from_spmd(Spmd(dp=S(0)))
    with pytest.raises(SpecError, match="does not say which is major"):
        GlobalType.from_spmd(Spmd(dp=S(0), tp=S(0)), ndim=2)
    with pytest.raises(SpecError, match="out of range"):
        GlobalType.from_spmd(Spmd(dp=S(2)), ndim=2)


@given(global_types())
def test_spmd_round_trip(t: GlobalType) -> None:
    back = GlobalType.from_spmd(t.to_spmd(), sizes=t.sizes, dtype=t.dtype)
    assert back == t


@pytest.mark.skipif("rest" not in Spmd.__slots__, reason="Spmd has no inferred `rest` type")
def test_from_spmd_inferred_rest() -> None:
    assert str(GlobalType.from_spmd(Spmd.of({"dp": S(0)}, rest=R), ndim=2)) == "[?@dp,?]"
    with pytest.raises(SpecError, match="every unnamed axis is V"):
        GlobalType.from_spmd(Spmd.of({}, rest=V), ndim=1)
