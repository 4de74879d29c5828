"""One gloo run for every example and every seeded-bug variant (see examples_gloo.py)."""

from __future__ import annotations

import pytest

from examples_gloo import run_all
from gloo_harness import GlooRun, gloo_available


@pytest.fixture(scope="session")
def examples_gloo_run() -> GlooRun:
    if not gloo_available():
        pytest.skip("this torch has no gloo backend")
    return run_all()
