"""The setup check's look-up of the carrier stub answers as mypy's module finder does."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy.build import default_data_dir
from mypy.modulefinder import FindModuleCache, compute_search_paths
from mypy.options import Options

from spmd_mypy.plugin import _mypy

NAMES = [
    "spmd_phantom", "mypy", "torch", "pytest", "yaml", "six", "typing_extensions", "os", "collections",
    "no_such_module_anywhere", "local_pkg", "local_mod", "local_stubbed", "local_empty", "local_egg", "local_dup", "megatron", "spmd_types",
]


def _options(tmp_path: Path) -> Options:
    (tmp_path / "local_pkg").mkdir()
    (tmp_path / "local_pkg" / "__init__.pyi").write_text("")
    (tmp_path / "local_mod.py").write_text("")
    (tmp_path / "local_stubbed-stubs").mkdir()
    (tmp_path / "local_stubbed-stubs" / "__init__.pyi").write_text("")
    (tmp_path / "local_empty").mkdir()
    (tmp_path / "local_egg.egg-info").mkdir()  # an entry of the name, under another extension
    (tmp_path / "local_egg-stubs").mkdir()
    (tmp_path / "local_egg-stubs" / "__init__.pyi").write_text("")
    (tmp_path / "local_dup").mkdir()  # two entries of one name
    (tmp_path / "local_dup" / "__init__.py").write_text("")
    (tmp_path / "local_dup.py").write_text("")
    options = Options()
    options.mypy_path = [str(tmp_path)]
    return options


@pytest.mark.parametrize("name", NAMES)
def test_stub_findable_agrees_with_mypys_finder(tmp_path: Path, name: str) -> None:
    options = _options(tmp_path)
    search = compute_search_paths([], options, default_data_dir())
    expected = isinstance(FindModuleCache(search, None, options).find_module(name), str)
    assert _mypy.stub_findable(options, name) == expected
