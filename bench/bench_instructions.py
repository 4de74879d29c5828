"""The plugin's cost on the user's own code, counted in instructions.

Wall time on this shared 2-core machine drifts by tens of percent between
runs; instruction counts are exact per run.  For each input, each side
("with" the plugin, "without") gets its own copy of the code, its own cache
and a config that differs only by the plugins line:

  1. a first mypy run fills the cache (torch's modules included) and must
     report no error, on either side;
  2. every module of the user's code is edited (a last comment line), so
     the next run checks all of it again while torch comes from the cache;
  3. that run goes under `valgrind --tool=callgrind` (the whole process,
     start-up included; PYTHONHASHSEED=0), and its total is the figure.

Inputs:
  scale    bench_scale's distinct generated codebase (gen_distinct: every
           module drawn afresh, no repeated unit) at each of --sizes lines;
           prints the ratio at each size and, between consecutive sizes, the
           ratio of the added instructions (the cost per added line)
  corpus   the annotated real-style corpus tests/corpus/realcode (bugs.py
           left out), with the corpus's own checker settings

The plugin's bytecode is written first (bench/_mypyrun.compile_plugin).
The counts move by 0.1-0.2% between runs with their temporary paths (dict
layouts); a step smaller than that needs several runs.
Target (issue 15, item 3): <= 1.15 at every size and per added line.

Needs valgrind.  Run:
    python bench/bench_instructions.py [--sizes 5000,10000,20000] [--no-corpus]
(about 1 minute of valgrind per 5,000 lines per side)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _mypyrun import REPO, SIDES, child_env, compile_plugin, git_state  # noqa: E402
import bench_scale  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "corpus"))
import harness  # noqa: E402

TARGET = 1.15
_TOTAL = re.compile(r"^(?:summary|totals): (\d+)", re.M)


def _mypy(config: Path, targets: List[str]) -> List[str]:
    return [sys.executable, "-m", "mypy", "--config-file", str(config), *targets]


def _run(cmd: List[str], cwd: Path, clean: bool) -> None:
    """One mypy run; with the plugin the code must check clean, without it
    only finish (plain mypy reports a few errors on the corpus, which the
    plugin's parameter types answer)."""
    proc = subprocess.run(cmd, cwd=cwd, env=child_env(), capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    ok = proc.returncode == 0 if clean else proc.returncode in (0, 1) and "INTERNAL ERROR" not in out
    if not ok:
        raise SystemExit(f"{' '.join(cmd[-3:])}: mypy exit {proc.returncode}:\n{out[-3000:]}")


def counted(cmd: List[str], cwd: Path, out: Path, clean: bool) -> int:
    """Instructions of one whole run of cmd under callgrind (its exit status
    as _run's)."""
    env = dict(child_env(), PYTHONHASHSEED="0")
    vg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd]
    proc = subprocess.run(vg, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode not in ((0,) if clean else (0, 1)) or "INTERNAL ERROR" in proc.stdout:
        raise SystemExit(f"valgrind run failed:\n{proc.stderr[-3000:]}")
    m = _TOTAL.search(out.read_text())
    if m is None:
        raise SystemExit(f"no totals in {out}")
    out.unlink()
    return int(m.group(1))


def _edit_all(files: List[Path], n: int) -> None:
    for path in files:
        path.write_text(path.read_text() + f"# bench-instructions run {n}\n")


def pair(sides: Dict[str, Tuple[List[str], Path, Path, Callable[[], List[Path]]]], work: Path) -> Dict[str, int]:
    """Per side (command, cwd, config, the user's files): warm, edit every file, count."""
    counts = {}
    for name, (cmd, cwd, _config, files) in sides.items():
        _run(cmd, cwd, clean=name == "with")
        _edit_all(files(), 1)
        counts[name] = counted(cmd, cwd, work / f"callgrind.{name}", clean=name == "with")
    return counts


def scale_sides(root: Path, lines: int) -> Tuple[Dict[str, tuple], int]:
    sides, n = bench_scale.make_sides(root, lines)
    out = {}
    for name, side in sides.items():
        pkg = side.dir / bench_scale.gen_codebase.PACKAGE
        cmd = _mypy(side.ini, [bench_scale.gen_codebase.PACKAGE])
        out[name] = (cmd, side.dir, side.ini, lambda pkg=pkg: sorted(pkg.glob("*.py")))
    return out, n


def corpus_sides(root: Path) -> Dict[str, tuple]:
    out = {}
    for name in SIDES:
        base = root / f"corpus_{name}"
        copy = base / "realcode"
        shutil.copytree(harness.CORPUS, copy, ignore=shutil.ignore_patterns("__pycache__"))
        (copy / "bugs.py").unlink()
        ini = base / "mypy.ini"
        ini.write_text(harness.mypy_ini(base / "cache", plugin=name == "with"))
        out[name] = (_mypy(ini, ["realcode"]), base, ini, lambda copy=copy: sorted(copy.glob("*.py")))
    return out


def _verdict(ratio: float) -> str:
    return "ok" if ratio <= TARGET else "ABOVE"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="5000,10000,20000", help="lines of the generated codebase ('' for none)")
    ap.add_argument("--no-corpus", action="store_true", help="leave out the real-style corpus")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("bench_instructions: needs valgrind; not found", file=sys.stderr)
        return 2
    compile_plugin()
    print(f"# bench_instructions  {git_state()}", flush=True)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    rows: List[Tuple[int, int, int]] = []
    with tempfile.TemporaryDirectory(prefix="spmd-instr-") as tmp:
        work = Path(tmp)
        for size in sizes:
            sides, lines = scale_sides(work / f"scale{size}", size)
            c = pair(sides, work)
            rows.append((lines, c["with"], c["without"]))
            r = c["with"] / c["without"]
            print(f"scale {lines:6d} lines: with {c['with'] / 1e9:.4f}e9, without {c['without'] / 1e9:.4f}e9,"
                  f" ratio {r:.4f} (target <= {TARGET}: {_verdict(r)})", flush=True)
            shutil.rmtree(work / f"scale{size}")
        for (l0, w0, o0), (l1, w1, o1) in zip(rows, rows[1:]):
            r = (w1 - w0) / (o1 - o0)
            print(f"per added line, {l0} -> {l1}: ratio {r:.4f} (target <= {TARGET}: {_verdict(r)})", flush=True)
        if not args.no_corpus:
            c = pair(corpus_sides(work), work)
            r = c["with"] / c["without"]
            print(f"corpus tests/corpus/realcode: with {c['with'] / 1e9:.4f}e9, without {c['without'] / 1e9:.4f}e9,"
                  f" ratio {r:.4f} (target <= {TARGET}: {_verdict(r)})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
