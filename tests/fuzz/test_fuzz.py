"""Robustness: mypy with the plugin on generated, malformed and half-edited sources.

Seeds (corpus.py) are mutated (mutate.py) into cases.  For every case:

  * mypy never crashes: no traceback, no INTERNAL ERROR;
  * no hook falls back: the plugin runs as in a user's run (not strict), and
    no `spmd-internal` note (a check skipped after an internal error) appears;
  * the exit status is 0 or 1, or 2 only when mypy reports a syntax error
    ([syntax]) itself;
  * every malformed Spmd(...) annotation (unknown axis, bad type name, wrong
    S(i) dim, undefined name, wrong argument kinds) gets an spmd-annotation
    error at its line.

Cases that parse are checked in one batched mypy run; cases with a syntax
error stop mypy at their first file, so each runs alone.  A mypy daemon
follows one file through a series of edits (as an editor does).

    SPMD_FUZZ_N=3000 SPMD_FUZZ_SYNTAX_N=200 SPMD_FUZZ_DAEMON_EDITS=60 \\
        python -m pytest tests/fuzz -q -s            # thousands of cases

Defaults: 150 batched cases, 8 syntax-error cases, 8 daemon edits.  The
summary lines are printed; SPMD_FUZZ_REPORT=FILE also writes them as JSON.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from soundness.mypy_batch import CRASH_MARKERS, MypyReport, mypy_ini, run_mypy

from .corpus import SEEDS
from .mutate import Case, make_case

N = int(os.environ.get("SPMD_FUZZ_N", "150"))
N_SYNTAX = int(os.environ.get("SPMD_FUZZ_SYNTAX_N", "8"))
N_EDITS = int(os.environ.get("SPMD_FUZZ_DAEMON_EDITS", "8"))

# Unknown axis names are errors only with declared axes; the fine-grained
# cache lets the daemon start from the batch run's cache.
EXTRA_INI = "cache_fine_grained = True\n\n[spmd_mypy]\naxes = dp, tp\n"
SEED_NAMES = sorted(SEEDS)

# Silences the fuzzer found, as fixed cases: (source, line that must get an
# spmd-annotation error, strict-xfail reason or "" once fixed).
REGRESSIONS: Dict[str, Tuple[str, int, str]] = {
    "assert_spmd_unknown_axis": (
        "from torch import Tensor\n"
        "import spmd_mypy as spmd\n"
        "from spmd_mypy import Spmd, R\n"
        "\n"
        "def f(x: Tensor) -> None:\n"
        "    spmd.assert_spmd(x, Spmd(ep=R))\n",
        6,
        "",  # F3, fixed: assert_spmd's Spmd(...) is checked against the configured axes
    ),
}
# A planted case silent for an open regression above counts under its name.
KNOWN_SILENT: Tuple[Tuple[str, str], ...] = ()


def make_cases(n_parse: int, n_syntax: int) -> Tuple[List[Case], List[Case]]:
    """Deterministic cases: n_parse that parse, n_syntax that do not."""
    parse, broken = [], []
    i = 0
    while (len(parse) < n_parse or len(broken) < n_syntax) and i < 20 * (n_parse + n_syntax) + 100:
        seed_name = SEED_NAMES[i % len(SEED_NAMES)]
        case = make_case(f"case_{i:05d}_{seed_name}", SEEDS[seed_name], seed=i)
        if case.parses():
            if len(parse) < n_parse:
                parse.append(case)
        elif len(broken) < n_syntax:
            broken.append(case)
        i += 1
    return parse, broken


def _crashed(text: str) -> bool:
    return any(m in text for m in CRASH_MARKERS)


def _annotation_errors(report: MypyReport, stem: str) -> Dict[int, List[str]]:
    out: Dict[int, List[str]] = {}
    for line, code, msg in report.errors.get(stem, []):
        if code == "spmd-annotation":
            out.setdefault(line, []).append(msg)
    return out


_BLOCKING = re.compile(r"^(?P<path>[^:]+\.py):\d+: error: .*\[syntax\]$", re.M)


class Batch:
    def __init__(self, cases: List[Case], report: MypyReport, moved: List[Case]) -> None:
        self.cases = cases
        self.report = report
        self.moved = moved  # parsed by ast, rejected by mypy's parser: run alone


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def cases() -> Tuple[List[Case], List[Case]]:
    return make_cases(N, N_SYNTAX)


@pytest.fixture(scope="module")
def batch(cases: Tuple[List[Case], List[Case]], workdir: Path, fuzz_mypy_cache: Path) -> Batch:
    parse = list(cases[0])
    seeds = [Case(f"seed_{name}", SEEDS[name]) for name in SEED_NAMES]
    seeds += [Case(f"regression_{name}", src) for name, (src, _, _) in REGRESSIONS.items()]
    moved: List[Case] = []
    for _ in range(20):
        files = []
        for c in seeds + parse:
            path = workdir / f"{c.name}.py"
            path.write_text(c.source)
            files.append(path)
        report = run_mypy(files, workdir, fuzz_mypy_cache, EXTRA_INI, strict=False)
        blocked = {Path(m["path"]).stem for m in _BLOCKING.finditer(report.stdout)}
        if report.exit_status != 2 or not blocked:
            return Batch(parse, report, moved)
        # mypy's parser rejects a file stdlib ast accepts: run that one alone
        moved += [c for c in parse if c.name in blocked]
        parse = [c for c in parse if c.name not in blocked]
    raise AssertionError(f"the batch keeps stopping on syntax errors:\n{report.stdout[-3000:]}")


def _summary(name: str, data: Dict[str, object]) -> None:
    line = f"\nfuzz {name}: " + ", ".join(f"{k} {v}" for k, v in data.items())
    print(line)
    path = os.environ.get("SPMD_FUZZ_REPORT")
    if path:
        p = Path(path)
        old = json.loads(p.read_text()) if p.exists() else {}
        old[name] = data
        p.write_text(json.dumps(old, indent=2) + "\n")


def test_seeds_are_clean(batch: Batch) -> None:
    """Control: unmutated seeds get no spmd-annotation error, so every planted one is the mutation's."""
    for name in SEED_NAMES:
        errs = _annotation_errors(batch.report, f"seed_{name}")
        assert not errs, f"seed {name}: {errs}"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=why, strict=True)) if why else n
        for n, (_, _, why) in REGRESSIONS.items()
    ],
)
def test_regression(batch: Batch, name: str) -> None:
    _, line, _ = REGRESSIONS[name]
    assert line in _annotation_errors(batch.report, f"regression_{name}")


