"""Spmd, PartitionSpec and the canonical string form."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spmd_mypy import I, P, PartitionSpec, R, S, SpecError, Spmd, V
from spmd_mypy.vocab import parse_axis_type, parse_spmd
from spmd_mypy.vocab.spec import read_canonical

AXES = ["dp", "tp", "ep", "cp", "pp"]

axis_types = st.sampled_from([R, I, V, P]) | st.integers(-4, 5).map(S)


@st.composite
def per_axis(draw: st.DrawFn) -> Spmd:
    names = draw(st.lists(st.sampled_from(AXES), unique=True, max_size=4))
    rest = draw(st.sampled_from([None, R, V]))
    return Spmd.of({n: draw(axis_types) for n in names}, None, draw(st.booleans()), rest)


@st.composite
def spec_form(draw: st.DrawFn) -> Spmd:
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
    kw = {n: draw(st.sampled_from([R, I, V, P])) for n in rest[: draw(st.integers(0, len(rest)))]}
    return Spmd(spec=PartitionSpec(*entries), nograd=draw(st.booleans()), **kw)


@given(per_axis() | spec_form())
def test_canonical_round_trip(s: Spmd) -> None:
    text = str(s)
    assert parse_spmd(text) == s
    assert str(parse_spmd(text)) == text
    assert pickle.loads(pickle.dumps(s)) == s


@given(per_axis() | spec_form())
def test_read_canonical_is_the_parse(s: Spmd) -> None:
    # read_canonical looks up the strings this process wrote instead of
    # parsing them; the value must be the one the parse gives.
    text = str(s)
    assert read_canonical(text) == parse_spmd(text) == s
    assert str(read_canonical(text)) == text


def test_read_canonical_parses_strings_it_did_not_write() -> None:
    text = "qq7=P, zz8=S(1), nograd"  # no value in the suite writes these axes
    assert read_canonical(text) == Spmd(qq7=P, zz8=S(1), nograd=True)
    spec = Spmd(spec=PartitionSpec("dp", None), tp=P)
    assert read_canonical(str(spec)) == spec
    assert read_canonical(str(spec)) is not spec  # a spec form is always parsed


@given(st.dictionaries(st.sampled_from(AXES), axis_types, max_size=4))
def test_canonical_form_ignores_keyword_order(axes: dict) -> None:
    forward = Spmd(**axes)
    backward = Spmd(**dict(reversed(list(axes.items()))))
    assert str(forward) == str(backward)
    assert hash(forward) == hash(backward)


def test_canonical_examples() -> None:
    assert str(Spmd(tp=S(1), dp=R)) == "dp=R, tp=S(1)"
    assert str(Spmd(tp=V, dp=R)) == "dp=R, tp=V"
    s = Spmd(spec=PartitionSpec(("dp", "tp"), None), ep=I)
    assert str(s) == "ep=I, spec=((dp, tp), None)"
    assert repr(s) == "Spmd(spec=PartitionSpec(('dp', 'tp'), None), ep=I)"
    assert str(Spmd(spec=PartitionSpec("dp"))) == "spec=(dp,)"
    assert str(Spmd()) == ""
    assert str(Spmd(dp=V, nograd=True)) == "dp=V, nograd"
    assert repr(Spmd(dp=V, nograd=True)) == "Spmd(dp=V, nograd=True)"
    assert Spmd(dp=V, nograd=True) != Spmd(dp=V)


def test_spec_form_means_per_axis_types() -> None:
    s = Spmd(spec=PartitionSpec(("dp", "tp"), None), ep=I)
    assert s.ndim == 2
    assert s.axis_type("dp") == S(0) and s.axis_type("tp") == S(0)
    assert s.axis_type("ep") is I
    assert s.axis_type("pp") is R  # named nowhere: replicated in the spec form
    per = Spmd(dp=S(0), tp=R)
    assert per.ndim is None
    assert per.axis_type("pp") is None  # named nowhere: unknown in the per-axis form
    assert Spmd(spec=PartitionSpec("dp", None), tp=R).axes == per.axes


def test_negative_dims_normalize_against_rank() -> None:
    assert Spmd(tp=S(-1), dp=S(0)).normalized(3) == Spmd(tp=S(2), dp=S(0))
    with pytest.raises(SpecError, match="tp"):
        Spmd(tp=S(-4)).normalized(3)
    assert S(-2).normalized(2) == S(0)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: PartitionSpec("dp", "dp"), "more than one dim"),
        (lambda: PartitionSpec(("dp", "tp"), "tp"), "more than one dim"),
        (lambda: PartitionSpec(3), "PartitionSpec entries"),
        (lambda: PartitionSpec("1x"), "identifiers"),
        (lambda: Spmd(tp="V"), "R, I, V, P or S"),
        (lambda: Spmd(spec=PartitionSpec("tp"), tp=R), "in the PartitionSpec and also"),
        (lambda: Spmd(spec=PartitionSpec("dp"), tp=S(0)), "put sharding axes in the PartitionSpec"),
        (lambda: Spmd(spec=("dp",)), "takes a PartitionSpec"),
        (lambda: S(1.0), "int tensor dim"),
        (lambda: S(True), "int tensor dim"),
        (lambda: Spmd(nograd=1), "True or False"),
        (lambda: PartitionSpec("nograd"), "cannot name a mesh axis"),
    ],
)
def test_malformed_annotations_raise(make, message: str) -> None:
    with pytest.raises((SpecError, TypeError), match=message):
        make()


@pytest.mark.parametrize("text", ["dp=Q", "dp=S(x)", "dp R", "spec=(dp", "dp=R,, tp=V", "=R"])
def test_parser_rejects_garbage(text: str) -> None:
    with pytest.raises(SpecError):
        parse_spmd(text)


def test_axis_type_parser() -> None:
    assert parse_axis_type("S(-1)") == S(-1)
    assert parse_axis_type(" R ") is R
    with pytest.raises(ValueError):
        parse_axis_type("S")


def test_values_are_immutable_and_singletons_survive_pickle() -> None:
    with pytest.raises(AttributeError):
        Spmd(tp=R).spec = None  # type: ignore[misc]
    with pytest.raises(AttributeError):
        S(0).dim = 1  # type: ignore[misc]
    for t in (R, I, V, P):
        assert pickle.loads(pickle.dumps(t)) is t


def test_vocabulary_and_package_import_neither_torch_nor_mypy() -> None:
    code = (
        "import sys, spmd_mypy, spmd_mypy.vocab.opclasses, spmd_mypy.vocab.collectives;"
        "bad = [m for m in ('torch', 'mypy') if m in sys.modules];"
        "sys.exit(', '.join(bad) or None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, f"imported: {out.stderr}"


def test_rest_types_every_unnamed_axis() -> None:
    ones = Spmd.of({}, None, True, R)
    assert str(ones) == "*=R, nograd"
    assert ones.axis_type("tp") is R and ones.axis_type("anything") is R
    mixed = Spmd.of({"tp": V}, None, False, R)
    assert str(mixed) == "*=R, tp=V"
    assert mixed.axis_type("tp") is V and mixed.axis_type("dp") is R
    assert mixed != Spmd(tp=V) and Spmd(tp=V).axis_type("dp") is None
    with pytest.raises(SpecError):
        Spmd.of({}, PartitionSpec("dp"), False, R)


def test_mismatches_let_a_value_without_gradient_stand_for_varying() -> None:
    from spmd_mypy.vocab.spec import mismatches

    zeros = Spmd.of({}, None, True, R)
    assert mismatches(zeros, Spmd(tp=V, dp=I)) == []
    assert mismatches(zeros, Spmd(tp=P)) == [("tp", R, P)]  # the sum would count it N times
    assert mismatches(zeros, Spmd(tp=S(0))) == [("tp", R, S(0))]  # a whole tensor is no shard
    assert mismatches(Spmd(tp=R), Spmd(tp=V)) == [("tp", R, V)]  # with a gradient it matters
    assert mismatches(Spmd(tp=V, nograd=True), Spmd(tp=R)) == [("tp", V, R)]


def test_hidden_obligations_on_axes_the_annotation_does_not_name() -> None:
    from spmd_mypy.vocab.spec import hidden_obligations

    assert hidden_obligations(Spmd(dp=P, tp=R), Spmd(tp=R)) == [("dp", P)]
    assert hidden_obligations(Spmd(dp=I, tp=R), Spmd(tp=R)) == [("dp", I)]
    assert hidden_obligations(Spmd(dp=I, tp=R, nograd=True), Spmd(tp=R)) == []
    assert hidden_obligations(Spmd(dp=V, ep=R, sp=S(0)), Spmd(tp=R)) == []
    assert hidden_obligations(Spmd(dp=P), Spmd(dp=P)) == []  # named: mismatches decides
    assert hidden_obligations(Spmd(dp=P), Spmd(spec=PartitionSpec(None))) == []


def test_spmd_of_shares_one_value_per_arguments_and_checks_each_call() -> None:
    """Spmd.of hands back one object for equal arguments (the checker builds one
    per typed expression), but what makes arguments differ still does: the
    spec's parts flag, an equal-comparing value of another type, a bad nograd."""
    a = Spmd.of({"tp": V, "dp": R}, None, True)
    assert Spmd.of({"dp": R, "tp": V}, None, True) is a
    assert Spmd.of({"dp": R, "tp": V}, None, False) is not a
    whole = Spmd.of({}, PartitionSpec("x", None))
    parts = Spmd.of({}, PartitionSpec.of_parts("x", None))
    assert whole.spec is not None and not whole.spec.on_parts
    assert parts.spec is not None and parts.spec.on_parts
    with pytest.raises(SpecError):
        Spmd.of({"tp": V, "dp": R}, None, 1)  # type: ignore[arg-type]
