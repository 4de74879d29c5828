"""mypy reports every buggy finishing function of gradsync_programs.py, and
nothing else: each line marked `# expect: spmd-gradsync` gets at least one
spmd-gradsync error, every error is on a marked line (the fixed finishing
functions, the models and the losses are clean)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROGRAMS = HERE / "gradsync_programs.py"
_LINE = re.compile(r"^[^:]+:(?P<line>\d+): error: .*  \[(?P<code>[a-z-]+)\]$")


def test_buggy_finishing_reported_fixed_clean() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "stubs" / "torch-spmd"), str(ROOT)]))
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "mypy.ini"), str(PROGRAMS)],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )
    assert out.returncode in (0, 1), out.stderr
    got = set()
    for text in out.stdout.splitlines():
        m = _LINE.match(text)
        if m is not None:
            got.add((int(m.group("line")), m.group("code")))
    lines = PROGRAMS.read_text().splitlines()
    marked = {(i, "spmd-gradsync") for i, t in enumerate(lines, 1) if "# expect: spmd-gradsync" in t}
    assert len(marked) == 8
    assert got == marked, out.stdout
