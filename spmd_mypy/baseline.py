"""Gradual adoption: record today's spmd errors, then fail only on new ones.

    python -m spmd_mypy.baseline --write [mypy args...]   # record them in .spmd-baseline.json
    python -m spmd_mypy.baseline --check [mypy args...]   # exit 1 only on errors not recorded
    (--baseline FILE names another file; a mypy option after `--` if it clashes)

Runs `python -m mypy` in a subprocess with the user's own configuration
(mypy args are passed on unchanged, e.g. `-p mypkg` or `src/`; with none,
mypy's `files` setting applies) and JSON output, and keeps its errors whose
code starts with `spmd-`.  An error is recorded as (file, code, message with
line numbers removed) with a count, so an error that only moved lines is
not new; a count that grew is (the extra occurrences are new, and every
occurrence of that error is printed, since which one is new cannot be
told).  Errors that disappeared are counted and never fail the check
(`--write` again shrinks the file).  Exit codes: 0 clean, 1 new errors, 2
mypy itself failed.  Imports neither mypy nor torch.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

DEFAULT = ".spmd-baseline.json"
VERSION = 1
_LINE = re.compile(r"\bline \d+\b")

Key = Tuple[str, str, str]  # file, code, message without line numbers


@dataclass(frozen=True)
class Error:
    file: str
    line: int
    code: str
    message: str

    def key(self) -> Key:
        return (self.file, self.code, _LINE.sub("line N", self.message))

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: error: {self.message}  [{self.code}]"


def _relative(path: str) -> str:
    p = Path(path)
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix() if p.is_absolute() else p.as_posix()
    except ValueError:
        return p.as_posix()


def parse(output: str) -> List[Error]:
    """The spmd-* errors of mypy's JSON output (one object per line)."""
    errors = []
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        item = json.loads(line)
        code = item.get("code") or ""
        if item.get("severity") == "error" and code.startswith("spmd-"):
            errors.append(Error(_relative(item["file"]), int(item["line"]), code, item["message"]))
    return errors


def run_mypy(mypy_args: Sequence[str]) -> Tuple[List[Error], int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--output", "json", *mypy_args], capture_output=True, text=True
    )
    return parse(proc.stdout), proc.returncode, proc.stderr + "\n".join(
        ln for ln in proc.stdout.splitlines() if not ln.strip().startswith("{")
    )


def counts(errors: Sequence[Error]) -> Dict[Key, int]:
    return dict(Counter(e.key() for e in errors))


def dump(errors: Sequence[Error]) -> str:
    rows = [
        {"file": f, "code": c, "message": m, "count": n} for (f, c, m), n in sorted(counts(errors).items())
    ]
    return json.dumps({"version": VERSION, "errors": rows}, indent=2) + "\n"


def load(text: str) -> Dict[Key, int]:
    data = json.loads(text)
    if data.get("version") != VERSION:
        raise ValueError(f"baseline version {data.get('version')!r}, expected {VERSION}")
    return {(r["file"], r["code"], r["message"]): int(r["count"]) for r in data["errors"]}


def new_errors(errors: Sequence[Error], baseline: Dict[Key, int]) -> Tuple[List[Error], int]:
    """Every occurrence of an error seen more often than the baseline allows, and the number
    of recorded errors that are gone."""
    now = counts(errors)
    grown = {k for k, n in now.items() if n > baseline.get(k, 0)}
    fixed = sum(max(n - now.get(k, 0), 0) for k, n in baseline.items())
    return [e for e in errors if e.key() in grown], fixed


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spmd_mypy.baseline", allow_abbrev=False, description=__doc__.split("\n\n")[0]
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="record today's spmd errors")
    mode.add_argument("--check", action="store_true", help="exit 1 on errors not recorded (the default)")
    parser.add_argument("--baseline", default=DEFAULT, metavar="FILE", help=f"the baseline file (default {DEFAULT})")
    args, mypy_args = parser.parse_known_args(argv)
    if mypy_args[:1] == ["--"]:
        mypy_args = mypy_args[1:]
    errors, code, stderr = run_mypy(mypy_args)
    if code not in (0, 1):
        print(f"mypy failed (exit {code}):\n{stderr}", file=sys.stderr)
        return 2
    path = Path(args.baseline)
    if args.write:
        path.write_text(dump(errors))
        print(f"{path}: recorded {len(errors)} spmd errors")
        return 0
    if not path.exists():
        print(f"no baseline at {path}: run with --write first", file=sys.stderr)
        return 2
    new, fixed = new_errors(errors, load(path.read_text()))
    for e in new:
        print(e)
    gone = f"; {fixed} recorded errors fixed (--write shrinks the baseline)" if fixed else ""
    print(f"{len(new)} spmd errors not in {path}{gone}")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
