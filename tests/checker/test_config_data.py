"""Rule changes reach mypy's cache through report_config_data."""

from __future__ import annotations

import shutil
from pathlib import Path

from mypy.options import Options
from mypy.plugin import ReportConfigContext

import spmd_mypy.plugin as plugin_module
from spmd_mypy.plugin import SpmdPlugin


def _plugin(tmp_path: Path, ini: str = "") -> SpmdPlugin:
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n" + ini)
    options = Options()
    options.config_file = str(config)
    return SpmdPlugin(options)


def test_config_data_carries_rules_digest_and_settings(tmp_path: Path) -> None:
    ctx = ReportConfigContext("model", str(tmp_path / "model.py"), is_check=True)
    data = _plugin(tmp_path, "\n[spmd_mypy]\naxes = dp, tp\nstrict = true\n").report_config_data(ctx)
    assert data["axes"] == ["dp", "tp"] and data["strict"] is True
    assert len(data["rules"]) == 16


def test_digest_changes_when_a_rule_table_changes(tmp_path: Path, monkeypatch) -> None:
    vocab = tmp_path / "vocab"
    shutil.copytree(plugin_module._VOCAB, vocab)
    monkeypatch.setattr(plugin_module, "_VOCAB", vocab)
    before = plugin_module._rules_version()
    table = vocab / "opclasses.py"
    table.write_text(table.read_text().replace("add sub", "sub add", 1))
    assert plugin_module._rules_version() != before


_SPEC_MODULE = "from typing import Final\nfrom spmd_mypy import Spmd, V\n\nACT: Final = Spmd(tp=V)\n"


def test_final_specs_digest_for_user_modules_only(tmp_path: Path) -> None:
    # The digest of a module's Final specs goes into what mypy is told of a
    # user module; a module of an installed package (numpy's, which torch's
    # sources import by the hundred) is never read for it.
    user = tmp_path / "proj" / "specs.py"
    installed = tmp_path / "lib" / "python3.11" / "site-packages" / "somepkg" / "specs.py"
    for path in (user, installed):
        path.parent.mkdir(parents=True)
        path.write_text(_SPEC_MODULE)
    plugin = _plugin(tmp_path)
    mine = plugin.report_config_data(ReportConfigContext("specs", str(user), is_check=True))
    theirs = plugin.report_config_data(ReportConfigContext("somepkg.specs", str(installed), is_check=True))
    assert isinstance(mine["final_specs"], str) and len(mine["final_specs"]) == 16
    assert "final_specs" not in theirs
