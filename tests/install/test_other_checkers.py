"""Annotated code stays clean under pyright (basedpyright, in pyright's
standard mode) and pyrefly, checkers without our plugin: there an
`Annotated[Tensor, Spmd(...)]` is a plain Tensor and `spmd_mypy` an ordinary
typed package.  The commands (from the repository root):

    basedpyright -p <config: {"typeCheckingMode": "standard", "include": ["examples"]}>
    pyrefly check -c <empty pyrefly.toml> examples/*.py
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(str(p) for p in (ROOT / "examples").glob("*.py"))


def _run(checker: str, args: List[str]) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(checker) is None:
        pytest.skip(f"{checker} is not installed (it is in the test extras)")
    # The interpreter running the tests, whose PYTHONPATH (tests/conftest.py) holds this checkout.
    return subprocess.run(
        [sys.executable, "-m", checker, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_examples_are_clean_under_pyright(tmp_path: Path) -> None:
    config = tmp_path / "pyrightconfig.json"
    config.write_text(json.dumps({"typeCheckingMode": "standard", "include": [str(ROOT / "examples")]}))
    done = _run("basedpyright", ["-p", str(config), "--pythonpath", sys.executable])
    assert done.returncode == 0 and "0 errors" in done.stdout, done.stdout + done.stderr


def test_examples_are_clean_under_pyrefly(tmp_path: Path) -> None:
    config = tmp_path / "pyrefly.toml"
    config.write_text("")
    done = _run("pyrefly", ["check", "-c", str(config), "--python-interpreter-path", sys.executable, *EXAMPLES])
    assert done.returncode == 0, done.stdout + done.stderr
