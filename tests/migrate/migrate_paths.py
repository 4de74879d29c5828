"""Paths of the migration tests' files (shared by the static and the gloo tests)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
INPUTS = HERE / "inputs"  # fresh-written programs in the four styles, and unconverted.py
EXPECTED = HERE / "expected"  # their migrated versions, reviewed by hand (golden files)
STANDINS = HERE / "standins"  # stand-in helper packages: megatron, nanotron, picotron
PROGRAMS = ("megatron_mlp", "neox_mlp", "nanotron_mlp", "picotron_mlp")
