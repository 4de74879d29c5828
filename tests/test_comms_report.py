"""`python -m spmd_mypy.comms PATHS`: the report prints for every example, from what
the plugin recorded while checking (no second reading of the code's types)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from spmd_mypy import I, P, R, S
from spmd_mypy.plugin.comm_report import UNKNOWN_GRAD, function_report, report_text
from spmd_mypy.plugin.comm_sites import Site

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py"))


def test_report_prints_every_example() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "spmd_mypy.comms", "examples"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for name in EXAMPLES:
        assert f"examples/{name}::" in out, name
    # The FSDP gather: its backward is one reduce_scatter receiving (dp-1) * n(w).
    assert (
        "line 57: reduce_scatter(P->S(0)) over dp on grad of self.w_in [backward of all_gather(S(0)->R)]: "
        "(dp-1) * n(self.w_in) * isz"
    ) in out
    # Megatron's copy-to-region: convert(I->R) whose backward all-reduces the input gradient.
    assert "line 34: all_reduce(P->I) over tp on grad of x [backward of convert(I->R)]: 2*(tp-1)/tp * n(x) * isz" in out
    # A nograd input (a token count) has no backward; a nested reinterpret keeps the size name.
    assert "examples/dp_loss.py::masked_token_loss\n  forward: 1 collective(s), 2*(dp-1)/dp * n(local_tokens) * isz bytes" in out
    assert "mypy reported 0 errors" in out


def _site(line: int, column: int, op: str, src: object, dst: object, value: str, **kw: object) -> Site:
    fields = dict(value_call=None, result=None, nograd=False, typed=True)
    fields.update(kw)
    return Site("f.py", line, column, "f", op, ("dp",), src, dst, value, **fields)  # type: ignore[arg-type]


def test_naive_fsdp_backward_pair_and_sizes() -> None:
    """all_gather(w, S(0)->I) assigned to `full`, then convert(full, I->R): the backward
    all-reduces the gathered gradient (2 (dp-1)/dp n(full), full being the gathered w)
    and then slices it (I->S(0)): the pair one reduce_scatter does."""
    gather = _site(6, 11, "all_gather", S(0), I, "w", result="full")
    mark = _site(7, 11, "convert", I, R, "full")
    report = function_report("f.py", "f", [gather, mark])
    back = [e for e in report.phases["backward"] if e.communicates]
    assert [str(e.step) for e in report.phases["backward"]] == ["all_reduce(P->I)", "convert(I->S(0))"]
    assert [e.volume.text() for e in back] == ["2*(dp-1)/dp * n(full) * isz"]
    assert [(r.first.site.line, r.second.site.line, r.first.phase) for r in report.redundant] == [(7, 6, "backward")]


def test_nested_sum_then_slice_and_unlinked_calls() -> None:
    """convert(all_reduce(x)) is flagged in forward; the same two calls on unrelated
    values are not."""
    inner = _site(3, 24, "all_reduce", P, R, "x")
    outer = _site(3, 11, "convert", R, S(0), "spmd.all_reduce(x, 'dp', src=P, dst=R)", value_call=(3, 24))
    report = function_report("f.py", "f", [outer, inner])
    assert [(r.first.phase, r.first.step.op, r.second.step.op) for r in report.redundant] == [
        ("forward", "all_reduce", "convert")
    ]
    apart = _site(4, 11, "convert", R, S(0), "y")
    assert function_report("f.py", "f", [inner, apart]).redundant == []


def test_nograd_and_untyped_inputs() -> None:
    """No backward for a nograd input; an untyped one's backward is conditional."""
    count = _site(3, 11, "all_reduce", P, R, "count", nograd=True)
    grad = _site(4, 11, "all_reduce", P, R, "p.grad", typed=False)
    report = function_report("f.py", "f", [count, grad])
    assert report.phases["backward"] == []
    assert [e.site.value for e in report.phases[UNKNOWN_GRAD]] == ["p.grad"]
    assert report_text(report, "f.py")[0] == "f.py::f"


