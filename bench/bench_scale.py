"""mypy with the spmd_mypy plugin vs without, on a generated 20,000-line training codebase.

The codebase comes from bench/gen_codebase.py (package `trainer`: shared
types and collectives helpers, one hand-written unit of tensor-parallel
layers, expert-parallel MoE, a model and training steps, then distinct
generated modules from bench/gen_distinct.py, no two functions alike, so no
memo answers for repeated code).  Each side ("with", "without") gets its own copy of the files,
its own cache dir and a config that differs only by the
`plugins = spmd_mypy.plugin` line.

Modes (each side by side, rounds interleaved, alternating which side goes first;
with --together the two runs of a round start at the same instant, one per core):

  cold     empty cache before every run, --lines lines           target <= 1.10
  warm     cache filled by an untimed run, no edits               target <= 1.10
  scaling  at each of --sizes: torch's modules cached, every
           module of the codebase edited (a comment line) before
           every run, so the time is mostly checking the codebase; a
           least-squares line time = a + b * lines per side, its
           R^2, the marginal cost per 1,000 lines between sizes,
           and the with/without ratio at each size                target: linear;
           the ratio (the plugin's cost on the user's own code)   <= 1.15 at every
                                                                  size, and flat
           (verdict "linear": R^2 >= 0.95 and the last step's
           marginal cost at most 1.25x the fitted slope)

Before timing, both configs check the largest codebase on a fresh cache:
both must report "Success: no issues found" (the plugin must not change
mypy's verdict on clean code, and the generated code has no false alarm), and
a probe with a known bug must give an spmd error with the plugin only.

Run:  python bench/bench_scale.py [--lines 20000] [--sizes 5000,10000,20000,40000]
                                  [--cold-rounds 3] [--warm-rounds 10] [--scaling-rounds 5]
      python bench/bench_scale.py --profile   # where the plugin spends its time on the
                                              # edited codebase (cProfile, in process)
Ratios, intervals and columns follow bench/bench_plugin.py (see bench/README.md).
Each row also gives the 95% interval of the paired column (the median of the
per-round ratios), which is what --together is for: on a shared host whose
speed drifts by tens of percent between runs, two runs that start together
see the same drift, so their ratio varies far less than that of two runs
half a minute apart.  Each side then gets its own core (the machine has two);
the side that finishes last runs alone for its last seconds.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _mypyrun import SIDES, child_env, children_cpu, git_state, ini_text, log, order, plugin_fingerprint, compile_plugin  # noqa: E402
from _stats import bootstrap_median_ci, bootstrap_ratio_ci  # noqa: E402
import gen_codebase  # noqa: E402

TARGET = 1.10
USER_TARGET = 1.15  # the user's own code, torch cached (scaling mode), at every size
FLAT = 0.05  # "flat in size": the ratio at the largest size at most this above the smallest's
PROBE = '''\
from typing import Annotated
import torch.nn.functional as F
from torch import Tensor
from spmd_mypy import Spmd, P

def f(x: Annotated[Tensor, Spmd(tp=P)]) -> Tensor:
    return F.gelu(x)
'''


class Side(NamedTuple):
    name: str
    dir: Path
    ini: Path
    cache: Path


def make_sides(root: Path, lines: int) -> Tuple[Dict[str, Side], int]:
    files = gen_codebase.generate(lines)
    sides = {}
    for name in SIDES:
        d = root / name
        shutil.rmtree(d, ignore_errors=True)
        gen_codebase.write(d, files)
        (d / "probe_bug.py").write_text(PROBE)
        cache = d / "cache"
        ini = d / "mypy.ini"
        ini.write_text(ini_text(name, cache))
        sides[name] = Side(name, d, ini, cache)
    a, b = (sides[s].ini.read_text().splitlines() for s in SIDES)
    diff = [ln for ln in a if ln not in b] + [ln for ln in b if ln not in a]
    assert all(ln.startswith(("plugins", "cache_dir")) for ln in diff), diff
    return sides, gen_codebase.count_lines(files)


class Run(NamedTuple):
    wall: float
    cpu: float
    rc: int
    out: str


def _command(side: Side, target: str) -> List[str]:
    return [sys.executable, "-m", "mypy", "--config-file", str(side.ini), target]


def run_mypy(side: Side, target: str = gen_codebase.PACKAGE) -> Run:
    c0 = children_cpu()
    t0 = time.perf_counter()
    p = subprocess.run(_command(side, target), cwd=side.dir, env=child_env(), capture_output=True, text=True)
    return Run(time.perf_counter() - t0, children_cpu() - c0, p.returncode, p.stdout + p.stderr)


def run_together(sides: Sequence[Side], target: str = gen_codebase.PACKAGE) -> Dict[str, Run]:
    """Both sides started at the same instant; each one's wall time to its own
    exit and its own CPU time (os.wait4)."""
    procs: Dict[int, Tuple[Side, object]] = {}
    t0 = time.perf_counter()
    for side in sides:
        out = tempfile.TemporaryFile(mode="w+")
        p = subprocess.Popen(
            _command(side, target), cwd=side.dir, env=child_env(), stdout=out, stderr=subprocess.STDOUT, text=True
        )
        procs[p.pid] = (side, out)
    runs: Dict[str, Run] = {}
    while len(runs) < len(procs):
        pid, status, ru = os.wait4(-1, 0)
        if pid not in procs:
            continue
        wall = time.perf_counter() - t0
        side, out = procs[pid]
        out.seek(0)  # type: ignore[attr-defined]
        text = out.read()  # type: ignore[attr-defined]
        out.close()  # type: ignore[attr-defined]
        runs[side.name] = Run(wall, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status), text)
    return runs


def _touch_codebase(side: Side, n: int) -> None:
    """Change every module of the codebase (a last comment line), so the next run re-checks
    all of it while torch's modules come from the cache (mypy keys its cache by content)."""
    for path in (side.dir / gen_codebase.PACKAGE).glob("*.py"):
        text = path.read_text()
        body = text[: text.rfind("# bench-scale run")] if "# bench-scale run" in text else text
        path.write_text(f"{body}# bench-scale run {n}\n")


