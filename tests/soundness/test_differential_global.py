"""Differential soundness test for GLOBAL SPMD: the checker against the single-device meaning.

Random `@spmd.global_spmd` programs (global_programs.py) on the dp x tp
(2 x 2) mesh are checked in ONE mypy run, then every program is run forward
and backward on 4 simulated ranks (float64) from per-rank shards of full
tensors, and held against its global meaning (global_meaning.py): the body
run on one process on the full tensors with every spmd.* call the identity.
Every program the checker accepts must agree: the output reassembled under
the declared return spec and each input's gradient reassembled under its
gradient type equal the single-device ones.

    SPMD_SOUNDNESS_GLOBAL_N=300 python -m pytest tests/soundness/test_differential_global.py -q -s

Default size: 40 programs.  The counts line is printed.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Tuple

import pytest
import torch

from . import global_meaning as GM
from . import harness
from .global_programs import GInput, GProgram, GType, global_programs
from .mypy_batch import MypyReport, check_batch

N = int(os.environ.get("SPMD_SOUNDNESS_GLOBAL_N", "40"))
N_PER_AXIS = int(os.environ.get("SPMD_SOUNDNESS_GLOBAL_PER_AXIS_N", "100"))  # inputs in per-axis form


def generate(n: int, per_axis: bool = False) -> List[GProgram]:
    """n distinct programs, deterministic (harness.draw_distinct)."""
    return harness.draw_distinct(global_programs(per_axis=per_axis), n)


@dataclass
class Tally:
    generated: int = 0
    accepted: int = 0
    rejected: int = 0
    agreeing: int = 0
    unsound: int = 0
    accepted_runtime_error: int = 0
    known: Counter = field(default_factory=Counter)  # not agreeing, under an open finding
    rejected_outcomes: Counter = field(default_factory=Counter)
    generator_disagrees: int = 0
    reject_codes: Counter = field(default_factory=Counter)
    findings: List[Tuple[int, str, str, str]] = field(default_factory=list)

    def line(self) -> str:
        rej = ", ".join(f"{k} {v}" for k, v in sorted(self.rejected_outcomes.items())) or "none"
        codes = ", ".join(f"{k} {v}" for k, v in self.reject_codes.most_common()) or "none"
        known = "".join(f" (+{v} under open finding {k})" for k, v in sorted(self.known.items()))
        return (
            f"generated {self.generated}, accepted {self.accepted}, rejected {self.rejected}, "
            f"agreeing {self.agreeing}, unsound {self.unsound}, accepted but failing at runtime "
            f"{self.accepted_runtime_error}{known}; rejected programs when run: {rej} "
            f"(disagreeing {self.rejected_outcomes['unsound']}); checker vs generator's rules: "
            f"{self.generator_disagrees} differ; rejection codes: {codes}"
        )


def tally(named: Dict[str, GProgram], report: MypyReport, mesh: Any) -> Tally:
    out = Tally(generated=len(named))
    for i, (key, p) in enumerate(named.items()):
        errs = report.errors.get(key, [])
        accepted = not errs
        out.generator_disagrees += accepted != p.expect_ok
        o = GM.judge(p, i, mesh)
        if not accepted:
            out.rejected += 1
            out.reject_codes.update({code or "?" for _, code, _ in errs})
            out.rejected_outcomes[o.verdict] += 1
            continue
        out.accepted += 1
        if o.verdict == "agree":
            out.agreeing += 1
            continue
        known = known_finding(p)
        if known:
            out.known[known] += 1
        elif o.verdict == "unsound":
            out.unsound += 1
        else:
            out.accepted_runtime_error += 1
        out.findings.append((i, o.verdict, o.detail, p.source()))
    return out


# -- regression cases: minimal programs the test found ------------------------------------------


class Regression(NamedTuple):
    id: str
    program: GProgram
    status: str  # "xfail" (accepted and unsound: open plugin bug) or "sound"
    reason: str


def _g(spec: Tuple[Tuple[str, ...], ...], *partial: str) -> GType:
    return GType(spec, frozenset(partial))


def _prog(inputs: List[Tuple[str, GType, Tuple[int, ...]]], lines: List[str], out: GType) -> GProgram:
    ins = tuple(GInput(n, g, s) for n, g, s in inputs)
    return GProgram(ins, tuple(lines), lines[-1].split(" = ")[0], out, expect_ok=False)


CASES: Tuple[Regression, ...] = (
    Regression(
        "spec_redistribute_shard_to_partial_accepted",
        _prog(
            [("x0", _g((("dp",), ())), (4, 4))],
            ['v0 = spmd.redistribute(x0, src=Spmd(spec=PartitionSpec("dp", None)), '
             'dst=Spmd(spec=PartitionSpec(None, None), dp=P))'],
            _g(((), ()), "dp"),
        ),
        "sound",
        "E1 (fixed): the spec-level redistribute S(i) -> P on an axis is rejected per axis, like "
        "the per-axis redistribute (an expert-only convert); the runtime planner refuses it too",
    ),
    Regression(
        "per_axis_form_matmul_over_a_tp_sharded_dim",
        replace(
            _prog([("x0", _g((("dp",), ("tp",))), (4, 8)), ("x1", _g((("tp",), ())), (8, 4))],
                  ["v0 = x0 @ x1"], _g((("dp",), ("tp",)))),
            inputs=(GInput("x0", _g((("dp",), ("tp",))), (4, 8), "axes"),
                    GInput("x1", _g((("tp",), ())), (8, 4), "axes")),
            out_form="axes",
        ),
        "sound",
        "issue 15 (fixed): operands in per-axis form (Spmd(dp=S(0), tp=S(1))) fell back to local "
        "rules, so x @ w contracting a dim sharded on tp was accepted without out_partial_axes",
    ),
)

# Open findings the generator reaches: an accepted program that does not agree and matches
# the predicate is counted under the finding's name, not as a new one.  Remove an entry when
# its regression case above passes.
KNOWN_OPEN: Tuple[Tuple[str, Callable[[GProgram], bool]], ...] = ()


def known_finding(p: GProgram) -> str:
    return next((name for name, hit in KNOWN_OPEN if hit(p)), "")


@dataclass
class Run:
    generated: Dict[str, GProgram]
    report: MypyReport
    tally: Tally
    per_axis: Dict[str, GProgram]
    per_axis_tally: Tally


@pytest.fixture(scope="module")
def run(mesh2d: Any, soundness_mypy_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    generated = {f"gprog_{i:05d}": p for i, p in enumerate(generate(N))}
    per_axis = {f"gaxes_{i:05d}": p for i, p in enumerate(generate(N_PER_AXIS, per_axis=True))}
    regressions = {f"gregression_{c.id}": c.program for c in CASES}
    workdir = tmp_path_factory.mktemp("soundness_global")
    sources = {k: p.source() for k, p in {**generated, **per_axis, **regressions}.items()}
    report = check_batch(sources, workdir, soundness_mypy_cache)
    return Run(generated, report, tally(generated, report, mesh2d), per_axis, tally(per_axis, report, mesh2d))


def test_accepted_global_programs_agree_with_the_single_device_meaning(
    run: Run, capsys: pytest.CaptureFixture
) -> None:
    t = run.tally
    with capsys.disabled():
        print(f"\nglobal soundness: {t.line()}")
    shown = "\n\n".join(f"[{i}] {v}: {d}\n{src}" for i, v, d, src in t.findings[:5])
    assert t.unsound == 0 and t.accepted_runtime_error == 0, (
        f"{t.unsound} accepted program(s) disagree with the single-device meaning, "
        f"{t.accepted_runtime_error} fail at runtime:\n{shown}"
    )
    assert t.generated == N and t.accepted + t.rejected == N


def test_accepted_per_axis_form_programs_agree_and_bare_v_is_rejected(
    run: Run, capsys: pytest.CaptureFixture
) -> None:
    """Inputs written in per-axis form (`Spmd(dp=S(0), tp=S(1))`) in global code: the checker
    types them by their S(i) dims or rejects them, never falls back to local rules (an accepted
    one must agree); a bare V on a global axis is always rejected."""
    t = run.per_axis_tally
    with capsys.disabled():
        print(f"\nglobal soundness (per-axis form): {t.line()}")
    shown = "\n\n".join(f"[{i}] {v}: {d}\n{src}" for i, v, d, src in t.findings[:5])
    assert t.unsound == 0 and t.accepted_runtime_error == 0 and not t.known, shown
    assert t.generated == N_PER_AXIS and t.accepted + t.rejected == N_PER_AXIS
    forms = [x.form for p in run.per_axis.values() for x in p.inputs]
    assert forms.count("axes") >= N_PER_AXIS // 2 and forms.count("V") >= 2, forms
    bare_v = [k for k, p in run.per_axis.items() if any(x.form == "V" for x in p.inputs)]
    accepted_v = [k for k in bare_v if not run.report.errors.get(k)]
    assert not accepted_v, "\n\n".join(run.per_axis[k].source() for k in accepted_v[:3])
    # few are accepted: an op on a per-axis-form operand with a layout is an error in global code
    assert t.rejected_outcomes["unsound"] >= 1 and t.accepted >= 2, t.line()


def test_the_generator_reaches_both_verdicts(run: Run) -> None:
    """Controls: accepted and rejected programs both occur, rejected ones do disagree when
    run (so agreement of the accepted ones means something), and every statement kind occurs."""
    t = run.tally
    assert t.accepted >= N // 4, t.line()
    assert t.rejected >= N // 10, t.line()
    assert t.rejected_outcomes["unsound"] >= 1, t.line()
    text = "\n".join(p.source() for p in run.generated.values())
    for needles in (
        ("spmd.all_gather(",), ("spmd.all_reduce(",), ("spmd.reduce_scatter(", "spmd.all_to_all("),
        ("spmd.redistribute(",), ("spmd.sum(", "spmd.mean("), (" @ ", "torch.matmul(", "F.linear(", "torch.einsum("),
        ("spmd.matmul(", "spmd.linear(", "spmd.einsum("), ("torch.relu(", "F.gelu(", "torch.softmax("),
    ):
        assert any(n in text for n in needles), needles


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=c.id, marks=pytest.mark.xfail(reason=c.reason, strict=True))
        if c.status == "xfail"
        else pytest.param(c, id=c.id)
        for c in CASES
    ],
)
def test_regression(run: Run, mesh2d: Any, case: Regression) -> None:
    if run.report.errors.get(f"gregression_{case.id}"):
        return  # rejected: sound
    outcome = GM.judge(case.program, 0, mesh2d)
    assert outcome.verdict == "agree", f"accepted, but {outcome.verdict}: {outcome.detail}"


# -- controls of the judge itself (no mypy) -----------------------------------------------------

_ROW = _g((("dp",), ()))
_COL = _g(((), ("tp",)))
_REP = _g(((), ()))


def test_judge_accepts_a_correct_megatron_block(mesh2d: Any) -> None:
    p = _prog(
        [("x0", _ROW, (4, 8)), ("x1", _COL, (8, 8)), ("x2", _g((("tp",), ())), (8, 4))],
        [
            "v0 = torch.relu(x0 @ x1)",
            'v1 = spmd.matmul(v0, x2, out_partial_axes="tp")',
            'v2 = spmd.all_reduce(v1, "tp", src=P, dst=R)',
        ],
        _ROW,
    )
    assert GM.judge(p, 0, mesh2d).verdict == "agree", GM.judge(p, 0, mesh2d)


@pytest.mark.parametrize(
    "inputs,lines,out,expect",
    [
        # a local matmul over a sharded contracted dim, returned as if it were the global one
        ([("x0", _COL, (4, 8)), ("x1", _g((("tp",), ())), (8, 4))], ["v0 = x0 @ x1"], _REP, "forward"),
        # a Partial through a nonlinear op
        ([("x0", _g(((), ()), "tp"), (4, 4))], ["v0 = torch.relu(x0)"], _g(((), ()), "tp"), "forward"),
        # the wrong dim gathered
        ([("x0", _g((("tp",), ())), (4, 8))], ['v0 = spmd.all_gather(x0, "tp", src=S(1), dst=R)'], _REP, "forward"),
        # a sharded value returned as replicated
        ([("x0", _ROW, (4, 4))], ["v0 = x0 * 2.0"], _g(((), ())), "forward"),
        # a replicated value summed as if it were Partial
        ([("x0", _REP, (4, 4))], ['v0 = spmd.all_reduce(x0, "tp", src=P, dst=R)'], _REP, "forward"),
    ],
    ids=["local-matmul", "partial-relu", "wrong-gather-dim", "sharded-as-replicated", "allreduce-of-replicated"],
)
def test_judge_catches_wrong_programs(mesh2d: Any, inputs: Any, lines: Any, out: GType, expect: str) -> None:
    o = GM.judge(_prog(inputs, lines, out), 1, mesh2d)
    assert o.verdict == "unsound" and expect in o.detail, o


@pytest.mark.parametrize(
    "gt",
    [
        _REP, _ROW, _COL, _g((("dp", "tp"), ())), _g(((), ("tp", "dp"))), _g((("tp",), ()), "dp"),
        _g(((), ()), "dp", "tp"), _g((("dp",), ("tp",))),
    ],
    ids=repr,
)
def test_embed_then_decode_is_the_identity(gt: GType) -> None:
    gen = torch.Generator().manual_seed(0)
    full = torch.randn(4, 8, dtype=torch.float64, generator=gen)
    grid = GM.embed(gt, full, gen)
    assert GM.close(GM.decode(gt, grid), full, rtol=1e-12)
    # the blocks: rank (dp=1, tp=0) under spec (("dp", "tp"), ()) holds rows 2..3 (index 2 of 4)
    if gt == _g((("dp", "tp"), ())):
        assert torch.equal(grid[2], full[2:3])
    if gt == _g(((), ("tp", "dp"))):
        assert torch.equal(grid[2], full[:, 2:4])  # dp=1, tp=0: index 0 * 2 + 1 = 1 of 4
