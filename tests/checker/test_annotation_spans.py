"""The annotation index from mypy's spans equals the index of the whole file.

The plugin parses only the annotations mypy's parse locates
(_mypy.annotation_spans); the reference here is the whole-file stdlib-ast
walk it replaces, on every checker fixture and example.
"""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from mypy import parse
from mypy.errors import Errors
from mypy.options import Options

from spmd_mypy.plugin import _mypy, annotations
from spmd_mypy.plugin._mypy import configurations
from spmd_mypy.vocab.opclasses import untyped_function

ROOT = Path(__file__).resolve().parents[2]


def _sources() -> List[Tuple[str, str]]:
    out = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "examples").rglob("*.py"))]
    for y in sorted((ROOT / "tests" / "fixtures").glob("*.yml")):
        for case in yaml.safe_load(y.read_text()):
            if case.get("main"):
                out.append((f"{y.name}:{case['case']}", case["main"]))
            for f in case.get("files") or []:
                out.append((f"{y.name}:{case['case']}:{f['path']}", f.get("content", "")))
    return out


SOURCES = _sources()


def _whole_file(source: str) -> Dict[object, object]:
    out: Dict[annotations.Pos, annotations.Meta] = {}
    annotations._collect(ast.parse(source), out)
    return _plain(out)


def _plain(index: Dict[annotations.Pos, annotations.Meta]) -> Dict[object, object]:
    return {
        pos: (tuple(ast.dump(e) for e in m.exprs), m.line, m.ambiguous, m.misplaced)
        for pos, m in index.items()
    }


def _spans(source: str, name: str = "m.py", marked: bool = False) -> object:
    options = Options()
    tree = parse.parse(source.encode(), name, "m", Errors(options), options, eager=True)
    return _mypy.annotation_spans(tree, annotations.marked_lines(source.encode()) if marked else None)


def test_the_sources_hold_annotations() -> None:
    assert len(SOURCES) > 200
    assert sum(len(_whole_file(s)) for _, s in SOURCES if "Annotated" in s) > 500


@pytest.mark.parametrize("name,source", [s for s in SOURCES if "Annotated" in s[1]], ids=lambda v: v if isinstance(v, str) and len(v) < 90 else None)
def test_index_from_spans_equals_the_whole_file_index(name: str, source: str) -> None:
    try:
        ast.parse(source)
    except SyntaxError:
        pytest.skip("not Python 3.11 syntax")
    whole = _whole_file(source)
    spans = _spans(source)
    assert spans is not None
    index = annotations._index_of_spans(source.encode(), spans)  # type: ignore[arg-type]
    assert index is not None
    assert _plain(index) == whole
    # Walking only the statements on lines that write Annotated: the same index.
    some = _spans(source, marked=True)
    assert some is not None and len(some) <= len(spans)  # type: ignore[arg-type]
    index = annotations._index_of_spans(source.encode(), some)  # type: ignore[arg-type]
    assert index is not None
    assert _plain(index) == whole


@contextlib.contextmanager
def _configured_functions_kept() -> Iterator[None]:
    """The rewrite registers the flags of configured functions process-wide: undone."""
    saved = (dict(configurations.FLAG_NAMES), dict(configurations._DECLARED), list(configurations._LISTENERS))
    configurations._LISTENERS.clear()
    try:
        yield
    finally:
        for live, kept in zip((configurations.FLAG_NAMES, configurations._DECLARED), saved):
            live.clear()
            live.update(kept)  # type: ignore[attr-defined]
        configurations._LISTENERS[:] = saved[2]


@pytest.mark.parametrize("name,source", [s for s in SOURCES if "Annotated" in s[1]], ids=lambda v: v if isinstance(v, str) and len(v) < 90 else None)
def test_the_rewritten_tree_gives_the_same_index(name: str, source: str) -> None:
    # The Tensor hook takes the spans from the tree the rewrite passes changed
    # (get_additional_deps runs first); what they insert writes no type, so
    # the walk may skip a block whose lines write no Annotated.
    try:
        ast.parse(source)
    except SyntaxError:
        pytest.skip("not Python 3.11 syntax")
    options = Options()
    tree = parse.parse(source.encode(), "m.py", "m", Errors(options), options, eager=True)
    with _configured_functions_kept():
        _mypy.route_declared_values(tree, untyped_function)
    some = _mypy.annotation_spans(tree, annotations.marked_lines(source.encode()))
    assert some is not None
    index = annotations._index_of_spans(source.encode(), some)  # type: ignore[arg-type]
    assert index is not None
    assert _plain(index) == _whole_file(source)