def test_sites_recorded_only_where_read() -> None:
    """A plain check records no site (the editor's run pays nothing for the
    report); the report's run records every typed call; a file that calls
    spmd.reveal_comms records its own without a report."""
    script = (
        "import os, sys, tempfile\n"
        "from spmd_mypy.plugin import comm_sites\n"
        "from spmd_mypy.plugin._mypy.typed_share import check\n"
        "from spmd_mypy.comms import reports\n"
        "check(['examples/tp_mlp.py'])\n"
        "print('plain', len(comm_sites.files()))\n"
        "found, _ = reports(['examples/tp_mlp.py'])\n"
        "print('report', len(comm_sites.files()), len(found))\n"
        "comm_sites.clear()\n"
        "asking = os.path.join(tempfile.mkdtemp(), 'asks.py')\n"
        "body = open('examples/tp_mlp.py').read()\n"
        "open(asking, 'w').write(body + '\\n\\ndef _comms() -> None:\\n    spmd.reveal_comms(TensorParallelMLP.forward)\\n')\n"
        "messages = check([asking])\n"
        "print('asks', len(comm_sites.files()), any('forward: 1 collective(s)' in m for m in messages))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:3] == ["plain 0", "report 1 1", "asks 1 True"], proc.stdout + proc.stderr


CONFIGURED = '''
from typing import Annotated, Union
import torch.nn.functional as F
from torch import Tensor, nn
import spmd_mypy as spmd
from spmd_mypy import Spmd, I, R, S

Hidden = Union[Annotated[Tensor, Spmd(tp=I)], Annotated[Tensor, Spmd(tp=S(0))]]


class Cfg:
    sequence_parallel: bool


@spmd.configurations(sequence_parallel={True: Spmd(tp=S(0)), False: Spmd(tp=I)})
class Gather(nn.Module):
    weight: Annotated[Tensor, Spmd(tp=S(0))]

    def __init__(self, cfg: Cfg) -> None:
        super().__init__()
        self.sequence_parallel = cfg.sequence_parallel

    def forward(self, x: Hidden) -> Annotated[Tensor, Spmd(tp=S(-1))]:
        if self.sequence_parallel:
            full = spmd.all_gather(x, "tp", src=S(0), dst=R)
        else:
            full = spmd.convert(x, "tp", src=I, dst=R)
        return F.linear(full, self.weight)
'''


def test_configured_function_reports_each_configuration(tmp_path: Path) -> None:
    """A module checked once per configuration runs each configuration's
    collectives only: sequence parallel gathers in forward and
    reduce-scatters in backward; without it, the forward is free and the
    backward all-reduces (Megatron's copy-to-region).  One report each,
    never the two summed."""
    path = tmp_path / "configured.py"
    path.write_text(CONFIGURED)
    proc = subprocess.run(
        [sys.executable, "-m", "spmd_mypy.comms", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    blocks = proc.stdout.split("\n\n")
    sp = next(b for b in blocks if "::Gather.forward [sequence_parallel=True]" in b)
    plain = next(b for b in blocks if "::Gather.forward [sequence_parallel=False]" in b)
    assert sp.splitlines()[1:] == [
        "  forward: 1 collective(s), (tp-1) * n(x) * isz bytes",
        "    line 25: all_gather(S(0)->R) over tp on x: (tp-1) * n(x) * isz",
        "  backward: 1 collective(s), (tp-1) * n(x) * isz bytes",
        "    line 25: reduce_scatter(P->S(0)) over tp on grad of x [backward of all_gather(S(0)->R)]: (tp-1) * n(x) * isz",
    ], sp
    assert plain.splitlines()[1:] == [
        "  forward: 0 collective(s), 0 bytes",
        "  backward: 1 collective(s), 2*(tp-1)/tp * n(x) * isz bytes",
        "    line 27: all_reduce(P->I) over tp on grad of x [backward of convert(I->R)]: 2*(tp-1)/tp * n(x) * isz",
    ], plain
    assert "2 function reports with collectives" in proc.stdout and "mypy reported 0 errors" in proc.stdout


LAYERS = '''from typing import Annotated
from torch import Tensor
import spmd_mypy as spmd
from spmd_mypy import R, S, Spmd

def fsdp(w: Annotated[Tensor, Spmd(dp=S(0))]) -> Annotated[Tensor, Spmd(dp=R)]:
    return spmd.all_gather(w, "dp", src=S(0), dst=R)
'''

ASKS = '''import spmd_mypy as spmd
import layers

def _comms() -> None:
    spmd.reveal_comms(layers.fsdp)
'''


def test_reveal_comms_of_another_module_and_of_a_cached_one(tmp_path: Path) -> None:
    """reveal_comms names a function of another module, checked before the
    asking one: its collectives are reported.  When mypy takes that module
    from its cache (only the asking file edited), nothing of it is checked:
    the note says so instead of reporting no collectives."""
    (tmp_path / "layers.py").write_text(LAYERS)
    (tmp_path / "main.py").write_text(ASKS)
    stubs = ROOT / "stubs" / "torch-spmd"
    (tmp_path / "mypy.ini").write_text(
        f"[mypy]\nplugins = spmd_mypy.plugin\nmypy_path = {stubs}\nallow_redefinition = True\n"
    )
    command = [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "main.py", "layers.py"]
    first = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert first.stdout.splitlines()[:3] == [
        "main.py:5: note: communication of layers.py::fsdp",
        "main.py:5: note:   forward: 1 collective(s), (dp-1) * n(w) * isz bytes",
        "main.py:5: note:     line 7: all_gather(S(0)->R) over dp on w: (dp-1) * n(w) * isz",
    ], first.stdout + first.stderr
    (tmp_path / "main.py").write_text(ASKS + "# edited\n")
    second = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert second.stdout.splitlines()[0] == (
        "main.py:5: note: spmd.reveal_comms(layers.fsdp): layers.py was not checked in this run (mypy took "
        "it from its cache), so the collectives of fsdp are not known here; edit that file or run mypy with "
        "--no-incremental to see them"
    ), second.stdout + second.stderr
