"""The fixture cases' mypy cache lives in this checkout, never in a machine-wide temp dir."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_fixture_cases_use_a_cache_inside_the_checkout(pytestconfig: pytest.Config) -> None:
    base = Path(pytestconfig.option.mypy_testing_base).resolve()
    assert base != Path(tempfile.gettempdir()).resolve()
    assert ROOT in base.parents


def test_fixture_cases_load_the_plugin_from_this_checkout(pytestconfig: pytest.Config) -> None:
    # mypy runs in a subprocess given only MYPYPATH and, with this option, PYTHONPATH.
    assert pytestconfig.option.mypy_modify_pythonpath
    # this checkout's stub packages (megatron-stubs, spmd_types-stubs), then its sources
    assert os.environ["PYTHONPATH"].split(os.pathsep)[:2] == [str(ROOT / "stubs" / "torch-spmd"), str(ROOT)]


def test_fixture_cases_run_the_plugin_in_strict_mode(request: pytest.FixtureRequest) -> None:
    """Each YAML case's mypy subprocess gets SPMD_MYPY_STRICT=1 (it inherits no environment)."""
    from pytest_mypy_plugins.item import YamlTestItem

    items = request.session.items
    yaml_items = [i for i in items if isinstance(i, YamlTestItem)]
    if not yaml_items:  # this test was selected alone: collect one fixture file
        pytest.skip("no fixture case collected in this run")
    assert all(i.environment_variables.get("SPMD_MYPY_STRICT") == "1" for i in yaml_items)
