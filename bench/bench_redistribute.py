"""Spec-level redistribute: planned communication volume against the lower bounds.

For every row of the redistribute tables in the project's targets (mesh dp=2 x
tp=2 and dp=4 x tp=8), and rows with sub-axes (seed 002), plan the transition
with spmd.plan_redistribute (no torch, nothing runs), run torch's own
DTensor.redistribute on a fake process group side by side (dtensor_volume.py:
what each device receives, counted), and print:

  transition   the row, as in the targets
  steps        the plan's steps (op over axes)
  coll         collectives in the plan (local converts do not count)
  plan         max_recv_elements / N: the most elements one device receives,
               in units of the full tensor (accounting: the planner's module
               docstring; ring/halving figures for reduce-scatter/all-reduce)
  bound        the lower bound from the targets
  DTensor      torch 2.13's DTensor.redistribute, measured: max received / N
               (n/a: DTensor's placements cannot express the type, e.g.
               a sub-axis tp:(1)2)
  DTc          DTensor's collectives
  plan/bound   the target is 1.00 on every row
  DT/plan      how many times more DTensor's plan receives
  bwd          the backward plan's volume (the gradient types' plan, reversed)

Run:  python bench/bench_redistribute.py [--shape 64 64] [--plans] [--no-dtensor]

--plans also prints every plan's text form and DTensor's collectives;
--no-dtensor skips DTensor (no torch).  Exits 1 if a row misses its bound.
"""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from pathlib import Path
from typing import Dict, List, Optional, Tuple

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(_REPO))

from spmd_mypy import P, PartitionSpec, Spmd, plan_redistribute  # noqa: E402

PS = PartitionSpec
M22 = {"dp": 2, "tp": 2}
M48 = {"dp": 4, "tp": 8}

# (mesh, transition as written in the targets, src, dst, lower bound)
ROWS: List[Tuple[dict, str, Spmd, Spmd, Fraction]] = [
    (M22, "[S0@dp, S1@tp] -> R", Spmd(spec=PS("dp", "tp")), Spmd(spec=PS(None, None)),
     Fraction(3, 4)),
    (M22, "S0@tp -> S1@tp", Spmd(spec=PS("tp", None)), Spmd(spec=PS(None, "tp")),
     Fraction(1, 4)),
    (M22, "swap [S0@dp, S1@tp] -> [S1@dp, S0@tp]", Spmd(spec=PS("dp", "tp")), Spmd(spec=PS("tp", "dp")),
     Fraction(1, 4)),
    (M22, "dim order S0@(dp,tp) -> S0@(tp,dp)", Spmd(spec=PS(("dp", "tp"), None)),
     Spmd(spec=PS(("tp", "dp"), None)), Fraction(1, 4)),
    (M22, "[S0@dp, S0@tp] -> [R, S0@tp]", Spmd(spec=PS(("dp", "tp"), None)), Spmd(spec=PS("tp", None)),
     Fraction(1, 2)),
    (M22, "[P@dp, P@tp] -> R", Spmd(spec=PS(None, None), dp=P, tp=P), Spmd(spec=PS(None, None)),
     Fraction(3, 2)),
    (M22, "[P@dp, P@tp] -> S0@(dp,tp)", Spmd(spec=PS(None, None), dp=P, tp=P),
     Spmd(spec=PS(("dp", "tp"), None)), Fraction(3, 4)),
    (M48, "swap [S0@dp, S1@tp] -> [S1@dp, S0@tp]", Spmd(spec=PS("dp", "tp")), Spmd(spec=PS("tp", "dp")),
     Fraction(1, 32)),
    (M48, "[P@dp, P@tp] -> R", Spmd(spec=PS(None, None), dp=P, tp=P), Spmd(spec=PS(None, None)),
     Fraction(31, 16)),
    (M48, "[S0@dp, S0@tp] -> [R, S0@tp]", Spmd(spec=PS(("dp", "tp"), None)), Spmd(spec=PS("tp", None)),
     Fraction(1, 8)),
    # sub-axes (seed 002): what a reshape that splits tp's dim leaves, and back; bounds
    # by brute force (tests/vocab/test_redistribute_subaxes.py), (g-1)/g for the P row
    (M48, "[S0@tp:(1)2, S1@tp:(2)4] -> [S0@tp, R]", Spmd(spec=PS("tp:(1)2", "tp:(2)4")),
     Spmd(spec=PS("tp", None)), Fraction(3, 32)),
    (M48, "[S0@tp:(1)2, S1@tp:(2)4] -> R", Spmd(spec=PS("tp:(1)2", "tp:(2)4")), Spmd(spec=PS(None, None)),
     Fraction(7, 8)),
    (M48, "S0@(dp,tp:(1)2) -> [S0@dp, S1@tp:(1)2]", Spmd(spec=PS(("dp", "tp:(1)2"), None)),
     Spmd(spec=PS("dp", "tp:(1)2")), Fraction(1, 16)),
    (M48, "P@tp -> [S0@tp:(1)2, S1@tp:(2)4]", Spmd(spec=PS(None, None), tp=P),
     Spmd(spec=PS("tp:(1)2", "tp:(2)4")), Fraction(7, 8)),
    (M48, "[S0@tp:(2)4, S1@dp] -> [S0@dp, S1@tp:(2)4]", Spmd(spec=PS("tp:(2)4", "dp")),
     Spmd(spec=PS("dp", "tp:(2)4")), Fraction(1, 16)),
]


