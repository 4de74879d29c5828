"""expr_text, the text hints quote: it must mean what the source means.

The oracle is Python's own parser: the text of each expression, parsed
again, gives the same tree as the source (quotes, spacing, redundant
parentheses and float spelling aside, which the tree does not keep)."""

from __future__ import annotations

import ast

import pytest
from mypy.errors import Errors
from mypy.options import Options
from mypy.parse import parse

from spmd_mypy.plugin._mypy import UNRENDERED, expr_text

SOURCES = [
    "x",
    "a.b.c(d, e=1)[0]",
    "-x ** 2",
    "(-x) ** 2",
    "(a + b) * c - d / e",
    "a if b else c",
    "not a is b",
    "[f(t) for t in xs if t is not None][0]",
    "{'a': x, **d}['a']",
    "{x for x in ys}",
    "{k: v * 2 for k, v in d.items() if k}",
    "sum(t * 2 for t in xs)",
    "max((t for t in xs), key=len)",
    "[a for a, b in zip(xs, ys) for c in b]",
    "(lambda: x)()",
    "(lambda a, b=1: a @ b)(x, y)",
    "a if b else (lambda: c)",
    "(y := x @ w)",
    "[*xs, y]",
    "f(*xs, **kw)",
    "x[1:2, ::3]",
    "b'ab'",
    "(await h(x)) ** 2",
    "await h(x) + 1",
]


def _expr(source: str):
    options = Options()
    tree = parse(f"async def g():\n    z = {source}\n".encode(), "m.py", "m", Errors(options), options, eager=True)
    return tree.defs[0].body.body[0].rvalue  # type: ignore[attr-defined]


def _tree(text: str) -> str:
    return ast.dump(ast.parse(f"async def g():\n    z = {text}\n").body[0].body[0].value)  # type: ignore[attr-defined]


@pytest.mark.parametrize("source", SOURCES)
def test_the_text_parses_to_the_sources_tree(source: str) -> None:
    text = expr_text(_expr(source))
    assert text != UNRENDERED
    assert _tree(text) == _tree(source), text


def test_a_form_not_rendered_is_a_placeholder_no_name_can_be() -> None:
    text = expr_text(_expr("lambda *args: args"))
    assert text == UNRENDERED
    assert not text.isidentifier()


def test_a_long_expression_is_abbreviated_by_its_callee() -> None:
    args = ", ".join(f"argument_{i}" for i in range(20))
    assert expr_text(_expr(f"obj.method({args})")) == "obj.method(...)"
