"""mypy (this checkout's plugin and mypy.ini) on one program, against the lines
the program marks `# expect: <code>` (tests/gradsync, tests/pipeline)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
_LINE = re.compile(r"^[^:]+:(?P<line>\d+): error: .*  \[(?P<code>[a-z-]+)\]$")


def reported(program: Path) -> Tuple[Set[Tuple[int, str]], str]:
    """The (line, code) of every error mypy reports in `program`, and its output."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "stubs" / "torch-spmd"), str(ROOT)]))
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "mypy.ini"), str(program)],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )
    assert out.returncode in (0, 1), out.stderr
    got = set()
    for text in out.stdout.splitlines():
        m = _LINE.match(text)
        if m is not None:
            got.add((int(m.group("line")), m.group("code")))
    return got, out.stdout


def marked(program: Path, code: str) -> Set[Tuple[int, str]]:
    """The (line, code) of every line marked `# expect: <code>`."""
    lines = program.read_text().splitlines()
    return {(i, code) for i, t in enumerate(lines, 1) if f"# expect: {code}" in t}
