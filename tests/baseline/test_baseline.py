"""python -m spmd_mypy.baseline on a tiny project: record two spmd errors, then only new ones fail.

One project directory and one mypy cache for every step (after the first run
mypy reads its cache).  The expected lines are those the test writes the
errors on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

from spmd_mypy.baseline import Error, load, new_errors

HEAD = '''from typing import Annotated
import torch
from torch import Tensor
import spmd_mypy as spmd
from spmd_mypy import Spmd, P, R
'''
COLLECTIVE = '''

def a(x: Annotated[Tensor, Spmd(tp=R)]) -> Tensor:
    return spmd.all_reduce(x, "tp", src=P, dst=R)
'''
SOFTMAX = '''

def b(x: Annotated[Tensor, Spmd(tp=P)]) -> Tensor:
    return torch.softmax(x, -1)
'''
THIRD = '''

def c(h: Annotated[Tensor, Spmd(tp=P)]) -> Tensor:
    return torch.exp(h)
'''
SOFTMAX_AGAIN = SOFTMAX.replace("def b(", "def b2(")


def _run(project: Path, *args: str) -> Tuple[int, List[str]]:
    env = dict(os.environ, SPMD_MYPY_STRICT="1")
    proc = subprocess.run(
        [sys.executable, "-m", "spmd_mypy.baseline", *args, "model.py"],
        cwd=project, capture_output=True, text=True, env=env, timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc.returncode, proc.stdout.splitlines()


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_baseline_flow(tmp_path: Path) -> None:
    (tmp_path / "mypy.ini").write_text(
        "[mypy]\nplugins = spmd_mypy.plugin\nallow_redefinition = True\ncache_dir = .mypy_cache\n"
    )
    model = tmp_path / "model.py"
    model.write_text(HEAD + COLLECTIVE + SOFTMAX)
    code, out = _run(tmp_path, "--write")
    assert (code, out) == (0, [".spmd-baseline.json: recorded 2 spmd errors"])
    recorded = json.loads((tmp_path / ".spmd-baseline.json").read_text())["errors"]
    assert [(r["file"], r["code"], r["count"]) for r in recorded] == [
        ("model.py", "spmd-collective", 1),
        ("model.py", "spmd-op", 1),
    ]

    # a third error: --check fails and names only it
    text = HEAD + COLLECTIVE + SOFTMAX + THIRD
    model.write_text(text)
    code, out = _run(tmp_path, "--check")
    assert code == 1
    line = _line_of(text, "torch.exp(h)")
    assert len(out) == 2 and out[0].startswith(f"model.py:{line}: error: torch.exp on axis 'tp' (h is P)")
    assert out[0].endswith("[spmd-op]") and out[1] == "1 spmd errors not in .spmd-baseline.json"

    # the recorded errors moved down (lines above them), the third one fixed: passes
    model.write_text(HEAD + "\n\n# moved\n" + SOFTMAX + COLLECTIVE)
    assert _run(tmp_path, "--check") == (0, ["0 spmd errors not in .spmd-baseline.json"])

    # one recorded error fixed: passes and says so
    model.write_text(HEAD + SOFTMAX)
    assert _run(tmp_path) == (
        0, ["0 spmd errors not in .spmd-baseline.json; 1 recorded errors fixed (--write shrinks the baseline)"]
    )

    # the same error twice where the baseline has it once: a count that grew fails
    text = HEAD + COLLECTIVE + SOFTMAX + SOFTMAX_AGAIN
    model.write_text(text)
    code, out = _run(tmp_path, "--check")
    assert code == 1
    lines = [_line_of(text, "def b("), _line_of(text, "def b2(")]
    assert [o.split(": error:")[0] for o in out[:-1]] == [f"model.py:{n + 1}" for n in lines]


def test_new_errors_counts() -> None:
    """The comparison alone: keys ignore line numbers, counts must not grow."""
    e1 = Error("m.py", 3, "spmd-op", "softmax of x (defined on line 2)")
    moved = Error("m.py", 9, "spmd-op", "softmax of x (defined on line 8)")
    other = Error("m.py", 4, "spmd-arg", "y is R")
    baseline = {e1.key(): 1, other.key(): 1}
    assert new_errors([moved], baseline) == ([], 1)
    assert new_errors([moved, e1], baseline) == ([moved, e1], 1)
    assert new_errors([e1, other, Error("n.py", 4, "spmd-arg", "y is R")], baseline)[0] == [
        Error("n.py", 4, "spmd-arg", "y is R")
    ]
    with pytest.raises(ValueError):
        load('{"version": 0, "errors": []}')
