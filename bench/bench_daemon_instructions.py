"""The mypy daemon's own work per one-line edit, with the plugin / without,
counted in instructions (deterministic; wall time on a shared machine is not).

bench_plugin.py's "dmypy server-side" row times the daemon's fg_update_time
per edit; this script counts the instructions of the same region, the
daemon's fine-grained update (Server.find_reachable_changed_modules and
FineGrainedBuildManager.update), on the same inputs (examples/tp_mlp.py and
the generated file, bench_plugin.make_sides) and the same edits
(bench_plugin.edit_file).  Each side runs an in-process
mypy.dmypy_server.Server under valgrind's callgrind: the first full check
runs uninstrumented (--instr-atstart=no; the process switches
instrumentation on with callgrind_control once it is done), then --edits
one-line edits, each followed by cmd_check, collecting only inside those
two functions (--toggle-collect).

Needs valgrind (callgrind, callgrind_control).  Target <= 1.2 (issue 15, item 3).
Run:  python bench/bench_daemon_instructions.py [--edits 10] [--blocks 3] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _mypyrun import REPO, SIDES, git_state  # noqa: E402

TARGET = 1.2
# the region fg_update_time covers (mypyc-compiled names in mypy 2.x)
REGION = (
    "CPyDef_dmypy_server___Server___find_reachable_changed_modules",
    "CPyDef_update___FineGrainedBuildManager___update",
)


def child(side_name: str, edits: int, root: Path, blocks: int) -> None:
    """In the measured process: a first full check, then `edits` edits + checks."""
    import bench_plugin as bp
    from mypy.dmypy_server import Server, process_start_options

    side = bp.make_sides(root, blocks)[side_name]
    shutil.rmtree(side.cache, ignore_errors=True)
    os.chdir(side.dir)
    options = process_start_options(["--config-file", str(side.ini)], allow_sources=False)
    server = Server(options, str(side.dir / "inproc-dmypy.json"))
    for n in range(edits + 1):
        if n == 1:  # the first full check done: count from here on
            subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True, capture_output=True)
        if n:
            bp.edit_file(side, n)
        res = server.cmd_check(list(side.files), False, False, 80)
        if res["status"] != 0:
            raise SystemExit(f"{side_name}: mypy reported errors:\n{res['out']}")


def count(side_name: str, edits: int, work: Path, blocks: int) -> int:
    """Instructions collected in the region over one child run."""
    out = work / f"cg.{side_name}.{edits}"
    cmd = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
        *(f"--toggle-collect={fn}" for fn in REGION),
        f"--callgrind-out-file={out}",
        sys.executable, __file__, "--child", side_name, str(edits), str(work / f"run.{side_name}.{edits}"), str(blocks),
    ]
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(REPO))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"valgrind run failed ({side_name}, {edits} edits):\n{proc.stderr[-3000:]}")
    m = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
    if m is None:
        raise SystemExit(f"no totals in {out}")
    return int(m.group(1))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]), int(sys.argv[5]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edits", type=int, default=10, help="one-line edits counted per side (default 10)")
    ap.add_argument("--blocks", type=int, default=3, help="size of the generated file, as bench_plugin's --blocks")
    ap.add_argument("--repeats", type=int, default=1, help="runs of the pair, each in fresh directories (default 1)")
    args = ap.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("bench_daemon_instructions: needs valgrind (callgrind, callgrind_control); not found", file=sys.stderr)
        return 2
    # Each run's counts are exact, but a run's temporary paths (random names)
    # lay out mypy's and the plugin's dicts differently, which moves a side by
    # a few hundred thousand instructions per edit: --repeats runs the pair
    # again in fresh directories and reports the mean and the spread.
    per_edit: Dict[str, List[float]] = {side: [] for side in SIDES}
    ratios: List[float] = []
    for r in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="spmd-daemon-instr-") as tmp:
            work = Path(tmp)
            for side in SIDES:
                total = count(side, args.edits, work, args.blocks)
                per_edit[side].append(total / args.edits)
                print(f"run {r + 1}: {side:8s} {per_edit[side][-1] / 1e6:8.1f}M instructions per edit "
                      f"({total} over {args.edits} edits)", flush=True)
        ratios.append(per_edit["with"][-1] / per_edit["without"][-1])
        print(f"run {r + 1}: with / without {ratios[-1]:.4f}", flush=True)
    mean = {side: sum(v) / len(v) for side, v in per_edit.items()}
    ratio = mean["with"] / mean["without"]
    verdict = "ok" if ratio <= TARGET else "ABOVE"
    spread = f"; runs {min(ratios):.4f}-{max(ratios):.4f}" if len(ratios) > 1 else ""
    print(f"daemon's fine-grained update per one-line edit, with / without: {ratio:.3f} "
          f"({mean['with'] / 1e6:.1f}M / {mean['without'] / 1e6:.1f}M, mean of {len(ratios)} run(s){spread}) "
          f"(target <= {TARGET}: {verdict}); {git_state()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
