"""The communication report's numbers against the bytes the runtime moves on gloo.

For every example and each of two 2-rank meshes (dp=1 x tp=2, dp=2 x tp=1;
comms_gloo.py), or the 4-rank dp=4 mesh of an example that needs it, the report (`spmd_mypy.comms.reports`, the plugin's record of
the calls it typed) is evaluated at the sizes of the run: each typed call
the example made, matched to its report site by line, column and op, gives
the element count and dtype size of its input, and the axis sizes are the
mesh's.  That sum must equal, in forward and in backward separately, the
bytes received per rank by the torch.distributed calls the runtime made,
counted from the buffers handed to them (vocab/comm_volume.py's ring figure
per call: the one accounting table, which the report's formulas come from
too).  The number of c10d calls must equal the number of collective steps
the report lists, so a missing or an extra collective fails even where it
would move 0 bytes (an axis of size 1).  The gradient-sync contract's sums
(`spmd.sync_grads`, dp_loss) are a phase of their own: each parameter the
run summed, with its size, against the report's entry for it.

A call's backward runs only if its input requires grad at run time: the
report gives the backward the types imply for a value with a gradient (a
function's input may be a batch fed without one, as the drivers do), and a
call whose input the checker could not type (a parameter's .grad from
module.parameters()) is listed under a conditional backward phase.  So each
backward entry is counted for the calls whose input required grad; a typed
input without gradient (nograd: a .detach(), a mask, a .grad) has no
backward entries, and a run that still did backward work there fails.
"""

from __future__ import annotations

import os
from fractions import Fraction
from typing import Any, Dict, List, Tuple

import pytest

from comms_gloo import (
    GRADIENT_SYNC,
    MESHES,
    WIDE_MESHES,
    WIDE_WORLD,
    WORLD,
    cases,
    example_file,
    examples,
    jobs,
    run_job,
    setup,
    wide_examples,
    wide_jobs,
    wide_setup,
)
from examples_gloo import EXAMPLES
from gloo_harness import GlooRun, gloo_available, spawn_and_collect

from spmd_mypy.comms import reports
from spmd_mypy.plugin import comm_sites
from spmd_mypy.plugin.comm_report import UNKNOWN_GRAD, FunctionReport
from spmd_mypy.vocab.comm_volume import COMMUNICATING, received_fraction

pytestmark = pytest.mark.gloo


@pytest.fixture(scope="module")
def run() -> GlooRun:
    if not gloo_available():
        pytest.skip("this torch has no gloo backend")
    return spawn_and_collect(setup, run_job, jobs, world=WORLD, deadline_s=240.0)


@pytest.fixture(scope="module")
def wide_run() -> GlooRun:
    if not gloo_available():
        pytest.skip("this torch has no gloo backend")
    return spawn_and_collect(wide_setup, run_job, wide_jobs, world=WIDE_WORLD, deadline_s=240.0)


def _run_of(mesh: str, run: GlooRun, wide_run: GlooRun) -> GlooRun:
    return wide_run if mesh in WIDE_MESHES else run


@pytest.fixture(scope="module")
def report() -> Dict[str, List[FunctionReport]]:
    found, _ = reports([str(EXAMPLES)])
    out: Dict[str, List[FunctionReport]] = {}
    for r in found:
        out.setdefault(os.path.abspath(r.file), []).append(r)
    return out


Totals = Dict[str, Tuple[Fraction, int]]  # phase -> (bytes, calls)


def _add(totals: Totals, phase: str, nbytes: Fraction, calls: int) -> None:
    b, c = totals.get(phase, (Fraction(0), 0))
    totals[phase] = (b + nbytes, c + calls)


def expected(reports_: List[FunctionReport], got: Dict[str, Any], sizes: Dict[str, int]) -> Totals:
    entries = {}
    for r in reports_:
        for phase, found in r.phases.items():
            for e in found:
                entries.setdefault((e.site.line, e.site.column, e.site.op), []).append((phase, e))
    totals: Totals = {"forward": (Fraction(0), 0), "backward": (Fraction(0), 0)}
    typed, syncs = got["typed"], got["syncs"]
    for _, line, column, op, numel, isz, grad in typed:
        assert (line, column, op) in entries or op in ("reinterpret", "convert"), (
            f"the run called spmd.{op} at line {line}:{column}, which the report does not list"
        )
        for phase, e in entries.get((line, column, op), []):
            if phase != "forward" and not grad:
                continue  # autograd runs no backward for an input without gradient
            if e.volume.runtime:
                continue  # data-dependent: checked by test_partitioned_conversions_are_data_dependent
            counted = "backward" if phase == UNKNOWN_GRAD else phase
            _add(totals, counted, e.volume.evaluate(sizes, numel, isz), int(e.communicates))
    for _, line, column, op, params in syncs:
        listed = {e.site.value.split(".", 1)[1]: e for phase, e in entries.get((line, column, op), [])}
        assert {phase for phase, _ in entries.get((line, column, op), [])} <= {GRADIENT_SYNC}
        assert set(listed) == set(params), f"line {line}: the report sums {sorted(listed)}, the run {sorted(params)}"
        for name, (numel, isz) in params.items():
            _add(totals, GRADIENT_SYNC, listed[name].volume.evaluate(sizes, numel, isz), 1)
    return totals


