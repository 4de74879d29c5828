"""programs.py and boundaries.py, written for spmd_types: spmd-mypy accepts
them (no message at all), and spmd_types' runtime checker accepts the same
files on simulated ranks (strict mode) with the values one process computes.
boundaries.py's linear_all_reduce uses the keyword spmd_typecheck form
built from rules.* and runs in spmd_types' global mode (typecheck(local=False),
as torchtitan runs it): only there does its rules.einsum type a contraction
over a sharded label as the pending sum, as spmd-mypy reads every hook.
A wrong input to a typecheck_forward is seeded in boundaries.py: spmd-mypy
reports it, while the runtime checker lets it through (its assert_type
accepts a V value asserted P) and the program computes a wrong result.  The one place
they part is by design: tp_mlp without its declared reinterpret(V -> P) --
spmd_types infers the pending sum from the matmul over the sharded dim
(implicit Partial) and accepts it; spmd-mypy asks for it to be written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("spmd_types")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROGRAMS = HERE / "programs.py"
BOUNDARIES = HERE / "boundaries.py"
CONFIG = ROOT / "tests" / "fixtures" / "mypy.ini"


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "stubs" / "torch-spmd"), str(ROOT)])
    env["SPMD_MYPY_STRICT"] = "1"
    return env


def _mypy(path: Path, tmp_path: Path, *more: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--cache-dir", str(ROOT / ".mypy_cache_spmd_types"),
         "--no-error-summary", str(path), *map(str, more)],
        capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=600,
    )


def _seeded(tmp_path: Path) -> Path:
    """programs.py with tp_mlp's declared pending sum dropped: all_reduce gets V."""
    text = PROGRAMS.read_text()
    bug = text.replace(
        "partial = spmd.reinterpret(h @ w_down.T, Mesh.TP, src=spmd.V, dst=spmd.P)", "partial = h @ w_down.T", 1
    )
    assert bug != text
    (tmp_path / "seeded").mkdir()
    out = tmp_path / "seeded" / "programs.py"
    out.write_text(bug)
    (tmp_path / "seeded" / "run_on_ranks.py").write_text((HERE / "run_on_ranks.py").read_text())
    (tmp_path / "seeded" / "boundaries.py").write_text(BOUNDARIES.read_text())
    return out


def test_checker_accepts_every_program(tmp_path: Path) -> None:
    got = _mypy(PROGRAMS, tmp_path, BOUNDARIES)
    assert got.stdout == "" and got.returncode == 0, got.stdout + got.stderr


def test_runtime_checker_accepts_the_same_programs() -> None:
    got = subprocess.run([sys.executable, str(HERE / "run_on_ranks.py")], capture_output=True, text=True,
                         env=_env(), timeout=600)
    lines = got.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["tp_mlp", "ok"], ["sp_mlp", "ok"], ["vocab_parallel_logsumexp", "ok"],
        ["row_parallel", "ok"], ["linear_all_reduce", "ok"], ["gathered_rows", "ok"], ["masked_nll", "ok"],
    ], got.stdout + got.stderr


def test_implicit_partial_runtime_accepts_checker_asks_for_it(tmp_path: Path) -> None:
    seeded = _seeded(tmp_path)
    checked = _mypy(seeded, tmp_path)
    assert "spmd.all_reduce on axis 'tp': src=P, but partial is V there" in checked.stdout, checked.stdout
    assert "(implicit Partial)" in checked.stdout
    ran = subprocess.run([sys.executable, str(seeded.parent / "run_on_ranks.py")], capture_output=True, text=True,
                         env=_env(), timeout=600)
    assert ran.stdout.splitlines()[0].startswith("tp_mlp ok"), ran.stdout + ran.stderr


def test_wrong_input_to_a_typecheck_forward_reported_statically(tmp_path: Path) -> None:
    """row_parallel handing _SumOverTP a sharded value instead of the pending sum:
    spmd-mypy reports it at the call from typecheck_forward's assert; under
    spmd_types' runtime checker the same program runs to a wrong result."""
    text = BOUNDARIES.read_text()
    bug = text.replace("return _SumOverTP.apply(_partial_scores(h, w))", "return _SumOverTP.apply(h)", 1)
    assert bug != text
    (tmp_path / "seeded").mkdir()
    (tmp_path / "seeded" / "boundaries.py").write_text(bug)
    (tmp_path / "seeded" / "programs.py").write_text(PROGRAMS.read_text())
    (tmp_path / "seeded" / "run_on_ranks.py").write_text((HERE / "run_on_ranks.py").read_text())
    checked = _mypy(tmp_path / "seeded" / "boundaries.py", tmp_path)
    line = bug.splitlines().index("    return _SumOverTP.apply(h)") + 1
    assert f"boundaries.py:{line}: error: _SumOverTP.apply: _SumOverTP.typecheck_forward asserts on partial" in checked.stdout, (
        checked.stdout
    )
    ran = subprocess.run([sys.executable, str(tmp_path / "seeded" / "run_on_ranks.py")], capture_output=True, text=True,
                         env=_env(), timeout=600)
    assert any(x.startswith("row_parallel FAIL") for x in ran.stdout.splitlines()), ran.stdout + ran.stderr
    assert not any(x.startswith("row_parallel FAIL SpmdTypeError") for x in ran.stdout.splitlines())
