"""One mypy run over many files: the batch runner of the soundness and fuzz tests.

mypy runs with the plugin through mypy.api, in a child process: the run is
the same as in process, and the child's exit skips freeing mypy's heap (most
of it torch's modules), which takes longer than a warm run.  Imports neither
torch nor mypy here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Tuple

ROOT = Path(__file__).resolve().parents[2]
_ERROR = re.compile(r"^(?P<path>[^:]+\.py):(?P<line>\d+): error: (?P<msg>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$")
CRASH_MARKERS = ("INTERNAL ERROR", "Traceback (most recent call last)")
# The note a hook leaves where it fell back (plugin/guard.py, outside strict mode).
FALLBACK_MARKER = ": note: spmd-internal: "


def mypy_ini(cache_dir: Path, extra: str = "") -> str:
    stubs = ROOT / "stubs" / "torch-spmd"
    return (
        "[mypy]\n"
        "python_version = 3.11\n"
        "plugins = spmd_mypy.plugin\n"
        f"mypy_path = {stubs}:{ROOT}\n"
        "allow_redefinition = True\n"
        "show_error_codes = True\n"
        f"cache_dir = {cache_dir}\n" + extra
        # the package's own sources are not under test here
        + "\n[mypy-spmd_mypy.*]\nfollow_imports = silent\n"
    )


@dataclass
class MypyReport:
    errors: Dict[str, List[Tuple[int, str, str]]]  # module stem -> (line, code, message)
    stdout: str
    stderr: str
    exit_status: int

    def fallbacks(self) -> List[str]:
        """The spmd-internal notes: checks a hook skipped after an internal error."""
        return [ln for ln in (self.stdout + self.stderr).splitlines() if FALLBACK_MARKER in ln]


_CHILD = (
    "import json, os, sys\n"
    "from mypy import api\n"
    "result = api.run(sys.argv[1:])\n"
    "sys.stdout.write(json.dumps(result))\n"
    "sys.stdout.flush()\n"
    "os._exit(0)\n"
)


def run_mypy(
    files: List[Path], workdir: Path, cache_dir: Path, extra_ini: str = "", strict: bool = True
) -> MypyReport:
    """One mypy run (mypy.api) over files; per file, the error lines.

    strict: the plugin re-raises where a hook fails (SPMD_MYPY_STRICT=1);
    otherwise it falls back as in a user's run and leaves a note."""
    ini = workdir / "mypy.ini"
    ini.write_text(mypy_ini(cache_dir, extra_ini))
    env = {**os.environ, "SPMD_MYPY_STRICT": "1" if strict else "0"}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, "--config-file", str(ini), *map(str, files)],
        cwd=workdir, capture_output=True, text=True, timeout=1800, env=env,
    )
    try:
        out, err, status = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"mypy did not finish (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}") from None
    err += proc.stderr
    errors: Dict[str, List[Tuple[int, str, str]]] = {f.stem: [] for f in files}
    for line in out.splitlines():
        m = _ERROR.match(line)
        if m:
            stem = Path(m["path"]).stem
            errors.setdefault(stem, []).append((int(m["line"]), m["code"] or "", m["msg"]))
    return MypyReport(errors, out, err, status)


def check_batch(sources: Mapping[str, str], workdir: Path, cache_dir: Path) -> MypyReport:
    workdir.mkdir(parents=True, exist_ok=True)
    files = []
    for stem, text in sources.items():
        path = workdir / f"{stem}.py"
        path.write_text(text)
        files.append(path)
    report = run_mypy(files, workdir, cache_dir)
    crash = [m for m in CRASH_MARKERS if m in report.stdout or m in report.stderr]
    if crash or report.exit_status not in (0, 1):
        raise AssertionError(
            f"mypy crashed or failed (exit {report.exit_status}):\n{report.stdout[-3000:]}\n{report.stderr[-3000:]}"
        )
    return report


