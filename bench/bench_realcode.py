"""The checker on real-style TP code: issue 13's figures on tests/corpus/realcode.

Prints, for the annotated corpus (Megatron, nanotron, picotron and
torchtitan styles; tests/corpus/realcode, seeded bugs in its bugs.py):

  false alarms      errors of mypy with the plugin on the clean corpus (goal 0),
                    each listed; those mypy without the plugin reports too are marked
  typed share       tensor expressions with a known SPMD type / all tensor
                    expressions (`python -m spmd_mypy.coverage`, goal >= 95%)
  seeded bugs       mutations reported at their line / all (goal all); the others
                    listed with where they were reported, if anywhere
  annotation lines  per 100 non-blank lines of corpus code (bugs.py excluded): lines
                    that contain `Spmd(` or call a typed function of spmd
                    (`spmd.all_reduce(`, `spmd.convert(`, `spmd.trusted(`,
                    `spmd.Axis(`, ... see TYPED_CALL); the checker's settings
                    (harness.mypy_ini: groups, synced_rng) are not code lines
  time ratio        mypy with / without the plugin on the corpus, torch's modules
                    cached (both caches warmed first), the corpus itself re-checked
                    in every run (a comment with the run number is appended to each
                    file of a per-side copy); sides interleaved, median of the rounds

Run:  python bench/bench_realcode.py [--rounds N]    (about 3-5 min on a warm machine)
"""

from __future__ import annotations

import argparse
import datetime
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

from _mypyrun import REPO, git_state, order

sys.path.insert(0, str(REPO / "tests" / "corpus"))
import harness  # noqa: E402

TYPED_CALL = re.compile(
    r"\bspmd\.(all_reduce|all_gather|reduce_scatter|all_to_all|reinterpret|convert|redistribute|"
    r"assert_spmd|matmul|einsum|linear|sum|mean|local_map|global_spmd|trusted|Axis)\("
)
SCRATCH = REPO / ".mypy_cache_corpus" / "bench"


def corpus_files() -> List[Path]:
    return sorted(p for p in harness.CORPUS.glob("*.py") if p.name != "bugs.py")


def annotation_density() -> Tuple[int, int]:
    """(annotation lines, non-blank lines) of the corpus code."""
    ann = code = 0
    for path in corpus_files():
        for text in path.read_text().splitlines():
            if text.strip():
                code += 1
                if "Spmd(" in text or TYPED_CALL.search(text):
                    ann += 1
    return ann, code


def typed_share(cache: Path) -> Tuple[str, str]:
    """The coverage tool's total line and per-file lines."""
    ini = SCRATCH / "coverage.ini"
    ini.write_text(harness.mypy_ini(cache))
    out = subprocess.run(
        [sys.executable, "-m", "spmd_mypy.coverage", "--config-file", str(ini), str(harness.CORPUS)],
        cwd=SCRATCH, capture_output=True, text=True, timeout=1800,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stdout + out.stderr)
    lines = out.stdout.splitlines()
    total = next(t for t in lines if t.startswith("total:"))
    files = "\n".join(f"    {Path(t.split(':')[0]).name}:{t.split(':', 1)[1]}" for t in lines
                      if "tensor expressions);" in t)
    return total, files


def timed_runs(rounds: int) -> Dict[str, List[float]]:
    copies = {side: SCRATCH / f"time_{side}" / "realcode" for side in ("with", "without")}
    for copy in copies.values():
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(harness.CORPUS, copy)
    times: Dict[str, List[float]] = {"with": [], "without": []}
    for i in range(-1, rounds):  # round -1 warms both caches
        for side in order(i % 2):
            for path in copies[side].glob("*.py"):
                path.write_text(path.read_text() + f"# run {i}\n")
            t0 = time.perf_counter()
            harness.run_mypy([copies[side]], copies[side].parent, SCRATCH / f"cache_{side}", side == "with")
            if i >= 0:
                times[side].append(time.perf_counter() - t0)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per side (default 5)")
    args = parser.parse_args()
    SCRATCH.mkdir(parents=True, exist_ok=True)
    start = datetime.datetime.now(datetime.timezone.utc)
    print(f"# bench_realcode  {start:%Y-%m-%d %H:%M} UTC  {git_state()}")

    clean = harness.check_clean(SCRATCH, SCRATCH / "cache_with")
    plain = {e.key() for e in harness.check_clean(SCRATCH, SCRATCH / "cache_without", plugin=False)}
    print(f"\nfalse alarms on the clean corpus: {len(clean)} (goal 0)"
          f"  [{sum(e.key() in plain for e in clean)} also reported without the plugin]")
    for e in clean:
        mark = "  (also without the plugin)" if e.key() in plain else ""
        print(f"    {e.key()}{mark}: {e.message[:110]}")

    total, files = typed_share(SCRATCH / "cache_with")
    print(f"\ntyped share (python -m spmd_mypy.coverage): {total}  (goal >= 95%)\n{files}")

    outcomes = harness.check_mutants(SCRATCH / "mutants", SCRATCH / "cache_mutants", clean)
    caught = [o for o in outcomes if o.status == "caught"]
    print(f"\nseeded bugs caught at their line: {len(caught)}/{len(outcomes)} (goal all)")
    for o in outcomes:
        if o.status != "caught":
            where = ", ".join(f"{e.line}: {e.code}" for e in o.new_errors) or "no new error"
            print(f"    {o.status}: {o.mutation.id} ({o.mutation.bug_class}; line {o.expected_line}; {where})")
        elif not o.code_matches:
            print(f"    caught with another code: {o.mutation.id} (expected {o.mutation.code})")

    ann, code = annotation_density()
    print(f"\nannotation lines per 100 lines of code: {100 * ann / code:.1f}  ({ann} of {code} non-blank lines"
          " contain `Spmd(` or a typed spmd.* call)")

    times = timed_runs(args.rounds)
    w, wo = statistics.median(times["with"]), statistics.median(times["without"])
    print(f"\ntime on the corpus, torch cached, corpus re-checked: with {w:.2f} s, without {wo:.2f} s;"
          f" ratio {w / wo:.2f} (median of {args.rounds} interleaved rounds)")
    print(f"    with:    {', '.join(f'{t:.2f}' for t in times['with'])}")
    print(f"    without: {', '.join(f'{t:.2f}' for t in times['without'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
