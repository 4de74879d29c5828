"""sourcefile.statements finds exactly the statements ast.walk finds.

The file indexes that look only for statements (no-grad regions, trusted
Functions, annotated assignments, `global` names) walk statements alone; a
statement it missed would drop a region or a declaration.  The oracle is
ast.walk itself, on every Python file of this checkout (every statement
form Python has occurs in them, match and try/except* written below too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from spmd_mypy.plugin.sourcefile import statements

ROOT = Path(__file__).resolve().parents[2]

EXTRA = '''
def f(x):
    match x:
        case [a, *rest] if a:
            with open(a) as h:
                pass
        case _:
            try:
                y = 1
            except* ValueError:
                z: int = 2
            else:
                global g
            finally:
                async def k():
                    async with x:
                        async for i in x:
                            pass
                    while x:
                        break
                    else:
                        continue
class C:
    lam = lambda: [i for i in (lambda: 0)()]
'''


def _walked(tree: ast.AST) -> list:
    return sorted(id(n) for n in ast.walk(tree) if isinstance(n, ast.stmt))


def _ours(tree: ast.AST) -> list:
    return sorted(id(n) for n in statements(tree) if isinstance(n, ast.stmt))


@pytest.mark.parametrize("where", ["spmd_mypy", "tests", "examples"])
def test_statements_of_every_file_here(where: str) -> None:
    files = sorted((ROOT / where).rglob("*.py"))
    assert files
    for path in files:
        tree = ast.parse(path.read_text())
        assert _ours(tree) == _walked(tree), path


def test_statements_of_every_form() -> None:
    tree = ast.parse(EXTRA)
    assert _ours(tree) == _walked(tree)
    kinds = {type(n).__name__ for n in statements(tree)}
    assert {"Match", "TryStar", "AsyncWith", "AsyncFor", "While", "Global", "AnnAssign", "Break"} <= kinds