def test_a_multi_line_annotation_and_a_string_annotation() -> None:
    source = (
        "from typing import Annotated\n"
        "def f(x: Annotated[Tensor,\n"
        "        Spmd(tp=V)], y: \"Annotated[Tensor, Spmd(tp=R)]\") -> None: ...\n"
    )
    index = annotations._index_of_spans(source.encode(), _spans(source))  # type: ignore[arg-type]
    assert index is not None
    assert sorted(index) == [(2, 19), (3, 24)]  # the Tensor, and the string
    assert index[(2, 19)].line == 2 and ast.unparse(index[(2, 19)].exprs[0]) == "Spmd(tp=V)"
    assert ast.unparse(index[(3, 24)].exprs[0]) == "Spmd(tp=R)"


def test_files_mypy_columns_could_disagree_with_are_parsed_whole(tmp_path: Path) -> None:
    path = tmp_path / "u.py"
    path.write_text('def f(a: str = "\u00e9", x: Annotated[Tensor, Spmd(tp=V)] = 1) -> None: ...\n')

    def spans(marked: object) -> None:
        raise AssertionError("spans asked for a non-ASCII file")

    index, uses = annotations.scan(str(path), None, spans)
    assert uses and [ast.unparse(m.exprs[0]) for m in index.values()] == ["Spmd(tp=V)"]


def test_a_span_that_does_not_parse_falls_back_to_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x: Annotated[Tensor, Spmd(tp=V)]\n")
    index, _ = annotations.scan(str(path), None, lambda marked: [(1, 0, 1, 12)])  # cut mid-way
    assert list(index) == [(1, 13)]


def test_the_plugins_own_package_is_a_library_to_it(tmp_path: Path) -> None:
    # mypy analyzes spmd_mypy's runtime whenever checked code imports it; like
    # torch, it holds no SPMD annotations and gets no index, routing or carriers.
    own = ROOT / "spmd_mypy" / "vocab" / "spec.py"
    assert b"Spmd" in own.read_bytes()
    assert not annotations.mentions_spmd(str(own))
    copy = tmp_path / "spec.py"
    copy.write_bytes(own.read_bytes())
    assert annotations.mentions_spmd(str(copy))


def test_only_statements_on_marked_lines_are_walked() -> None:
    source = (
        "from typing import Annotated\n"
        "def f(x: int) -> int:\n"
        "    y: int = x\n"
        "    return y\n"
        "@dec\n"
        "def g(\n"
        "    x: Annotated[Tensor, Spmd(tp=V)],\n"
        ") -> None:\n"
        "    z: int = 1\n"
        "class C:\n"
        "    if flag:\n"
        "        w: Annotated[Tensor, Spmd(tp=R)]\n"
    )
    assert annotations.marked_lines(source.encode()) == [1, 7, 12]
    every = _spans(source)
    some = _spans(source, marked=True)
    assert every is not None and some is not None
    # f (lines 2-4) and g's body are skipped; g's signature and C's attribute are kept
    assert [s[0] for s in some] == [7, 8, 12]  # type: ignore[attr-defined]
    assert {s[0] for s in every} >= {2, 3, 7, 8, 9, 12}  # type: ignore[attr-defined]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["Annotated", "Annot", "ated", "x", " ", "\n", "\n\n"]), max_size=40))
def test_marked_lines_are_the_lines_that_write_annotated(parts: List[str]) -> None:
    data = "".join(parts).encode()
    expected = [i for i, text in enumerate(data.split(b"\n"), 1) if b"Annotated" in text]
    assert annotations.marked_lines(data) == expected
