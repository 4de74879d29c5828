"""The generated training codebase of the scale benchmark type-checks with zero errors.

bench/gen_codebase.py at about 1,000 lines (every kind of module: types,
collectives helpers, losses, layers, MoE, model, training steps) is checked by
mypy with the plugin.  Zero errors is also a false-alarm test: the code is
correct by construction.  Two probes in the same run show that the plugin is
active and reads the generated annotations: each must give exactly its error.

    SPMD_SCALE_LINES=20000 python -m pytest tests/test_scale_smoke.py   # the full size

Default size: 1,000 lines.  The timings at the full size (with / without the
plugin, cold and warm, linear in lines) are bench/bench_scale.py's.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from soundness.mypy_batch import CRASH_MARKERS, run_mypy

ROOT = Path(__file__).resolve().parents[1]
LINES = int(os.environ.get("SPMD_SCALE_LINES", "1000"))

PROBES = {
    # a Partial into a nonlinear op: the plugin is loaded
    "probe_plugin": (
        "from typing import Annotated\n"
        "import torch.nn.functional as F\n"
        "from torch import Tensor\n"
        "from spmd_mypy import Spmd, P\n"
        "\n"
        "def f(x: Annotated[Tensor, Spmd(tp=P)]) -> Tensor:\n"
        "    return F.gelu(x)\n",
        (7, "spmd-op"),
    ),
    # a replicated hidden state where the sequence-parallel helper wants S(1): the
    # generated annotations are read
    "probe_codebase": (
        "from trainer.comm import gather_sequence\n"
        "from trainer.types import Hidden\n"
        "\n"
        "def g(h: Hidden) -> None:\n"
        "    gather_sequence(h)\n",
        (5, "spmd-arg"),
    ),
}


def _gen_codebase():
    spec = importlib.util.spec_from_file_location("gen_codebase", ROOT / "bench" / "gen_codebase.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def scale_mypy_cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("spmd-scale-smoke-mypy-cache"))
    return tmp_path_factory.mktemp("scale-mypy-cache")


def test_generated_codebase_has_no_errors(tmp_path: Path, scale_mypy_cache: Path) -> None:
    gen = _gen_codebase()
    files = gen.generate(LINES)
    lines = gen.count_lines(files)
    gen.write(tmp_path, files)
    modules = [rel for rel in files if rel.endswith(".py")]
    assert lines >= LINES and len(modules) >= 10, (lines, len(modules))
    for name, (text, _) in PROBES.items():
        (tmp_path / f"{name}.py").write_text(text)
    report = run_mypy(
        [tmp_path / gen.PACKAGE] + [tmp_path / f"{name}.py" for name in PROBES], tmp_path, scale_mypy_cache
    )
    out = report.stdout + report.stderr
    assert not any(m in out for m in CRASH_MARKERS), out[-5000:]
    errors = [ln for ln in report.stdout.splitlines() if ": error:" in ln]
    expected = sorted(f"{name}.py:{line}" for name, (_, (line, _)) in PROBES.items())
    got = sorted(ln.split(": error:")[0] for ln in errors)
    assert got == expected, "\n".join(errors)
    for name, (_, (line, code)) in PROBES.items():
        assert any(ln.startswith(f"{name}.py:{line}:") and f"[{code}]" in ln for ln in errors), errors
    assert f"checked {len(modules) + len(PROBES)} source files" in report.stdout, report.stdout[-500:]
