"""python -m spmd_mypy.migrate PATHS [--write] [--check] [--axis NAME]

Prints a unified diff of every file the codemod would change (or writes the
files with --write), then the calls it could not convert, each as
`file:line: helper: not converted: why`, and a summary line.  --check exits
1 if any file would change.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import Iterator, List, Optional, Sequence

from .rewrite import Note, migrate_source


def python_files(paths: Sequence[str]) -> Iterator[Path]:
    for p in map(Path, paths):
        if p.is_dir():
            yield from sorted(q for q in p.rglob("*.py") if q.is_file())
        else:
            yield p


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spmd_mypy.migrate", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="files or directories (every *.py below)")
    parser.add_argument("--write", action="store_true", help="rewrite the files in place")
    parser.add_argument("--check", action="store_true", help="exit 1 if any file would change")
    parser.add_argument("--axis", default="tp", help='the mesh axis of a helper without a group (default "tp")')
    args = parser.parse_args(argv)
    if not args.axis.isidentifier():
        parser.error(f"--axis {args.axis!r} is not an identifier")
    changed: List[Path] = []
    notes: List[Note] = []
    converted = annotated = 0
    for path in python_files(args.paths):
        text = path.read_text()
        result = migrate_source(text, axis=args.axis, path=str(path))
        notes += result.notes
        converted += result.converted
        annotated += result.annotated
        if result.code == text:
            continue
        changed.append(path)
        if args.write:
            path.write_text(result.code)
        elif not args.check:
            sys.stdout.writelines(
                difflib.unified_diff(
                    text.splitlines(keepends=True),
                    result.code.splitlines(keepends=True),
                    fromfile=f"a/{path}",
                    tofile=f"b/{path}",
                )
            )
    for note in notes:
        print(note)
    verb = "rewritten" if args.write else "would change"
    print(
        f"{converted} calls converted, {annotated} annotations added; {len(changed)} files {verb}; "
        f"{len(notes)} not converted"
    )
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
