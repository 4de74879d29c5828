"""mypy's hook lookups go to the plugin's tables: each name is built once."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from mypy.options import Options

from spmd_mypy.plugin import ASK_AGAIN, SpmdPlugin, _Hooks


def test_a_name_is_built_on_its_first_lookup_only() -> None:
    built: List[str] = []

    def build(name: str) -> Optional[str]:
        built.append(name)
        return None if name == "plain" else name.upper()

    lookup = _Hooks(build, {"known": "K"}).__getitem__  # what mypy calls
    assert [lookup("f"), lookup("f"), lookup("plain"), lookup("plain"), lookup("known")] == [
        "F", "F", None, None, "K"
    ]
    assert built == ["f", "plain"]


def test_ask_again_is_not_kept() -> None:
    answers = iter([ASK_AGAIN, "ready"])
    table = _Hooks(lambda name: next(answers))
    assert table["alias"] is None and "alias" not in table
    assert table["alias"] == "ready" and table["alias"] == "ready"


def test_the_plugin_answers_through_its_tables(tmp_path: Path) -> None:
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n")
    options = Options()
    options.config_file = str(config)
    plugin = SpmdPlugin(options)
    op = plugin.get_function_hook("torch.nn.functional.gelu")
    assert op is not None and plugin.get_function_hook("torch.nn.functional.gelu") is op
    assert plugin.get_function_hook("builtins.len") is None
    assert plugin.get_method_signature_hook("builtins.str.join") is None
    assert SpmdPlugin.get_function_hook(plugin, "torch.nn.functional.gelu") is op
    assert plugin.get_type_analyze_hook("torch._tensor.Tensor") is not None
