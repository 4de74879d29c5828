"""bench/bench_interop.py's goal as a test: on the interop corpus (tests/spmd_types_style,
tests/interop/corpus) every spmd_types annotation is read, every boundary call and
every call into megatron-core and across DTensor's boundary typed, and mypy with
the plugin reports nothing.  A probe can fail: a group the checker cannot name
leaves its assert unread."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("spmd_types")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import bench_interop  # noqa: E402


def test_every_site_of_the_corpus_is_typed() -> None:
    results, errors = bench_interop.run()
    assert errors == []
    for kind, found in results.items():
        assert found, f"no {kind} in the corpus"
        assert [s.text for s, ok, _ in found if not ok] == [], kind


def test_an_unread_assert_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = (ROOT / "tests" / "interop" / "corpus" / "titan_block.py").read_text()
    planted = source.replace("group: TpGroup) -> torch.Tensor:\n        spmd.assert_type",
                             "group: dist.ProcessGroup) -> torch.Tensor:\n        spmd.assert_type", 1)
    planted = planted.replace("def loss(logits: torch.Tensor, labels: torch.LongTensor, tp: TpGroup)",
                              "def loss(logits: torch.Tensor, labels: torch.LongTensor, tp: dist.ProcessGroup)", 1)
    assert planted != source
    path = tmp_path / "titan_block.py"
    path.write_text(planted)
    monkeypatch.setattr(bench_interop, "CORPUS", [path])
    results, _ = bench_interop.run()
    unread = [s.text for s, ok, _ in results["spmd_types boundaries"] if not ok]
    assert any("_VocabParallelNLL.apply(logits, labels, tp)" in t for t in unread), results
