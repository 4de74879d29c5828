"""mypy's hook lookups go to the plugin's tables: each name is built once."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import List, Optional

import pytest
from mypy.options import Options

from spmd_mypy.plugin import ASK_AGAIN, FUNCTION_FEATURES, METHOD_FEATURES, SpmdPlugin, _Hooks


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


def _plugin(tmp_path: Path, ini: str = "") -> SpmdPlugin:
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n" + ini)
    options = Options()
    options.config_file = str(config)
    return SpmdPlugin(options)


def test_every_feature_table_lies_under_its_prefixes_and_no_two_overlap(tmp_path: Path) -> None:
    """A feature's hooks are found only under the prefixes it is registered with."""
    plugin = _plugin(tmp_path)
    for features, table in ((FUNCTION_FEATURES, plugin._functions), (METHOD_FEATURES, plugin._methods)):
        seen = {k for k, v in table.items() if v is not None}  # the eager tables
        loaded = set()
        for prefixes, tables in features:
            if tables in loaded:  # one feature listed twice (megatron: functions and methods)
                continue
            loaded.add(tables)
            names = set(tables())
            assert names and all(n.startswith(prefixes) for n in names), prefixes
            assert not names & seen, sorted(names & seen)
            seen |= names
            for name in names:  # and the table answers with the feature's hook
                assert table[name] is tables()[name]


_LAZY_PROGRAM = """
import sys
from mypy.options import Options
from spmd_mypy.plugin import SpmdPlugin
options = Options()
options.config_file = sys.argv[1]
plugin = SpmdPlugin(options)
plugin.get_function_hook("torch.nn.functional.gelu")
plugin.get_method_hook("mod.Fn.apply")
features = ["gradsync", "pipeline", "megatron", "spmd_types", "spmd_types_regions", "dtensor", "local_map",
            "untyped", "raw_collectives", "comm_report"]
def loaded():
    return [f for f in features if "spmd_mypy.plugin." + f in sys.modules]
print(" ".join(loaded()))
assert plugin.get_function_hook("spmd_mypy.runtime.gradsync.sync_grads") is not None
assert plugin.get_method_hook("torch.distributed.tensor._api.DTensor.redistribute") is not None
print(" ".join(loaded()))
from spmd_mypy.plugin import dtensor
options.config_file = sys.argv[2]
SpmdPlugin(options)  # a plugin loaded later configures the features imported before
print(dtensor._AXES[0])
"""


def test_features_are_imported_on_first_use_and_configured(tmp_path: Path) -> None:
    import subprocess
    import sys

    first, second = tmp_path / "first.ini", tmp_path / "second.ini"
    first.write_text("[mypy]\n[spmd_mypy]\naxes = dp, tp\n")
    second.write_text("[mypy]\n[spmd_mypy]\naxes = ep\n")
    out = subprocess.run(
        [sys.executable, "-c", _LAZY_PROGRAM, str(first), str(second)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == "spmd_types spmd_types_regions"  # Fn.apply asks a Function's typecheck hooks
    assert out[1] == "gradsync spmd_types spmd_types_regions dtensor"
    assert out[2] == "('ep',)"


def test_the_rewrite_pass_gates_spmd_types_passes_on_the_module_they_read() -> None:
    """rewrites.py skips (and never imports) the spmd_types passes in a tree
    that does not import the module they look for."""
    from spmd_mypy.plugin._mypy import rewrites, spmd_types_regions, spmd_types_tree

    assert rewrites.SPMD_TYPES == spmd_types_regions.MODULE == spmd_types_tree.MODULE


def test_the_mypy_package_binds_every_name_it_exports_and_keeps_the_fast_path() -> None:
    """Every name of _mypy.__all__ is bound once its feature submodules are
    loaded, and _mypy defines no module __getattr__ (with one, CPython does not
    specialise `_mypy.x` reads: ~0.5% of a run)."""
    from spmd_mypy.plugin import _mypy

    _mypy.load(*_mypy._FEATURE_NAMES)
    assert [n for n in _mypy.__all__ if not hasattr(_mypy, n)] == []
    assert "__getattr__" not in vars(_mypy)


def test_a_torch_function_without_a_list_of_tensors_gets_no_signature_hook(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    """The signature hook of a torch function is decided from its declared
    parameters once mypy has loaded torch: torch.cat's list of tensors needs
    it (lists are invariant), torch.exp's do not; before any build hands the
    plugin its modules, the hook is kept."""
    from mypy import build
    from mypy.modulefinder import BuildSource

    plugin = _plugin(tmp_path)
    assert plugin.get_function_signature_hook("torch._C._VariableFunctions.exp") is not None  # not loaded: kept
    source = tmp_path / "m.py"
    # new on every run (a fresh m would leave torch's trees unloaded), and
    # calling the two functions, so that mypy loads where they are defined
    source.write_text(f"import torch\ntorch.cat([torch.exp(torch.zeros(1))])  # {uuid.uuid4().hex}\n")
    options = Options()
    store = getattr(pytestconfig, "cache", None)  # the checkout's own: torch analysed once
    options.cache_dir = str(store.mkdir("spmd-hook-tables-mypy-cache") if store is not None else tmp_path / "cache")
    result = build.build([BuildSource(str(source), "m")], options)
    plugin = _plugin(tmp_path)
    plugin.set_modules(result.manager.modules)
    assert plugin.get_function_signature_hook("torch._C._VariableFunctions.cat") is not None
    assert plugin.get_function_signature_hook("torch._C._VariableFunctions.exp") is None
