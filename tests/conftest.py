"""Shared test set-up: let mypy (fixture cases) find the carrier stubs and the package."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ["MYPYPATH"] = os.pathsep.join([str(ROOT / "stubs" / "torch-spmd"), str(ROOT)])
