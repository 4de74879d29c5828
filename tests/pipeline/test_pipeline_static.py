"""mypy reports the buggy stage of pipeline_programs.py at its send, and
nothing else: every line marked `# expect: spmd-arg` gets an spmd-arg error,
every error is on a marked line (the stages, the fixed schedule, the loss
and the finishing function are clean)."""

from __future__ import annotations

from pathlib import Path

from marked_errors import marked, reported

PROGRAMS = Path(__file__).resolve().with_name("pipeline_programs.py")


def test_buggy_send_reported_fixed_clean() -> None:
    got, output = reported(PROGRAMS)
    want = marked(PROGRAMS, "spmd-arg")
    assert len(want) == 1
    assert got == want, output
