"""Differential soundness: what the checker accepts must compute the right gradients.

Random programs (programs.py, a hypothesis strategy) are checked by mypy with
the plugin in one batched run, then every program is run forward and backward
on 4 simulated ranks and held against its meaning (meaning.py): the output
must decode under the declared return type, and each input's gradient must be
the gradient of the program's global meaning, computed on one process.

    SPMD_SOUNDNESS_N=2000 python -m pytest tests/soundness -q -s   # the full size
    SPMD_SOUNDNESS_SEED=7 ...                                       # another sample

Default size: 60 programs.  The summary line (generated, accepted, rejected,
agreeing, unsound, ...) is printed; SPMD_SOUNDNESS_REPORT=FILE also writes it
as JSON.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import torch

from . import harness
from . import meaning as M
from .programs import Input, Program, Stmt, programs
from .regressions import CASES

N = int(os.environ.get("SPMD_SOUNDNESS_N", "60"))
SEED = os.environ.get("SPMD_SOUNDNESS_SEED")  # another sample of programs (default: the fixed one)


def generate(n: int) -> List[Program]:
    """n distinct programs: the fixed sample, or another with SPMD_SOUNDNESS_SEED."""
    return harness.draw_distinct(programs(), n, int(SEED) if SEED is not None else 0)


class Run:
    def __init__(self, generated: Dict[str, Program], report: harness.MypyReport, tally: harness.Tally) -> None:
        self.generated = generated
        self.report = report
        self.tally = tally


@pytest.fixture(scope="module")
def run(mesh2d: Any, soundness_mypy_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    generated = {f"prog_{i:05d}": p for i, p in enumerate(generate(N))}
    regressions = {f"regression_{c.id}": c.program for c in CASES}
    workdir = tmp_path_factory.mktemp("soundness")
    report = harness.check_programs({**generated, **regressions}, workdir, soundness_mypy_cache)
    return Run(generated, report, harness.tally(generated, report, mesh2d))


def _summary(t: harness.Tally) -> Dict[str, Any]:
    return {
        "generated": t.generated,
        "accepted": t.accepted,
        "rejected": t.rejected,
        "agreeing": t.agreeing,
        "unsound": t.unsound,
        "unsound_under_open_findings": dict(t.known),
        "accepted_not_judged": dict(t.accepted_other),
        "rejected_when_run": dict(t.rejected_outcomes),
        "checker_vs_generator_rules": t.generator_disagrees,
        "rejection_codes": dict(t.reject_codes),
    }


def test_accepted_programs_agree_with_their_meaning(run: Run, capsys: pytest.CaptureFixture) -> None:
    t = run.tally
    with capsys.disabled():
        print(f"\nsoundness: {t.line()}")
    path = os.environ.get("SPMD_SOUNDNESS_REPORT")
    if path:
        Path(path).write_text(json.dumps(_summary(t), indent=2) + "\n")
    shown = "\n\n".join(f"[{i}] {v}: {d}\n{src}" for i, v, d, src in t.findings[:5])
    assert t.unsound == 0 and not t.accepted_other, (
        f"{t.unsound} accepted program(s) disagree with their meaning, "
        f"{sum(t.accepted_other.values())} could not be run to a verdict:\n{shown}"
    )
    assert t.generated == N and t.accepted + t.rejected == N


def test_the_generator_reaches_both_verdicts(run: Run) -> None:
    """Controls: the sample has accepted and rejected programs, and the judge does fail
    rejected programs when they are run (so its agreement on accepted ones means something)."""
    t = run.tally
    assert t.accepted >= N // 4, t.line()
    assert t.rejected >= N // 10, t.line()
    assert t.rejected_outcomes["unsound"] >= 1, t.line()
    kinds = {st.op or "local" for p in run.generated.values() for st in p.statements}
    assert {"all_reduce", "all_gather", "reinterpret", "convert", "local"} <= kinds, kinds


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=c.id, marks=pytest.mark.xfail(reason=c.reason, strict=True))
        if c.status == "xfail"
        else pytest.param(c, id=c.id)
        for c in CASES
    ],
)
def test_regression(run: Run, mesh2d: Any, case: Any) -> None:
    errs = run.report.errors.get(f"regression_{case.id}", [])
    if errs:
        return  # rejected: sound
    outcome = harness.judge(case.program, 0, mesh2d)
    assert outcome.verdict == "agree", f"accepted, but {outcome.verdict}: {outcome.detail}"


# -- controls of the judge itself (no mypy) ---------------------------------------------------


def _program(inputs: List[Tuple[str, Dict[str, str], Tuple[int, ...]]], lines: List[Stmt], out: Dict[str, str]) -> Program:
    ins = tuple(Input(n, t, s) for n, t, s in inputs)
    return Program(ins, tuple(lines), lines[-1].name, out, expect_ok=True)


def _coll(name: str, op: str, arg: str, axis: str, src: str, dst: str) -> Stmt:
    return Stmt(name, op=op, arg=arg, axis=axis, src=src, dst=dst)


def test_judge_accepts_a_correct_program(mesh2d: Any) -> None:
    p = _program(
        [("x0", {"dp": "S(0)", "tp": "I"}, (2, 4)), ("x1", {"dp": "I", "tp": "S(0)"}, (2, 4))],
        [
            _coll("v0", "convert", "x0", "tp", "I", "R"),
            _coll("v1", "convert", "x1", "dp", "I", "R"),
            Stmt("v2", expr="F.gelu(v0 @ v1.T)"),
            Stmt("v3", expr="v2.sum()"),
            _coll("v4", "reinterpret", "v3", "dp", "V", "P"),
            _coll("v5", "reinterpret", "v4", "tp", "V", "P"),
        ],
        {"dp": "P", "tp": "P"},
    )
    assert harness.judge(p, 0, mesh2d).verdict == "agree"


@pytest.mark.parametrize(
    "lines,inputs,out,expect",
    [
        # a Partial through a nonlinear op
        ([Stmt("v0", expr="F.gelu(x0)")], [("x0", {"dp": "R", "tp": "P"}, (2, 2))], {"dp": "R", "tp": "P"},
         "depends on how a P input"),
        # an Invariant mixed with a Varying: its gradient is never summed
        ([Stmt("v0", expr="(x0 * x1).sum()"), _coll("v1", "reinterpret", "v0", "dp", "V", "P")],
         [("x0", {"dp": "I", "tp": "R"}, (2, 2)), ("x1", {"dp": "V", "tp": "R"}, (2, 2))],
         {"dp": "P", "tp": "R"}, "gradient of x0"),
        # a Varying value declared Replicate
        ([Stmt("v0", expr="x0 * 2.0")], [("x0", {"dp": "R", "tp": "V"}, (2, 2))], {"dp": "R", "tp": "R"},
         "forward: R value differs"),
        # a Replicate value declared Invariant without reinterpret: its gradient is not summed
        ([Stmt("v0", expr="x0 * 2.0")], [("x0", {"dp": "R", "tp": "R"}, (2, 2))], {"dp": "R", "tp": "I"},
         "gradient of x0"),
    ],
    ids=["partial-nonlinear", "invariant-mixed", "varying-as-replicate", "replicate-as-invariant"],
)
def test_judge_catches_unsound_programs(mesh2d: Any, lines: Any, inputs: Any, out: Any, expect: str) -> None:
    outcome = harness.judge(_program(inputs, lines, out), 1, mesh2d)
    assert outcome.verdict == "unsound" and expect in outcome.detail, outcome


@pytest.mark.parametrize("dp", ["R", "I", "V", "P", "S(0)", "S(1)"])
@pytest.mark.parametrize("tp", ["R", "I", "V", "P", "S(0)", "S(1)"])
def test_embed_then_decode_is_the_identity(dp: str, tp: str) -> None:
    types = {"dp": dp, "tp": tp}
    gen = torch.Generator().manual_seed(0)
    grid = {r: torch.randn(2, 4, generator=gen, dtype=torch.float64) for r in range(M.WORLD)}
    tree = M.decode(types, grid, check=False)
    back = M.decode(types, M.embed(types, tree, M.make_noise(1)), check=True)
    assert M.trees_close(back, tree, rtol=1e-12)
    # and the grid of an R or I axis is replicated across its groups
    for axis in ("dp", "tp"):
        if types[axis] in ("R", "I"):
            g = M.embed(types, tree, M.make_noise(2))
            for members in M.groups(axis):
                assert all(torch.equal(g[members[0]], g[r]) for r in members)
