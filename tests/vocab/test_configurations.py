"""vocab/configurations.py: the combinations a declaration gives, their
labels, the axes they leave one rank, and the messages errors get."""

from __future__ import annotations

import pytest

from spmd_mypy.vocab.configurations import (
    Configuration,
    DeclarationError,
    Flag,
    configurations,
    in_configuration,
    merge,
    named_axes,
)


def test_every_combination_in_declaration_order() -> None:
    got = configurations([Flag("sequence_parallel", (True, False)), Flag("world_size", (1, 4), "tp")])
    assert [c.label for c in got] == [
        "sequence_parallel=True, world_size=1",
        "sequence_parallel=True, world_size=4",
        "sequence_parallel=False, world_size=1",
        "sequence_parallel=False, world_size=4",
    ]
    assert [sorted(c.trivial_axes) for c in got] == [["tp"], [], ["tp"], []]
    assert got[1].value("world_size") == (True, 4)
    assert got[1].value("ep_enabled") == (False, None)


def test_axis_enabled_false_is_one_rank_but_true_is_not() -> None:
    on, off = configurations([Flag("ep_enabled", (True, False), "ep")])
    assert on.trivial_axes == frozenset() and off.trivial_axes == {"ep"}


def test_method_flag_replaces_class_flag() -> None:
    flags = merge([Flag("sp", (True, False)), Flag("ep", (True,))], [Flag("sp", (False,))])
    assert [(f.name, f.values) for f in flags] == [("ep", (True,)), ("sp", (False,))]


@pytest.mark.parametrize(
    "flags",
    [[Flag("sp", ())], [Flag("sp", (True, True))], [Flag(f"f{i}", tuple(range(10))) for i in range(12)]],
)
def test_unreadable_declarations(flags: list) -> None:
    with pytest.raises(DeclarationError):
        configurations(flags)


def test_messages_named_or_dropped_on_one_rank_axes() -> None:
    config = Configuration((("world_size", 1),), frozenset({"tp"}))
    tp = "Returned value is P on axis 'tp' where I is expected"
    both = "'*' on axis 'tp' and axis 'dp' (x is V)"
    assert named_axes(both) == {"tp", "dp"}
    assert in_configuration(tp, config) is None
    assert in_configuration(both, config) == f"in configuration world_size=1: {both}"
    assert in_configuration("no axis named", config) == "in configuration world_size=1: no axis named"
    named = in_configuration(both, config)
    assert named is not None and in_configuration(named, config) == named


def test_hint_said_to_hold_in_its_configuration() -> None:
    config = Configuration((("sequence_parallel", True),), frozenset())
    message = "'*' on axis 'tp' (normed is V, w is I): ... Hint: spmd.convert(w, 'tp', src=I, dst=R)"
    assert in_configuration(message, config) == (
        "in configuration sequence_parallel=True: '*' on axis 'tp' (normed is V, w is I): ... "
        "Hint: where sequence_parallel=True: spmd.convert(w, 'tp', src=I, dst=R)"
        " (behind a branch on the flag if other configurations run this line)"
    )
