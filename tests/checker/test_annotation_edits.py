"""An annotation index carried over an edit equals the index built afresh.

annotation_edits.carried hands the daemon's next version of a file the
index of the last one when the edit cannot change it.  The reference is the
index of the edited file built from mypy's own parse (the daemon's build);
random edits of the examples and fixture files check every carried index
against it, and the cases below pin each rule of when it is not carried.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mypy import parse
from mypy.errors import Errors
from mypy.options import Options

from spmd_mypy.plugin import _mypy, annotations
from spmd_mypy.plugin.annotation_edits import carried, changed_lines
from tests.checker.test_annotation_spans import SOURCES, _plain

Built = Tuple[Dict[annotations.Pos, annotations.Meta], List[Tuple[int, int]]]


def _built(source: str) -> Optional[Built]:
    """The index the plugin builds for `source` from mypy's spans, and its lines."""
    data = source.encode()
    options = Options()
    errors = Errors(options)
    tree = parse.parse(data, "m.py", "m", errors, options, eager=True)
    if errors.is_errors():
        return None  # mypy reports the syntax error; no hook reads an index
    spans = _mypy.annotation_spans(tree, annotations.marked_lines(data))
    if spans is None:
        return None
    lines: List[Tuple[int, int]] = []
    index = annotations._index_of_spans(data, spans, lines)  # type: ignore[arg-type]
    return None if index is None else (index, lines)


def _carried(old: str, new: str) -> Optional[Built]:
    built = _built(old)
    assert built is not None, "the source before the edit is valid"
    return carried(old.encode(), built[0], built[1], new.encode())  # type: ignore[arg-type,return-value]


BASE = '''from typing import Annotated

import torch
from torch import Tensor

from spmd_mypy import R, S, Spmd, V


def up(
    x: Annotated[Tensor, Spmd(tp=R)],
    w: Annotated[
        Tensor,
        Spmd(tp=S(0)),
    ],
) -> Annotated[Tensor, Spmd(tp=V)]:
    h = x @ w.t()
    h = h * 0.5  # edit here
    return h


Act = Annotated[Tensor, Spmd(tp=V)]


def down(h: Act, scale: float) -> Act:
    y = h * scale
    return y
'''


def _edit(source: str, old_line: str, *new_lines: str) -> str:
    lines = source.split("\n")
    i = lines.index(old_line)
    return "\n".join(lines[:i] + list(new_lines) + lines[i + 1:])


def _assert_fresh(old: str, new: str) -> None:
    got = _carried(old, new)
    assert got is not None, "this edit is carried"
    fresh = _built(new)
    assert fresh is not None
    assert _plain(got[0]) == _plain(fresh[0])
    assert sorted(got[1]) == sorted(fresh[1])


def test_a_one_line_edit_keeps_the_index() -> None:
    _assert_fresh(BASE, _edit(BASE, "    h = h * 0.5  # edit here", "    h = h + 0.5"))


def test_added_and_removed_lines_shift_the_positions_after_them() -> None:
    added = _edit(BASE, "    h = h * 0.5  # edit here", "    h = h * 0.5", "    h = torch.relu(h)", "")
    _assert_fresh(BASE, added)
    _assert_fresh(added, BASE)
    assert _plain(_carried(BASE, added)[0]) != _plain(_built(BASE)[0])  # type: ignore[index]  # moved


@pytest.mark.parametrize(
    "old_line,new_lines",
    [
        ("    h = h * 0.5  # edit here", ("    h: Annotated[Tensor, Spmd(tp=V)] = h * 0.5",)),  # writes Annotated
        ("        Spmd(tp=S(0)),", ("        Spmd(tp=S(1)),",)),  # inside a multi-line annotation
        ("    ],", ("    ], # same",)),  # the line after one: slack
        ("    h = h * 0.5  # edit here", ('    s = """',)),  # a string left open
        ("    h = h * 0.5  # edit here", ("    h = (h *",)),  # a bracket left open
        ("    h = h * 0.5  # edit here", ("    h = h)",)),  # a bracket closed it did not open
        ("    h = h * 0.5  # edit here", ("    h = h * \\",)),  # a continuation
        ("    h = h * 0.5  # edit here", ("type A = int",)),  # mypy's spans stop at `type X = ...`
        ("    h = h * 0.5  # edit here", ("    h = h * 0.5\t",)),  # a tab: columns differ
    ],
)
def test_edits_that_may_change_the_index_are_not_carried(old_line: str, new_lines: Tuple[str, ...]) -> None:
    assert _carried(BASE, _edit(BASE, old_line, *new_lines)) is None


