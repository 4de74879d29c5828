"""mypy reports every buggy finishing function of gradsync_programs.py, and
nothing else: each line marked `# expect: spmd-gradsync` gets at least one
spmd-gradsync error, every error is on a marked line (the fixed finishing
functions, the models and the losses are clean)."""

from __future__ import annotations

from pathlib import Path

from marked_errors import marked, reported

PROGRAMS = Path(__file__).resolve().with_name("gradsync_programs.py")


def test_buggy_finishing_reported_fixed_clean() -> None:
    got, output = reported(PROGRAMS)
    want = marked(PROGRAMS, "spmd-gradsync")
    assert len(want) == 8
    assert got == want, output