def test_batch_never_crashes_and_reports_every_malformed_annotation(
    batch: Batch, capsys: pytest.CaptureFixture
) -> None:
    report = batch.report
    assert not _crashed(report.stdout + report.stderr), (report.stdout + report.stderr)[-5000:]
    fallbacks = report.fallbacks()
    assert report.exit_status in (0, 1), report.stdout[-3000:]
    silent: List[str] = []
    planted = reported = 0
    odd_silent: Counter = Counter()
    known_silent: Counter = Counter()
    unchecked_silent = 0
    for c in batch.cases:
        errs = _annotation_errors(report, c.name)
        any_error = {line for line, _, _ in report.errors.get(c.name, [])}
        for line, what in c.planted:
            planted += 1
            # Spmd(...) passed to assert_spmd is an expression mypy checks itself
            # (an undefined name, an argument of the wrong type): any error will do
            if line in errs or (what.startswith("assert_spmd") and line in any_error):
                reported += 1
                continue
            known = next((k for k, prefix in KNOWN_SILENT if what.startswith(prefix)), "")
            if known:
                known_silent[known] += 1
            else:
                silent.append(f"{c.name}.py:{line}: {what}: {c.source.splitlines()[line - 1].strip()}")
        for line, what in c.odd:
            if line not in any_error and not what.startswith("(after edits)"):
                odd_silent[what] += 1
        unchecked_silent += sum(1 for line, _ in c.unchecked if line not in errs)
    with capsys.disabled():
        _summary(
            "batch",
            {
                "files": len(batch.cases),
                "exit": report.exit_status,
                "crashes": 0,
                "fallbacks": len(fallbacks),
                "malformed annotations planted": planted,
                "reported at their line": reported,
                "silent": len(silent),
                "silent under open findings": dict(known_silent),
                "in bodies mypy does not check": sum(len(c.unchecked) for c in batch.cases),
                "of those silent": unchecked_silent,
                "odd placements": sum(len(c.odd) for c in batch.cases),
                "odd with no error at all": dict(odd_silent),
                "moved to single runs": len(batch.moved),
            },
        )
    assert planted > 0
    assert not fallbacks, f"{len(fallbacks)} check(s) skipped after an internal error:\n" + "\n".join(fallbacks[:30])
    assert not silent, f"{len(silent)} malformed annotation(s) without an spmd-annotation error:\n" + "\n".join(silent[:30])