def test_a_continuation_before_the_edit_is_not_carried() -> None:
    old = BASE.replace("Act = Annotated[Tensor, Spmd(tp=V)]", "Act = Annotated[Tensor, Spmd(tp=V)] \\\n    if True else None")
    assert _built(old) is not None
    assert _carried(old, old.replace("    if True else None", "    ")) is None


# Random edits: lines written in the files' own styles and a few that open
# or close what spans lines.
_PIECES = [
    "", "    pass", "    h = h * 2.0", "x = 1", "# a comment", "    return h", '    s = """', '"""',
    "    y = (h +", "    1)", "]", "    ],", "Tensor,", "        Spmd(tp=S(1)),", "\\", "    z = h \\",
    "type T = int", "    q: Annotated[Tensor, Spmd(tp=R)] = h", "B = Annotated[Tensor, Spmd(tp=S(0))]",
    "def f(a: Annotated[Tensor, Spmd(tp=R)]) -> None:", "    w: 'Annotated[Tensor, Spmd(tp=V)]'",
    "class C:", "    weight: Annotated[Tensor, Spmd(tp=S(0))]", "if True:", "else:", "    x = [1,", "    2]",
]
_FILES = [s for _, s in SOURCES if "Annotated" in s and _built(s) is not None][:60] + [BASE]


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.data())
def test_random_edits_carry_exactly_the_fresh_index(data: st.DataObject) -> None:
    old = data.draw(st.sampled_from(_FILES))
    lines = old.split("\n")
    for _ in range(data.draw(st.integers(1, 2))):
        at = data.draw(st.integers(0, len(lines) - 1))
        kind = data.draw(st.sampled_from(["replace", "insert", "delete", "tweak"]))
        piece = data.draw(st.sampled_from(_PIECES))
        if kind == "replace":
            lines[at] = piece
        elif kind == "insert":
            lines.insert(at, piece)
        elif kind == "delete" and len(lines) > 1:
            del lines[at]
        elif kind == "tweak" and lines[at]:
            cut = data.draw(st.integers(0, len(lines[at]) - 1))
            lines[at] = lines[at][:cut] + data.draw(st.sampled_from(["0", " ", "(", ")", "]", "'", "#", "x"])) + lines[at][cut + 1:]
    new = "\n".join(lines)
    got = _carried(old, new)
    fresh = _built(new)
    if got is None or fresh is None:
        return  # not carried, or mypy stops at a syntax error there
    assert _plain(got[0]) == _plain(fresh[0])
    assert sorted(got[1]) == sorted(fresh[1])


def test_random_edits_are_carried_often() -> None:
    """The lane is taken: most edits of a line that writes no type are carried."""
    taken = 0
    for source in _FILES:
        lines = source.split("\n")
        plain = [i for i, ln in enumerate(lines) if ln.strip().startswith(("h = ", "y = ", "return ", "out = "))]
        for i in plain[:3]:
            new = "\n".join(lines[:i] + [lines[i] + "  # edited"] + lines[i + 1:])
            taken += _carried(source, new) is not None
    assert taken >= 20


_LINES = st.lists(st.sampled_from(["", "a", "b", "a b", "\\", "c\r"]), max_size=8)


@settings(max_examples=500, deadline=None, derandomize=True)
@given(_LINES, _LINES, _LINES, _LINES)
def test_changed_lines_are_the_lines_between_a_shared_start_and_end(
    head: List[str], old_mid: List[str], new_mid: List[str], tail: List[str]
) -> None:
    """changed_lines finds the lines between a common start and a common end
    on the bytes; its answer must rebuild both sides, and every line it
    leaves out must be one the two sides share at the same place."""
    old = "\n".join(head + old_mid + tail).encode()
    new = "\n".join(head + new_mid + tail).encode()
    first, old_part, new_part, previous = changed_lines(old, new)
    before, after = old.split(b"\n"), new.split(b"\n")
    same_end = len(before) - first - len(old_part)
    assert same_end == len(after) - first - len(new_part) >= 0
    assert before[:first] == after[:first]
    assert before[first:first + len(old_part)] == old_part
    assert after[first:first + len(new_part)] == new_part
    assert before[len(before) - same_end:] == after[len(after) - same_end:]
    assert previous == (before[first - 1] if first else b"")
    # no more lines than the two sides' own difference, plus at most one
    common = 0
    while common < min(len(before), len(after)) and before[common] == after[common]:
        common += 1
    assert first >= common - 1
