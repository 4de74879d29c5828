"""Spec-level redistribute: planned communication volume against the lower bounds.

For every row of the redistribute tables in the project's targets (mesh dp=2 x
tp=2 and dp=4 x tp=8), plan the transition with spmd.plan_redistribute (no
torch, nothing runs) and print:

  transition   the row, as in the targets
  steps        the plan's steps (op over axes)
  coll         collectives in the plan (local converts do not count)
  plan         max_recv_elements / N: the most elements one device receives,
               in units of the full tensor (accounting: the planner's module
               docstring; ring/halving figures for reduce-scatter/all-reduce)
  bound        the lower bound from the targets
  DTensor      PyTorch DTensor's default greedy planner, from the targets
  plan/bound   the target is 1.00 on every row
  DT/plan      how many times more DTensor's greedy plan receives
  bwd          the backward plan's volume (the gradient types' plan, reversed)

Run:  python bench/bench_redistribute.py [--shape 64 64] [--plans]

--plans also prints every plan's text form.  Exits 1 if a row misses its bound.
"""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from pathlib import Path
from typing import List, Optional, Tuple

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(_REPO))

from spmd_mypy import P, PartitionSpec, Spmd, plan_redistribute  # noqa: E402

PS = PartitionSpec
M22 = {"dp": 2, "tp": 2}
M48 = {"dp": 4, "tp": 8}

# (mesh, transition as written in the targets, src, dst, lower bound, DTensor greedy or None)
ROWS: List[Tuple[dict, str, Spmd, Spmd, Fraction, Optional[Fraction]]] = [
    (M22, "[S0@dp, S1@tp] -> R", Spmd(spec=PS("dp", "tp")), Spmd(spec=PS(None, None)),
     Fraction(3, 4), Fraction(3, 4)),
    (M22, "S0@tp -> S1@tp", Spmd(spec=PS("tp", None)), Spmd(spec=PS(None, "tp")),
     Fraction(1, 4), Fraction(1, 4)),
    (M22, "swap [S0@dp, S1@tp] -> [S1@dp, S0@tp]", Spmd(spec=PS("dp", "tp")), Spmd(spec=PS("tp", "dp")),
     Fraction(1, 4), Fraction(1, 2)),
    (M22, "dim order S0@(dp,tp) -> S0@(tp,dp)", Spmd(spec=PS(("dp", "tp"), None)),
     Spmd(spec=PS(("tp", "dp"), None)), Fraction(1, 4), None),
    (M22, "[S0@dp, S0@tp] -> [R, S0@tp]", Spmd(spec=PS(("dp", "tp"), None)), Spmd(spec=PS("tp", None)),
     Fraction(1, 2), Fraction(3, 4)),
    (M22, "[P@dp, P@tp] -> R", Spmd(spec=PS(None, None), dp=P, tp=P), Spmd(spec=PS(None, None)),
     Fraction(3, 2), Fraction(2)),
    (M22, "[P@dp, P@tp] -> S0@(dp,tp)", Spmd(spec=PS(None, None), dp=P, tp=P),
     Spmd(spec=PS(("dp", "tp"), None)), Fraction(3, 4), Fraction(3, 4)),
    (M48, "swap [S0@dp, S1@tp] -> [S1@dp, S0@tp]", Spmd(spec=PS("dp", "tp")), Spmd(spec=PS("tp", "dp")),
     Fraction(1, 32), Fraction(13, 32)),
    (M48, "[P@dp, P@tp] -> R", Spmd(spec=PS(None, None), dp=P, tp=P), Spmd(spec=PS(None, None)),
     Fraction(31, 16), Fraction(13, 4)),
    (M48, "[S0@dp, S0@tp] -> [R, S0@tp]", Spmd(spec=PS(("dp", "tp"), None)), Spmd(spec=PS("tp", None)),
     Fraction(1, 8), Fraction(31, 32)),
]


def _ratio(a: Fraction, b: Fraction) -> str:
    return f"{float(a / b):.2f}" if b else "-"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", type=int, nargs="+", default=[64, 64], help="global shape (default 64 64)")
    ap.add_argument("--plans", action="store_true", help="also print every plan's text form")
    args = ap.parse_args(argv)
    shape = tuple(args.shape)
    header = (
        f"{'mesh':<8} {'transition':<40} {'steps':<34} {'coll':>4} {'plan':>6} {'bound':>6} "
        f"{'DTensor':>7} {'plan/bound':>10} {'DT/plan':>7} {'bwd':>6}"
    )
    print(f"shape {list(shape)}, volumes per device in units of N = the full tensor")
    print(header)
    print("-" * len(header))
    misses = 0
    plans = []
    for mesh, name, src, dst, bound, dtensor in ROWS:
        plan = plan_redistribute(src, dst, shape, mesh)
        plans.append(plan)
        steps = ", ".join(f"{s.op}({','.join(s.axes)})" for s in plan.steps)
        vol = plan.volume
        misses += vol != bound
        mesh_text = "x".join(str(n) for n in mesh.values())
        print(
            f"{mesh_text:<8} {name:<40} {steps:<34} {plan.collectives:>4} {str(vol):>6} {str(bound):>6} "
            f"{str(dtensor) if dtensor is not None else 'n/a':>7} {_ratio(vol, bound):>10} "
            f"{_ratio(dtensor, vol) if dtensor is not None else 'n/a':>7} {str(plan.backward().volume):>6}"
        )
    print()
    print(f"rows at their lower bound: {len(ROWS) - misses} of {len(ROWS)}")
    if args.plans:
        for plan in plans:
            print()
            print(plan.text())
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
