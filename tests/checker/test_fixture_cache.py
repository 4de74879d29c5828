"""The fixture cases' mypy cache lives in this checkout, never in a machine-wide temp dir."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_fixture_cases_use_a_cache_inside_the_checkout(pytestconfig: pytest.Config) -> None:
    base = Path(pytestconfig.option.mypy_testing_base).resolve()
    assert base != Path(tempfile.gettempdir()).resolve()
    assert ROOT in base.parents