def _check(r: Run, what: str) -> None:
    if r.rc != 0 or not r.out.strip().startswith("Success: no issues found"):
        raise SystemExit(f"{what}: mypy exit {r.rc}, output:\n{r.out.rstrip()[-4000:]}")


# -- modes ---------------------------------------------------------------------------------


def measure(args: argparse.Namespace, sides: Dict[str, Side], mode: str, rounds: int) -> Dict[str, dict]:
    data: Dict[str, dict] = {s: {"wall": [], "cpu": []} for s in SIDES}
    if mode == "warm":
        for name in SIDES:
            _check(run_mypy(sides[name]), f"warm-up ({name})")
    together = args.together and mode in ("cold", "warm")
    for i in range(rounds):
        names = order(i)
        for name in names:
            if mode == "cold":
                shutil.rmtree(sides[name].cache, ignore_errors=True)
            elif mode == "code":
                _touch_codebase(sides[name], i)
        if together:
            runs = run_together([sides[name] for name in names])
        else:
            runs = {name: run_mypy(sides[name]) for name in names}
        for name in names:
            _check(runs[name], f"{mode} run {i + 1} ({name})")
            data[name]["wall"].append(runs[name].wall)
            data[name]["cpu"].append(runs[name].cpu)
        if mode == "warm":
            continue
        if together:
            w, o = runs["with"], runs["without"]
            log(args, f"  {mode} {i + 1}/{rounds} together: with {w.wall:6.2f} s, without {o.wall:6.2f} s,"
                      f" ratio {w.wall / o.wall:.3f}")
        else:
            for name in names:
                log(args, f"  {mode} {i + 1}/{rounds} {name:<7} {runs[name].wall:6.2f} s")
    return data


