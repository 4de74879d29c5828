"""Issue 13's progress on the realcode corpus: known false alarms and missed seeded bugs.

Two mypy runs with the plugin (harness.py): the clean corpus, whose errors
must be exactly the false alarms listed in known_gaps.txt, and one batch of
every seeded mutation of realcode/bugs.py, each of which must be caught at
its line except those listed there with their status.  A new false alarm, a
fixed one still listed, a newly missed bug or a newly caught one still listed
all fail: update known_gaps.txt in the commit that changes the checker.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from realcode.bugs import MUTATIONS  # noqa: E402


@pytest.fixture(scope="module")
def workdir(request: pytest.FixtureRequest) -> Path:
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("realcode_corpus"))
    path = harness.ROOT / ".pytest_mypy" / "realcode_corpus"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def clean_errors(workdir: Path) -> List[harness.Error]:
    return harness.check_clean(workdir, workdir / "cache_clean")


def test_corpus_is_large_enough() -> None:
    lines = sum(1 for p in harness.CORPUS.glob("*.py") if p.name != "bugs.py"
                for text in p.read_text().splitlines() if text.strip())
    assert lines >= 1500, lines
    assert len(MUTATIONS) >= 15


def test_false_alarms_are_the_known_ones(clean_errors: List[harness.Error]) -> None:
    alarms, _ = harness.read_known_gaps()
    got = Counter(e.key() for e in clean_errors)
    known = Counter(key for key, _ in alarms)
    new = {k: f"{got[k] - known[k]}x" for k in got if got[k] > known[k]}
    fixed = {k: f"{known[k] - got[k]}x" for k in known if known[k] > got[k]}
    details = [f"{e.key()}: {e.message}" for e in clean_errors if e.key() in new]
    assert not new and not fixed, (
        f"new false alarms (fix the checker or list them with a reason): {new}\n"
        + "\n".join(details)
        + f"\nfixed (remove from known_gaps.txt): {fixed}"
    )


def test_seeded_bugs_caught_or_known(workdir: Path, clean_errors: List[harness.Error]) -> None:
    _, known = harness.read_known_gaps()
    assert set(known) <= {m.id for m in MUTATIONS}, set(known) - {m.id for m in MUTATIONS}
    outcomes = harness.check_mutants(workdir / "mutants", workdir / "cache_mutants", clean_errors)
    wrong = []
    for out in outcomes:
        expected = known[out.mutation.id][0] if out.mutation.id in known else "caught"
        if out.status != expected:
            wrong.append(f"{out.mutation.id}: {out.status}, known_gaps.txt says {expected} "
                         f"(line {out.expected_line}; new errors {[(e.line, e.code) for e in out.new_errors]})")
    assert not wrong, "\n".join(wrong)
