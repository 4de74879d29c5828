"""Shared test set-up: let mypy (fixture cases) find the carrier stubs and the package,
load the plugin from this checkout, and give this checkout's fixture cases a
mypy cache of their own."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Every mypy the suite starts runs the plugin in strict mode: a hook that
# fails raises instead of falling back, so a fallback is a failing test.
STRICT_ENV = "SPMD_MYPY_STRICT"
os.environ.setdefault(STRICT_ENV, "1")
os.environ["MYPYPATH"] = os.pathsep.join([str(ROOT / "stubs" / "torch-spmd"), str(ROOT)])
# pytest-mypy-plugins runs mypy in a subprocess whose environment holds only
# MYPYPATH and, with mypy_modify_pythonpath, PYTHONPATH: without it the plugin
# mypy imports is whichever spmd_mypy the interpreter has installed, perhaps
# another checkout's.
# The stub packages dir comes first: mypy finds a `-stubs` package (megatron-stubs, spmd_types-stubs)
# only on the interpreter's path, never on MYPYPATH.
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(ROOT / "stubs" / "torch-spmd"), str(ROOT), os.environ.get("PYTHONPATH")])
)

# pytest-mypy-plugins keeps its cache under --mypy-testing-base, which defaults
# to the machine-wide temp dir: two checkouts with different plugin versions
# would then read each other's cached results.  Unless the user names a base,
# the fixture cases use one inside this checkout (shared by all of its cases).
FIXTURE_BASE = ROOT / ".pytest_mypy"


def pytest_collection_modifyitems(items: list) -> None:
    """The fixture cases' mypy gets no environment but the case's own `env:`
    (and MYPYPATH/PYTHONPATH): strict mode must be handed to each case."""
    for item in items:
        env = getattr(item, "environment_variables", None)
        if isinstance(env, dict):
            env.setdefault(STRICT_ENV, os.environ[STRICT_ENV])


def pytest_configure(config: pytest.Config) -> None:
    option = config.option
    option.mypy_modify_pythonpath = True
    if getattr(option, "mypy_testing_base", None) == tempfile.gettempdir():
        FIXTURE_BASE.mkdir(exist_ok=True)
        option.mypy_testing_base = str(FIXTURE_BASE)