def measured(c10d: List[Any]) -> Totals:
    """Per phase the bytes and calls of c10d calls with a static count (not those of a
    partitioned conversion: see test_partitioned_conversions_are_data_dependent)."""
    totals: Totals = {"forward": (Fraction(0), 0), "backward": (Fraction(0), 0)}
    for name, nbytes, g, phase, runtime_sized in c10d:
        if runtime_sized:
            continue
        op = next(o for o in COMMUNICATING if name.startswith(o))
        _add(totals, phase, received_fraction(op, g) * nbytes, 1)
    return totals


def test_workers_ran(run: GlooRun, wide_run: GlooRun) -> None:
    run.check()
    assert run.setup_info == {r: sorted(MESHES) for r in range(WORLD)}
    assert run.exitcodes == [0] * WORLD, run.exitcodes
    wide_run.check()
    assert wide_run.exitcodes == [0] * WIDE_WORLD, wide_run.exitcodes


def test_every_example_is_checked() -> None:
    assert wide_examples() == ["packed_tokens_loss"]
    assert {e for e, _ in cases()} == {*examples(), *wide_examples()}


@pytest.mark.parametrize("example,mesh", cases())
def test_report_matches_measured_bytes(
    run: GlooRun, wide_run: GlooRun, report: Dict[str, List[FunctionReport]], example: str, mesh: str
) -> None:
    file = os.path.abspath(EXAMPLES / example_file(example))
    assert report.get(file), f"the report lists no function of {example_file(example)}"
    dp, tp = {**MESHES, **WIDE_MESHES}[mesh]
    for rank, got in sorted(_run_of(mesh, run, wide_run).per_rank(f"{example}@{mesh}").items()):
        want = expected(report[file], got, {"dp": dp, "tp": tp})
        assert measured(got["c10d"]) == want, f"rank {rank}: measured != report (bytes, calls) per phase"


def test_the_runs_communicate(run: GlooRun, wide_run: GlooRun) -> None:
    """Not vacuous: every example moves bytes in one of the meshes, forward and backward
    where its report says so."""
    for example in {e for e, _ in cases()}:
        moved = [measured(_run_of(m, run, wide_run).per_rank(f"{example}@{m}")[0]["c10d"])
                 for e, m in cases() if e == example]
        assert any(t["forward"][0] > 0 for t in moved), example


def test_the_gradient_sync_phase_is_measured(run: GlooRun, report: Dict[str, List[FunctionReport]]) -> None:
    """dp_loss finishes its gradients with spmd.sync_grads(model, "dp"): on dp=2 the
    sums move bytes, the report lists one all-reduce per parameter in the phase
    the plugin names (the workers' constant is the plugin's), and nothing else
    is in that phase."""
    assert GRADIENT_SYNC == comm_sites.GRADIENT_SYNC
    file = os.path.abspath(EXAMPLES / example_file("dp_loss"))
    listed = [e for r in report[file] for e in r.phases.get(GRADIENT_SYNC, [])]
    assert sorted(e.site.value for e in listed) == ["model.embedding", "model.w_out"]
    assert {str(e.step) for e in listed} == {"all_reduce(P->R)"}
    moved = measured(run.per_rank("dp_loss@dp2")[0]["c10d"])
    assert moved[GRADIENT_SYNC][0] > 0 and moved[GRADIENT_SYNC][1] == 2, moved


def test_partitioned_conversions_are_data_dependent(run: GlooRun, report: Dict[str, List[FunctionReport]]) -> None:
    """The MoE's partitioned conversions move bytes in forward and backward on dp=2,
    and the report lists each such call as data-dependent, in both phases."""
    file = os.path.abspath(EXAMPLES / example_file("moe_expert_parallel"))
    dependent = {
        (e.site.line, e.site.column, e.site.op, phase)
        for r in report[file] for phase, found in r.phases.items() for e in found if e.volume.runtime
    }
    got = run.per_rank("moe_expert_parallel@dp2")[0]
    calls = {(line, column, op) for _, line, column, op, *_ in got["typed"] if op.startswith("partitioned.")}
    assert calls and {(*c, p) for c in calls for p in ("forward", "backward")} <= dependent
    sized = [c for c in got["c10d"] if c[4]]
    assert any(c[3] == "forward" and c[1] for c in sized) and any(c[3] == "backward" and c[1] for c in sized), sized
