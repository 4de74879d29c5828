"""Which torch callables the op tables classify, and which fall back to nonlinear.

    python -m spmd_mypy.coverage            # summary per namespace
    python -m spmd_mypy.coverage --list     # and every name with its class

Imports torch (to enumerate its API); the plugin never imports this module.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Dict, Iterable, List, Tuple

from .vocab.opclasses import NONLINEAR, op_class_or_none, out_of_place

__all__ = ["coverage", "main"]


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
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    raise SystemExit(main())