def _ratio(a: Fraction, b: Fraction) -> str:
    return f"{float(a / b):.2f}" if b else "-"


def _dtensor(shape: Tuple[int, ...]) -> Dict[Tuple[str, str], Optional[Tuple[Fraction, Tuple[str, ...]]]]:
    """DTensor's measured (volume, collectives) per (mesh text, row name)."""
    from dtensor_volume import dtensor_volumes

    out: Dict[Tuple[str, str], Optional[Tuple[Fraction, Tuple[str, ...]]]] = {}
    for mesh in (M22, M48):
        # DTensor's placements have no sub-axes: those rows print n/a
        rows = [(name, src, dst) for m, name, src, dst, _ in ROWS if m is mesh and ":" not in name]
        for name, got in dtensor_volumes(rows, mesh, shape).items():
            out[(_mesh_text(mesh), name)] = got
    return out


def _mesh_text(mesh: dict) -> str:
    return "x".join(str(n) for n in mesh.values())


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", type=int, nargs="+", default=[64, 64], help="global shape (default 64 64)")
    ap.add_argument("--plans", action="store_true", help="also print every plan's text form")
    ap.add_argument("--no-dtensor", action="store_true", help="skip DTensor's measurement (no torch)")
    args = ap.parse_args(argv)
    shape = tuple(args.shape)
    dtensor = {} if args.no_dtensor else _dtensor(shape)
    header = (
        f"{'mesh':<8} {'transition':<44} {'steps':<34} {'coll':>4} {'plan':>6} {'bound':>6} "
        f"{'DTensor':>7} {'DTc':>3} {'plan/bound':>10} {'DT/plan':>7} {'bwd':>6}"
    )
    print(f"shape {list(shape)}, volumes per device in units of N = the full tensor")
    print(header)
    print("-" * len(header))
    misses = 0
    plans = []
    for mesh, name, src, dst, bound in ROWS:
        plan = plan_redistribute(src, dst, shape, mesh)
        plans.append(plan)
        steps = ", ".join(f"{s.op}({','.join(s.axes)})" for s in plan.steps)
        vol = plan.volume
        misses += vol != bound
        dt = dtensor.get((_mesh_text(mesh), name))
        dt_vol, dt_coll = (str(dt[0]), str(len(dt[1]))) if dt is not None else ("n/a", "n/a")
        print(
            f"{_mesh_text(mesh):<8} {name:<44} {steps:<34} {plan.collectives:>4} {str(vol):>6} {str(bound):>6} "
            f"{dt_vol:>7} {dt_coll:>3} {_ratio(vol, bound):>10} "
            f"{_ratio(dt[0], vol) if dt is not None else 'n/a':>7} {str(plan.backward().volume):>6}"
        )
    print()
    print(f"rows at their lower bound: {len(ROWS) - misses} of {len(ROWS)}")
    if args.plans:
        for (mesh, name, _, _, _), plan in zip(ROWS, plans):
            print()
            print(plan.text())
            dt = dtensor.get((_mesh_text(mesh), name))
            if dt is not None:
                print(f"  DTensor: {' + '.join(dt[1]) or 'no collective'}; receives at most {dt[0]} N")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
