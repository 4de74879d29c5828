"""What the mypy benchmarks share: the two configs (with and without the
plugin), the child environment, the interleaving order, and the record of a
run (git state, a fingerprint of the plugin's code).

Used by bench_plugin.py and bench_scale.py, which run as scripts from bench/.
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Dict, Tuple

REPO = Path(__file__).resolve().parent.parent
SIDES = ("with", "without")


def ini_text(side: str, cache: Path) -> str:
    """The mypy config of one side: the two differ only by the plugins line."""
    stubs = REPO / "stubs" / "torch-spmd"
    lines = ["[mypy]", "python_version = 3.11"]
    if side == "with":
        lines.append("plugins = spmd_mypy.plugin")
    lines += [
        f"mypy_path = {stubs}:{REPO}",
        "allow_redefinition = True",
        f"cache_dir = {cache}",
        "",
    ]
    return "\n".join(lines)


def child_env() -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("MYPYPATH", None)  # only the config's mypy_path
    env.pop("MYPY_CACHE_DIR", None)
    return env


def order(i: int) -> Tuple[str, ...]:
    """Round i runs "with" first when i is even, "without" first when odd."""
    return SIDES if i % 2 == 0 else SIDES[::-1]


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def log(args: argparse.Namespace, msg: str) -> None:
    if not args.quiet:
        print(msg, file=sys.stderr, flush=True)


def git_state() -> str:
    """HEAD and whether the plugin's files differ from it (for the record of a run)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "spmd_mypy", "stubs"],
                               cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    return f"git {head}" + (" + uncommitted changes in spmd_mypy/ or stubs/" if dirty else "")


def plugin_fingerprint() -> str:
    """Hash of the plugin's code and stubs: a change during a run shows as a new value at the end."""
    h = hashlib.sha256()
    for top in (REPO / "spmd_mypy", REPO / "stubs" / "torch-spmd"):
        for p in sorted(top.rglob("*")):
            if p.suffix in (".py", ".pyi") and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(REPO)).encode())
                h.update(p.read_bytes())
    return h.hexdigest()[:12]


def compile_plugin() -> None:
    """Write the plugin's bytecode before timing, as pip does at install and
    Python does on a first import.  Without it, a machine that sets
    PYTHONDONTWRITEBYTECODE (this one does) or a fresh clone recompiles the
    plugin's sources in every timed run (about 0.1 s)."""
    compileall.compile_dir(str(REPO / "spmd_mypy"), quiet=1)
