"""Differential soundness with structure: Unions of runtime flags, module attributes, loops.

The programs of structured_programs.py (one strategy per kind) are checked in
ONE mypy run, then every accepted program is run on 4 simulated ranks once
per flag assignment and held against its meaning (meaning.py, by harness.judge):
it must agree for every assignment.  Planted programs (the holes once found:
a Union operand set of five checked in part, a write of the wrong type to an
annotated module attribute, a loop whose second iteration breaks a rule, an
in-place op giving a gradient to a buffer typed as holding none) must be
rejected, and the judge must find them unsound when run.

    SPMD_SOUNDNESS_STRUCTURED_N=100 python -m pytest tests/soundness/test_differential_structured.py -q -s

Default size: 24 programs per kind.  The counts line of each kind is printed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict

import pytest

from . import harness
from .mypy_batch import MypyReport, check_batch
from .programs import Input, Program, Stmt
from .structured_programs import KINDS, STRATEGIES, ClassProgram, FlagProgram, InPlace, LoopProgram

N = int(os.environ.get("SPMD_SOUNDNESS_STRUCTURED_N", "100"))


def judge_all(p: Any, index: int, mesh: Any) -> harness.Outcome:
    """The program judged once per run (flag assignment); the first disagreement, else agree."""
    for r in p.runs():
        o = harness.judge(r, index, mesh)
        if o.verdict != "agree":
            values = getattr(r, "values", ())
            return harness.Outcome(o.verdict, f"flags {values}: {o.detail}" if values else o.detail)
    return harness.Outcome("agree")


# -- planted programs: the holes once found, each unsound when run ----------------------------------

_R, _P = {"dp": "R", "tp": "R"}, {"dp": "R", "tp": "P"}
_V = {"dp": "R", "tp": "V"}
_SHAPE = (2, 4)


def _cat_of_five_first_partial() -> FlagProgram:
    """torch.cat of five Union values (V or S(0): 32 combinations) where only the first may be P,
    as its second alternative, then F.gelu."""
    s0 = {"dp": "R", "tp": "S(0)"}
    ins = (Input("x0", _V, _SHAPE), Input("x1", s0, _SHAPE), Input("x2", _P, _SHAPE))
    us = [Stmt("u0", expr="(x0 if flag0 else x2)")] + [Stmt(f"u{j}", expr="(x0 if flag0 else x1)") for j in range(1, 5)]
    lines = us + [Stmt("v0", expr="torch.cat([u0, u1, u2, u3, u4], dim=0)"), Stmt("v1", expr="F.gelu(v0)")]
    return FlagProgram(ins, tuple(lines), "v1", _V, expect_ok=False)


def _attribute_write_of_another_type() -> ClassProgram:
    """self.c0 declared R, written a V value, read back and returned as R."""
    ins = (Input("x0", _V, _SHAPE),)
    lines = (Stmt("self_c0", expr="x0 * 2.0"), Stmt("v0", expr="self_c0 + 1.0"))
    return ClassProgram(ins, lines, "v0", _R, expect_ok=False, attrs=(("self_c0", tuple(sorted(_R.items()))),))


def _loop_breaking_on_the_second_iteration() -> LoopProgram:
    """h starts R; the body is a gelu then a product with a P input: the second gelu takes a P."""
    ins = (Input("x0", _R, _SHAPE), Input("x1", _P, _SHAPE))
    body = (Stmt("h", expr="F.gelu(h)"), Stmt("h", expr="h * x1"))
    lines = (Stmt("h", expr="x0"),) + body * 2 + (Stmt("v0", expr="h * 1.0"),)
    return LoopProgram(ins, lines, "v0", _P, expect_ok=False, pre=1, body=2)


def _gradient_into_a_buffer_without_one() -> FlagProgram:
    """A buffer of ones (R, no gradient) given x0's gradient in place, returned
    as dp=V, tp=I: typed as holding no gradient, it could be returned as any type."""
    ins = (Input("x0", _R, (4, 4)),)
    lines = (Stmt("buf", expr="torch.ones(4, 4)"), InPlace("buf", expr="buf", write=" += x0"),
             Stmt("v0", expr="buf * 1.0"))
    return FlagProgram(ins, lines, "v0", {"dp": "V", "tp": "I"}, expect_ok=False, flags=0)


PLANTED: Dict[str, Program] = {
    "planted_inplace_gradient_into_a_buffer": _gradient_into_a_buffer_without_one(),
    "planted_union_cat_of_five": _cat_of_five_first_partial(),
    "planted_attribute_write": _attribute_write_of_another_type(),
    "planted_loop_second_iteration": _loop_breaking_on_the_second_iteration(),
}


@dataclass
class Run:
    generated: Dict[str, Dict[str, Any]]  # kind -> key -> program
    report: MypyReport
    tallies: Dict[str, harness.Tally]


@pytest.fixture(scope="module")
def run(mesh2d: Any, soundness_mypy_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    generated = {k: {f"{k}_{i:03d}": p for i, p in enumerate(harness.draw_distinct(STRATEGIES[k](), N))} for k in KINDS}
    sources = {key: p.source() for g in generated.values() for key, p in g.items()}
    sources.update({key: p.source() for key, p in PLANTED.items()})
    report = check_batch(sources, tmp_path_factory.mktemp("soundness_structured"), soundness_mypy_cache)
    tallies = {k: harness.tally(generated[k], report, mesh2d, judge_one=judge_all) for k in KINDS}
    return Run(generated, report, tallies)


def test_accepted_structured_programs_agree_with_their_meaning(run: Run, capsys: pytest.CaptureFixture) -> None:
    with capsys.disabled():
        for k in KINDS:
            print(f"\nstructured soundness ({k}): {run.tallies[k].line()}")
    findings = [f for t in run.tallies.values() for f in t.findings]
    shown = "\n\n".join(f"[program {i}] {v}: {d}\n{src}" for i, v, d, src in findings[:5])
    assert not findings, f"{len(findings)} accepted program(s) unsound or not judged:\n{shown}"
    for k in KINDS:
        t = run.tallies[k]
        assert t.generated == N and t.accepted + t.rejected == N, (k, t.line())


def test_the_generators_reach_both_verdicts(run: Run) -> None:
    """Controls: each kind has accepted and rejected programs, and rejected ones are
    unsound when run (so the accepted ones' agreement means something)."""
    for k in KINDS:
        t = run.tallies[k]
        assert t.accepted >= N // 5, (k, t.line())
        assert t.rejected >= N // 10, (k, t.line())
        assert t.rejected_outcomes["unsound"] >= 1, (k, t.line())
    unions = [p for p in run.generated["union"].values() if p.source().count(" if flag") >= 5]
    assert len(unions) == N


@pytest.mark.parametrize("key", sorted(PLANTED))
def test_planted_holes_are_rejected_and_unsound(run: Run, mesh2d: Any, key: str) -> None:
    """Each hole once found: the checker rejects it, and the judge finds it unsound when run."""
    p = PLANTED[key]
    assert run.report.errors.get(key), f"accepted:\n{p.source()}"
    assert judge_all(p, 0, mesh2d).verdict == "unsound", p.source()
