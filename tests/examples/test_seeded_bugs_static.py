"""The checker flags every seeded-bug variant of the examples at the seeded line.

One mypy run (the repository's mypy.ini, from the repository root) checks
every buggy variant of seeded_bugs.py, written to a temporary directory as
its own module seeded_<id>: each must get exactly one error, at the flagged
line, with the seed's code.  (The unedited examples pass: test_examples.py
runs `mypy examples/`.)  Errors are matched by module file name, not by
directory: for a module unchanged since an earlier run, mypy replays its
cached errors under the path the module had then.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

import seeded_bugs
from examples_gloo import ROOT

_LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<msg>.*)  \[(?P<code>[a-z-]+)\]$")


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, List[Tuple[int, str, str]]]:
    tmp = tmp_path_factory.mktemp("seeded")
    files = []
    for seed in seeded_bugs.SEEDS:
        path = tmp / f"seeded_{seed.id}.py"
        path.write_text(seed.buggy_source())
        files.append(str(path))
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "mypy.ini"), *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Traceback" not in out.stderr + out.stdout, out.stderr + out.stdout
    errors: Dict[str, List[Tuple[int, str, str]]] = {s.id: [] for s in seeded_bugs.SEEDS}
    for line in out.stdout.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        name = Path(m["file"]).stem
        if name.startswith("seeded_") and name[len("seeded_"):] in errors:
            errors[name[len("seeded_"):]].append((int(m["line"]), m["code"], m["msg"]))
    return errors


@pytest.mark.parametrize("seed", seeded_bugs.SEEDS, ids=lambda s: s.id)
def test_checker_flags_seeded_line(mypy_errors: Dict[str, List[Tuple[int, str, str]]], seed: seeded_bugs.Seed) -> None:
    got = [(line, code) for line, code, _ in mypy_errors[seed.id]]
    assert got == [(seed.flagged_line(), seed.code)], mypy_errors[seed.id]
