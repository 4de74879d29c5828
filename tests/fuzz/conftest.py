"""Fixtures of the fuzz tests: mypy's cache, kept between sessions."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def fuzz_mypy_cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mypy's (fine-grained) cache for the fuzz runs; its own, since the [spmd_mypy] axes differ."""
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("spmd-fuzz-mypy-cache"))
    return tmp_path_factory.mktemp("fuzz-mypy-cache")
