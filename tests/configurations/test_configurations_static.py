"""The checker passes configurations_programs.py in every configuration, and
reports a bug planted in one configuration only, naming that configuration."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROGRAMS = HERE / "configurations_programs.py"
_ERROR = re.compile(r"^[^:]+:(?P<line>\d+): error: (?P<msg>.*)  \[(?P<code>[a-z-]+)\]$")
SP_RETURN = 'return spmd.reduce_scatter(partial, "tp", src=P, dst=S(0))'
BYPASS = "return x  # one rank"


def _errors(path: Path) -> List[Tuple[int, str]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "stubs" / "torch-spmd"), str(ROOT)]))
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--config-file", str(ROOT / "mypy.ini"), str(path)],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )
    assert out.returncode in (0, 1), out.stdout + out.stderr
    return [(int(m["line"]), m["msg"]) for m in map(_ERROR.match, out.stdout.splitlines()) if m]


def test_programs_clean_and_planted_bugs_named(tmp_path: Path) -> None:
    source = PROGRAMS.read_text()
    assert _errors(PROGRAMS) == []
    lines = source.splitlines()
    # all_reduce where SP needs a reduce-scatter: wrong only with sequence_parallel=True
    sp_line = next(i for i, t in enumerate(lines, 1) if SP_RETURN in t)
    # no bypass test: the P value returned as I is wrong with 2 ranks, right with 1
    bypass_line = next(i for i, t in enumerate(lines, 1) if BYPASS in t)
    buggy = source.replace(SP_RETURN, 'return spmd.all_reduce(partial, "tp", src=P, dst=I)').replace(
        "if get_tensor_model_parallel_world_size() == 1:", "if True:"
    )
    path = tmp_path / "configurations_buggy.py"
    path.write_text(buggy)
    got = _errors(path)
    assert [line for line, _ in got] == [sp_line, bypass_line], got
    assert got[0][1].startswith("in configuration sequence_parallel=True: Returned value is I on axis 'tp' where S(0)")
    assert got[1][1].startswith(
        "in configuration get_tensor_model_parallel_world_size=2: Returned value is P on axis 'tp' where I"
    ), got[1]
