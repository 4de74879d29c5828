"""Which torch callables the op tables classify; with PATHS, how much of a codebase is typed.

    python -m spmd_mypy.coverage            # summary per namespace
    python -m spmd_mypy.coverage --list     # and every name with its class
    python -m spmd_mypy.coverage PATHS      # per file: share of typed tensor
                                            # expressions, unchecked calls

Without PATHS imports torch (to enumerate its API); with PATHS runs mypy with
the plugin in process (plugin/_mypy/typed_share.py says what is counted).  The
plugin never imports this module.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Dict, Iterable, List, Optional, Tuple

from .vocab.opclasses import NONLINEAR, op_class_or_none, out_of_place

__all__ = ["coverage", "main", "typed_share_report"]


def _public_callables(obj: object, dunders: bool = False) -> List[str]:
    names = []
    for name in dir(obj):
        if name.startswith("_") and not (dunders and name.startswith("__") and name.endswith("__")):
            continue
        try:
            value = getattr(obj, name)
        except Exception:
            continue
        if callable(value) and not inspect.isclass(value) and not inspect.ismodule(value):
            names.append(name)
    return sorted(names)


def coverage() -> Dict[str, Tuple[Dict[str, str], List[str]]]:
    """namespace -> (classified name -> class, names that fall back to nonlinear)."""
    import torch
    import torch.nn.functional as F

    spaces: Iterable[Tuple[str, List[str], str]] = (
        ("torch", _public_callables(torch), "torch"),
        ("Tensor", _public_callables(torch.Tensor, dunders=True), "tensor"),
        ("torch.nn.functional", _public_callables(F), "functional"),
    )
    out = {}
    for label, names, namespace in spaces:
        classified: Dict[str, str] = {}
        fallback: List[str] = []
        for n in names:
            # In-place methods (add_) follow the row of their out-of-place op.
            base = out_of_place(n) if namespace == "tensor" else None
            cls = op_class_or_none(n, namespace) or (
                op_class_or_none(base, namespace) if base else None
            )
            if cls is None:
                fallback.append(n)
            else:
                classified[n] = cls
        out[label] = (classified, fallback)
    return out


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every name with its class")
    parser.add_argument("paths", nargs="*", help="files or directories to measure (runs mypy with the plugin)")
    parser.add_argument("--config-file", default=None, help="mypy config (default: mypy's own search)")
    args = parser.parse_args(argv)
    if args.paths:
        return typed_share_report(args.paths, args.config_file)
    for label, (classified, fallback) in coverage().items():
        total = len(classified) + len(fallback)
        counts: Dict[str, int] = {}
        for cls in classified.values():
            counts[cls] = counts.get(cls, 0) + 1
        detail = ", ".join(f"{c} {k}" for k, c in sorted(counts.items()))
        print(f"{label}: {len(classified)} of {total} classified ({detail}); "
              f"{len(fallback)} fall back to {NONLINEAR}")
        if args.list:
            for name, cls in sorted(classified.items()):
                print(f"  {name}: {cls}")
            for name in fallback:
                print(f"  {name}: {NONLINEAR} (default)")
    return 0



def typed_share_report(paths: List[str], config_file: Optional[str] = None) -> int:
    """Print per file the share of typed tensor expressions and its unchecked calls."""
    from .plugin._mypy.typed_share import build_options, measure

    shares, _ = measure(paths, build_options(config_file))
    typed = untyped = 0
    for share in shares:
        typed, untyped = typed + share.typed, untyped + share.untyped
        pct = "-" if share.share is None else f"{100 * share.share:.1f}%"
        print(f"{share.path}: {pct} typed ({share.typed} of {share.total} tensor expressions); "
              f"{len(share.unchecked)} unchecked calls")
        for call in share.unchecked:
            hint = f" ({call.hint})" if call.hint else ""
            print(f"  {share.path}:{call.line}: unchecked call {call.callee} -> {call.result}{hint}")
    total = typed + untyped
    pct = "-" if not total else f"{100 * typed / total:.1f}%"
    print(f"total: {pct} typed ({typed} of {total} tensor expressions in {len(shares)} files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