def _syntax_ok(out: str, stem: str) -> bool:
    return any(f"{stem}.py:" in ln and ln.endswith("[syntax]") for ln in out.splitlines())


def test_syntax_errors_are_reported_by_mypy(
    cases: Tuple[List[Case], List[Case]], batch: Batch, workdir: Path, fuzz_mypy_cache: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    broken = list(cases[1]) + batch.moved
    statuses: Counter = Counter()
    problems = []
    for c in broken:
        d = workdir / "single" / c.name
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{c.name}.py"
        path.write_text(c.source)
        r = run_mypy([path], d, fuzz_mypy_cache, EXTRA_INI, strict=False)
        statuses[r.exit_status] += 1
        text = r.stdout + r.stderr
        if _crashed(text):
            problems.append(f"{c.name}: crash\n{text[-3000:]}")
        elif r.fallbacks():
            problems.append(f"{c.name}: fallback\n" + "\n".join(r.fallbacks()))
        elif r.exit_status not in (0, 1, 2) or (r.exit_status == 2 and not _syntax_ok(r.stdout, c.name)):
            problems.append(f"{c.name}: exit {r.exit_status}\n{text[-2000:]}")
    with capsys.disabled():
        _summary("syntax", {"files": len(broken), "exit statuses": dict(statuses), "problems": len(problems)})
    assert not problems, "\n\n".join(problems)


def _dmypy(status: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(status), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)


def test_daemon_survives_a_series_of_edits(
    batch: Batch, workdir: Path, fuzz_mypy_cache: Path, capsys: pytest.CaptureFixture
) -> None:
    """One file edited again and again (valid, malformed, broken, fixed) under `dmypy check`."""
    d = workdir / "daemon"
    d.mkdir(exist_ok=True)
    (d / "mypy.ini").write_text(mypy_ini(fuzz_mypy_cache, EXTRA_INI))
    status = d / "dmypy.json"
    target = d / "edited.py"
    target.write_text(SEEDS[SEED_NAMES[0]])
    started = _dmypy(status, d, "start", "--", "--config-file", "mypy.ini", "--use-fine-grained-cache")
    assert started.returncode == 0, started.stdout + started.stderr
    problems: List[str] = []
    statuses: Counter = Counter()
    planted = reported = 0
    try:
        first = _dmypy(status, d, "check", "edited.py")
        assert not _crashed(first.stdout + first.stderr), first.stdout + first.stderr
        previous = target.read_text()
        for k in range(N_EDITS):
            seed_name = SEED_NAMES[k % len(SEED_NAMES)]
            case = make_case(f"edit_{k}", SEEDS[seed_name], seed=10_000 + k, editor=(k % 2 == 1))
            text = case.source
            # dmypy sees an edit by size and whole-second mtime: make the size differ
            if len(text.encode()) == len(previous.encode()):
                text += "#\n"
            target.write_text(text)
            previous = text
            r = _dmypy(status, d, "check", "edited.py")
            statuses[r.returncode] += 1
            out = r.stdout + r.stderr
            if _crashed(out) or "Daemon crashed" in out or r.returncode not in (0, 1, 2):
                problems.append(f"edit {k} ({case.edits}): exit {r.returncode}\n{out[-3000:]}")
                break
            if r.returncode == 2 and not _syntax_ok(r.stdout, "edited"):
                problems.append(f"edit {k}: exit 2 without a syntax error\n{out[-2000:]}")
            lines = {int(m.group(1)) for m in re.finditer(r"^edited\.py:(\d+): error: .*\[spmd-annotation\]$", r.stdout, re.M)}
            for line, what in case.planted:
                planted += 1
                if line in lines:
                    reported += 1
                else:
                    problems.append(f"edit {k}: line {line} ({what}) silent under dmypy")
    finally:
        pid = None
        try:
            pid = int(json.loads(status.read_text())["pid"])
        except (OSError, ValueError, KeyError):
            pass
        _dmypy(status, d, "stop")
        if pid is not None:
            for _ in range(100):  # on a cold cache the daemon writes it before exiting
                if not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, 15)  # the daemon this test started
                except ProcessLookupError:
                    pass  # it exited meanwhile
    with capsys.disabled():
        _summary(
            "daemon",
            {"edits": N_EDITS, "exit statuses": dict(statuses), "planted": planted, "reported": reported,
             "problems": len(problems)},
        )
    assert not problems, "\n\n".join(problems[:10])
