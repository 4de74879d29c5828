"""Annotated examples: the checker accepts them, and tp_mlp.py trains on simulated ranks.

(The other examples train on real gloo ranks: test_examples_gloo.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_examples_reports_no_errors() -> None:
    """The README's main command, `mypy examples/` from the repository root, is clean."""
    examples = sorted(p.name for p in (ROOT / "examples").glob("*.py"))
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "examples/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"Success: no issues found in {len(examples)} source files" in out.stdout, out.stdout


def test_tensor_parallel_mlp_matches_single_process() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "tp_mlp.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "max abs error vs single process" in out.stdout
