"""The guard around every hook: strict mode re-raises; a user's run gets one
`spmd-internal` note where a check was skipped, never silence.

mypy runs in this process (mypy.api), so that a hook can be made to fail on
purpose by patching the rule it calls."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

from spmd_mypy.plugin import guard, ops

ROOT = Path(__file__).resolve().parents[2]

SOURCE = textwrap.dedent(
    """\
    from typing import Annotated
    import torch.nn.functional as F
    from torch import Tensor
    from spmd_mypy import Spmd, P

    def f(x: Annotated[Tensor, Spmd(tp=P)]) -> None:
        y = F.gelu(x)
    """
)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("guard")
    store = getattr(pytestconfig, "cache", None)
    cache = store.mkdir("spmd-guard-mypy-cache") if store is not None else d / ".cache"
    (d / "mypy.ini").write_text(
        "[mypy]\nplugins = spmd_mypy.plugin\nallow_redefinition = True\nshow_error_codes = True\n"
        f"mypy_path = {ROOT / 'stubs' / 'torch-spmd'}:{ROOT}\ncache_dir = {cache}\n"
        "[mypy-spmd_mypy.*]\nfollow_imports = silent\n"
    )
    yield d


def run(project: Path, monkeypatch: pytest.MonkeyPatch, tag: str, *flags: str) -> Tuple[str, str, int]:
    """mypy on model.py, made new by `tag` (mypy would replay a cached verdict)."""
    from mypy import api

    (project / "model.py").write_text(SOURCE + f"# {tag}\n")
    monkeypatch.chdir(project)
    return api.run(["--config-file", "mypy.ini", *flags, "model.py"])


def boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("boom")


def test_control_the_rule_reports_the_partial_operand(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, _, status = run(project, monkeypatch, "control")
    assert "model.py:7: error: F.gelu on axis 'tp'" in out and "[spmd-op]" in out, out
    assert status == 1


def test_a_failing_hook_leaves_one_internal_note_at_its_line(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard, "STRICT", False)
    monkeypatch.setattr(ops, "infer_all", boom)
    out, _, _ = run(project, monkeypatch, "note")
    lines: List[str] = [ln for ln in out.splitlines() if "model.py" in ln]
    assert lines == [
        "model.py:7: note: spmd-internal: spmd-mypy skipped its check here after an internal error in "
        "op_lane.quick_lane.<locals>.lane (RuntimeError: boom); please report it with this line"
    ], out


def test_strict_mode_raises_instead(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(guard, "STRICT", True)
    monkeypatch.setattr(ops, "infer_all", boom)
    out, err, status = run(project, monkeypatch, "strict", "--show-traceback")
    captured = capsys.readouterr()  # mypy writes its internal-error report to sys.stderr
    text = out + err + captured.out + captured.err
    assert status == 2, text
    assert "INTERNAL ERROR" in text and "RuntimeError: boom" in text, text


@pytest.mark.parametrize(
    "value, strict", [("", False), ("0", False), ("false", False), ("no", False), ("1", True), ("yes", True)]
)
def test_strict_mode_setting(value: str, strict: bool) -> None:
    assert guard.strict_mode({guard.STRICT_ENV: value}) is strict
    assert guard.strict_mode({}) is False


def test_the_suite_runs_in_strict_mode() -> None:
    assert guard.STRICT, "tests/conftest.py sets SPMD_MYPY_STRICT=1 before the plugin is imported"