def summarize(label: str, data: Dict[str, dict], target: Optional[float]) -> dict:
    w, o = data["with"]["wall"], data["without"]["wall"]
    mw, mo = statistics.median(w), statistics.median(o)
    lo, hi = bootstrap_ratio_ci(w, o) if len(w) >= 3 else (float("nan"), float("nan"))
    cw, co = statistics.median(data["with"]["cpu"]), statistics.median(data["without"]["cpu"])
    row = {
        "mode": label,
        "rounds": len(w),
        "with_s": mw,
        "without_s": mo,
        "ratio": mw / mo,
        "ci95": [lo, hi],
        "paired": statistics.median(a / b for a, b in zip(w, o)),
        "paired_ci95": list(bootstrap_median_ci([a / b for a, b in zip(w, o)])) if len(w) >= 3 else [float("nan")] * 2,
        "cpu_with_s": cw,
        "cpu_without_s": co,
        "cpu_ratio": cw / co if co else float("nan"),
        "target": target,
    }
    row["verdict"] = "info" if target is None else ("ok" if row["ratio"] <= target else f"ABOVE {target}")
    return row


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> Tuple[float, float, float]:
    """Least squares y = a + b x: (a, b, R^2)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys)
    return a, b, 1 - ss_res / ss_tot if ss_tot else 1.0


def scaling(args: argparse.Namespace, root: Path, sizes: List[int]) -> dict:
    per_size = []
    for n in sizes:
        sides, lines = make_sides(root / f"scale_{n}", n)
        for name in SIDES:  # fill torch's cache, untimed
            _check(run_mypy(sides[name]), f"scaling warm-up {n} ({name})")
        data = measure(args, sides, "code", args.scaling_rounds)
        row = summarize(f"{lines} lines", data, USER_TARGET)
        row["lines"] = lines
        per_size.append(row)
        log(args, f"  scaling {lines} lines: with {row['with_s']:.2f} s, without {row['without_s']:.2f} s")
    out: dict = {"sizes": per_size}
    xs = [r["lines"] for r in per_size]
    for side in SIDES:
        ys = [r[f"{side}_s"] for r in per_size]
        a, b, r2 = linear_fit(xs, ys)
        marginal = [
            1000 * (ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i]) for i in range(len(xs) - 1)
        ]
        out[side] = {"intercept_s": a, "per_1k_lines_s": 1000 * b, "r2": r2, "marginal_per_1k_s": marginal}
    return out


def profile(args: argparse.Namespace, root: Path, lines: int, top: int) -> None:
    """cProfile one run (mypy.api) with the plugin over the whole codebase, edited, torch cached."""
    import pstats

    sides, n = make_sides(root / "profile", lines)
    side = sides["with"]
    _check(run_mypy(side), "profile warm-up")
    _touch_codebase(side, 1)
    # in a child started like `python -m mypy` (cwd first on sys.path), so that
    # mypy finds the same search paths and reuses the cache the warm-up wrote
    stats_file = root / "profile.pstats"
    child = (
        "import cProfile, json, sys, time\n"
        "from mypy import api\n"
        "prof = cProfile.Profile()\n"
        "t0 = time.perf_counter()\n"
        "prof.enable()\n"
        "out, _, rc = api.run(sys.argv[2:])\n"
        "prof.disable()\n"
        "total = time.perf_counter() - t0\n"
        "prof.dump_stats(sys.argv[1])\n"
        "print(json.dumps([out, rc, total]))\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", child, str(stats_file), "--config-file", str(side.ini), gen_codebase.PACKAGE],
        cwd=side.dir, env=child_env(), capture_output=True, text=True,
    )
    out, rc, total = json.loads(p.stdout.strip().splitlines()[-1])
    prof = pstats.Stats(str(stats_file))
    raw = prof.stats  # type: ignore[attr-defined]

    def ours(func: Tuple[str, int, str]) -> bool:
        return f"{os.sep}spmd_mypy{os.sep}" in func[0]

    inclusive, funcs = 0.0, []
    for func, (_, nc, tt, ct, callers) in raw.items():
        if ours(func):
            inclusive += sum(c[3] for caller, c in callers.items() if not ours(caller))
            name = func[0].split(f"{os.sep}spmd_mypy{os.sep}", 1)[1]
            funcs.append((ct, tt, nc, f"spmd_mypy/{name}:{func[1]}({func[2]})"))
    print(f"\nprofile: {n} lines, every module edited, torch cached; mypy exit {rc}, {total:.2f} s under"
          f" cProfile, {inclusive:.2f} s ({100 * inclusive / total:.0f}%) under spmd_mypy frames")
    print(out.strip().splitlines()[-1])
    print(f"  {'cum s':>7} {'own s':>7} {'calls':>8}  function (top {top} by cumulative time)")
    for ct, tt, nc, name in sorted(funcs, reverse=True)[:top]:
        print(f"  {ct:7.3f} {tt:7.3f} {nc:8d}  {name}")


# -- output --------------------------------------------------------------------------------


def _fmt_row(r: dict) -> str:
    lo, hi = r["ci95"]
    plo, phi = r.get("paired_ci95", (float("nan"), float("nan")))
    tgt = "" if r["target"] is None else f"<= {r['target']:.2f}"
    return (
        f"| {r['mode']} | {r['rounds']} | {r['with_s']:.3f} | {r['without_s']:.3f} | {r['ratio']:.3f}"
        f" | {lo:.3f}-{hi:.3f} | {r['paired']:.3f} | {plo:.3f}-{phi:.3f}"
        f" | {r['cpu_with_s']:.3f} / {r['cpu_without_s']:.3f}"
        f" | {r['cpu_ratio']:.3f} | {tgt} | {r['verdict']} |"
    )


_HEADER = (
    "| {} | rounds | with s | without s | ratio | 95% CI | paired | paired 95% CI | cpu with / without s"
    " | cpu ratio | target | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def print_report(rows: List[dict], scale: Optional[dict]) -> None:
    print("\n" + _HEADER.format("mode"))
    for r in rows:
        print(_fmt_row(r))
    if scale is None:
        return
    print("\nscaling (torch cached, every module of the codebase edited before each run):\n")
    print(_HEADER.format("size"))
    for r in scale["sizes"]:
        print(_fmt_row(r))
    print()
    for side in SIDES:
        f = scale[side]
        marg = ", ".join(f"{m:.3f}" for m in f["marginal_per_1k_s"])
        print(
            f"fit, {side} plugin: time = {f['intercept_s']:.2f} s + {f['per_1k_lines_s']:.3f} s per 1,000 lines,"
            f" R^2 = {f['r2']:.4f}; marginal s per 1,000 lines between sizes: {marg}"
        )
    fw, fo = scale["with"], scale["without"]
    marg = fw["marginal_per_1k_s"]
    # linear: the line fits, and the last step (the largest sizes) costs no more per line than
    # the fitted slope (growth faster than linear shows there first)
    linear = fw["r2"] >= 0.95 and marg[-1] <= 1.25 * fw["per_1k_lines_s"]
    print(
        f"per-line cost with / without: {fw['per_1k_lines_s'] / fo['per_1k_lines_s']:.3f}; "
        f"verdict: {'linear' if linear else 'NOT clearly linear'} "
        f"(R^2 >= 0.95, and the marginal cost of the last step at most 1.25x the fitted slope)"
    )
    scale["verdict"] = "linear" if linear else "not clearly linear"
    ratios = [r["ratio"] for r in scale["sizes"]]
    flat = ratios[-1] - ratios[0] <= FLAT
    within = all(x <= USER_TARGET for x in ratios)
    print(
        f"user code, torch cached: with / without {', '.join(f'{x:.3f}' for x in ratios)} at the sizes above;"
        f" target <= {USER_TARGET} at every size: {'ok' if within else 'ABOVE'};"
        f" flat in size (largest minus smallest <= {FLAT}): {'ok' if flat else 'NO, it grows'}"
    )
    scale["user_code_verdict"] = ("ok" if within else "ABOVE") + (", flat" if flat else ", grows")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="mypy with / without the spmd_mypy plugin on a generated codebase")
    ap.add_argument("--lines", type=int, default=20_000, help="size of the codebase for cold/warm (default 20000)")
    ap.add_argument("--sizes", default="5000,10000,20000,40000",
                    help="sizes for the scaling mode (default 5000,10000,20000,40000)")
    ap.add_argument("--cold-rounds", type=int, default=3, help="interleaved cold rounds (default 3)")
    ap.add_argument("--warm-rounds", type=int, default=10, help="interleaved warm rounds (default 10)")
    ap.add_argument("--scaling-rounds", type=int, default=5, help="rounds per size in the scaling mode (default 5)")
    ap.add_argument("--modes", default="cold,warm,scaling", help="comma-separated subset of cold,warm,scaling")
    ap.add_argument("--workdir", help="scratch directory (default: a new temporary one, removed after)")
    ap.add_argument("--together", action="store_true",
                    help="cold and warm: start the two runs of a round at the same instant (see above)")
    ap.add_argument("--json", help="also write every figure to this file")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    ap.add_argument("--profile", action="store_true", help="instead of timing: cProfile the plugin (see above)")
    ap.add_argument("--profile-lines", type=int, default=25, help="functions listed by --profile (default 25)")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    if any(m not in ("cold", "warm", "scaling") for m in modes) or ("scaling" in modes and len(sizes) < 2):
        ap.error("--modes: cold, warm, scaling; scaling needs at least two --sizes")

    tmp = None
    if args.workdir:
        root = Path(args.workdir).resolve()
        root.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.mkdtemp(prefix="bench_scale_")
        root = Path(tmp)
    try:
        import mypy.version

        print(f"start {_now()}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
              f"Python {platform.python_version()}, mypy {mypy.version.__version__}; {git_state()}; "
              f"plugin fingerprint {plugin_fingerprint()}")
        if args.profile:
            profile(args, root, args.lines, args.profile_lines)
            return 0
        compile_plugin()  # bytecode as installed (see _mypyrun.compile_plugin)
        sides, lines = make_sides(root / "main", args.lines)
        modules = len(list((sides["with"].dir / gen_codebase.PACKAGE).glob("*.py")))
        print(f"codebase: {lines} lines in {modules} modules (bench/gen_codebase.py --lines {args.lines})")
        # verdicts on a fresh cache: clean on both sides, the probe caught with the plugin only
        for name in SIDES:
            shutil.rmtree(sides[name].cache, ignore_errors=True)
            _check(run_mypy(sides[name]), f"first check ({name})")
            probe = run_mypy(sides[name], "probe_bug.py")
            caught = "[spmd-op]" in probe.out
            if caught != (name == "with"):
                raise SystemExit(f"probe ({name} plugin): expected {'an' if name == 'with' else 'no'} spmd error:\n{probe.out}")
        print("verdicts: both configs clean on the codebase; the probe's bug reported with the plugin only")
        rows, scale = [], None
        record: dict = {"lines": lines, "modules": modules, "together": args.together}
        if args.together:
            print("runs of a round started together (--together): the two sides run at the same time")
        if "cold" in modes:
            data = measure(args, sides, "cold", args.cold_rounds)
            rows.append(summarize("cold cache", data, TARGET))
            record["cold"] = data
        if "warm" in modes:
            data = measure(args, sides, "warm", args.warm_rounds)
            rows.append(summarize("warm cache", data, TARGET))
            record["warm"] = data
        if "scaling" in modes:
            scale = scaling(args, root, sizes)
        print_report(rows, scale)
        print(f"\nend {_now()}; load average {os.getloadavg()[0]:.1f}; plugin fingerprint {plugin_fingerprint()}")
        if args.json:
            record.update({"rows": rows, "scaling": scale})
            Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
