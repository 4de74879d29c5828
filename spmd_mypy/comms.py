"""The communication report: per function, the collectives its types imply.

    python -m spmd_mypy.comms PATHS [--config-file FILE]

Checks PATHS with mypy and the plugin in process (the user's mypy config if
mypy finds one; the files are always checked again) and prints, for every
function with a typed collective or coercion, the primitive steps each call
runs in forward and in backward (the rows of vocab/collectives.py that the
runtime runs: convert(I->R)'s backward all_reduce, all_gather(S->R)'s
reduce_scatter, ...), the bytes each rank receives in each as a formula of
the inputs' element counts and the axis sizes (vocab/comm_volume.py), and
the redundant pairs (plugin/comm_report.py).  The facts are what the plugin
recorded while typing each call (plugin/comm_sites.py): the report and the
checker cannot disagree.  In the editor, `spmd.reveal_comms(fn)` prints the
same report for one function as notes.

Not in the report: collectives the checker does not type (a raw
torch.distributed call, a call whose src/dst is computed, the spec-form
spmd.redistribute of global mode) and functions with none.  The plugin never
imports this module.
"""

from __future__ import annotations

import argparse
import os
from typing import Dict, List, Optional, Sequence, Tuple

from .plugin import comm_sites
from .plugin.comm_report import LEGEND, FunctionReport, configurations, function_report, report_text

__all__ = ["main", "reports"]


def reports(paths: Sequence[str], config_file: Optional[str] = None) -> Tuple[List[FunctionReport], List[str]]:
    """The report of every function of PATHS with a typed collective, in file and
    line order; and mypy's messages (errors included: the report still lists what
    was typed)."""
    from .plugin._mypy.typed_share import check

    comm_sites.clear()
    comm_sites.collecting(True)
    try:
        messages = check(paths, config_file)
    finally:
        comm_sites.collecting(False)
    wanted = _wanted(paths)
    out = []
    for file in comm_sites.files():
        if os.path.abspath(file) not in wanted and not any(os.path.abspath(file).startswith(d) for d in wanted):
            continue
        sites = comm_sites.sites_of(file)
        functions: Dict[str, None] = dict.fromkeys(s.function for s in sites)
        out += [function_report(file, f, sites, c) for f in functions for c in configurations(f, sites)]
    return out, messages


def _wanted(paths: Sequence[str]) -> List[str]:
    return [os.path.abspath(p) + (os.sep if os.path.isdir(p) else "") for p in paths]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spmd_mypy.comms", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="files or directories to report on")
    parser.add_argument("--config-file", default=None, help="mypy config (default: mypy's own search)")
    args = parser.parse_args(argv)
    found, messages = reports(args.paths, args.config_file)
    print(LEGEND)
    for report in found:
        print()
        print("\n".join(report_text(report, os.path.relpath(report.file))))
    errors = [m for m in messages if ": error:" in m]
    print(f"\n{len(found)} function reports with collectives (a configured function: one per configuration); "
          f"mypy reported {len(errors)} errors"
          + (" (run mypy to see them)" if errors else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
