"""mypy reports the buggy stage of pipeline_programs.py at its send, and
nothing else: every line marked `# expect: spmd-arg` gets an spmd-arg error,
every error is on a marked line (the stages, the fixed schedule, the loss
and the finishing function are clean)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROGRAMS = HERE / "pipeline_programs.py"
_LINE = re.compile(r"^[^:]+:(?P<line>\d+): error: .*  \[(?P<code>[a-z-]+)\]$")


def test_buggy_send_reported_fixed_clean() -> None:
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
    marked = {(i, "spmd-arg") for i, t in enumerate(lines, 1) if "# expect: spmd-arg" in t}
    assert len(marked) == 1
    assert got == marked, out.stdout
