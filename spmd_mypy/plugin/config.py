"""Plugin settings: `[spmd_mypy]` in mypy.ini/setup.cfg or `[tool.spmd_mypy]` in pyproject.toml.

    [spmd_mypy]
    axes = dp, tp      # the mesh axes the code uses (unknown names become errors)
    strict = true      # per-axis annotations must name every declared axis
    groups = pkg.parallel_state.get_tensor_model_parallel_group: tp,
             pkg.parallel_state.ProcessGroupManager.dp_group: dp
                       # functions, methods and attributes that give the
                       # ProcessGroup of a mesh axis (plugin/groups.py)
    report_untyped = true  # report typed tensors entering unannotated code
    vocabulary = jax   # messages name the types Reduced/Unreduced/Invariant/Varying
                       # (default `letters`: R/P/I/V; vocab/aliases.py)
    mesh = dp:4, tp:8  # mesh axis sizes, when fixed: global code then splits
                       # axes into sub-axes on reshapes and checks divisibility
    synced_rng = tp    # axes whose ranks draw the same random numbers (the
                       # RNG is seeded alike on them): random ops keep their
                       # input's type there (ops.py)
"""

from __future__ import annotations

import configparser
import os
import sys
from typing import NamedTuple, Optional, Tuple

from ..vocab.aliases import DEFAULT_VOCABULARY, vocabulary_names

__all__ = ["Settings", "load"]


class Settings(NamedTuple):
    axes: Tuple[str, ...] = ()
    strict: bool = False
    groups: Tuple[Tuple[str, str], ...] = ()  # (fullname, axes text "tp" or "dp,tp")
    report_untyped: bool = False
    vocabulary: str = DEFAULT_VOCABULARY
    mesh: Tuple[Tuple[str, int], ...] = ()  # (axis, size) when the sizes are fixed
    synced_rng: Tuple[str, ...] = ()

    def as_data(self) -> dict:
        return {
            "axes": list(self.axes),
            "strict": self.strict,
            "groups": [list(g) for g in self.groups],
            "report_untyped": self.report_untyped,
            "vocabulary": self.vocabulary,
            "mesh": [list(m) for m in self.mesh],
            "synced_rng": list(self.synced_rng),
        }


def _axes(value: object) -> Tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return tuple(a.strip() for a in str(value).replace(",", " ").split() if a.strip())


def _groups(value: object) -> Tuple[Tuple[str, str], ...]:
    """`fullname: axis` entries (commas or newlines between them; `dp+tp` for a
    flattened group), or a TOML table {fullname = "axis"}."""
    if isinstance(value, dict):
        entries = [(str(k), str(v)) for k, v in value.items()]
    else:
        entries = []
        for item in str(value).replace("\n", ",").split(","):
            name, sep, axis = item.partition(":")
            if sep and name.strip() and axis.strip():
                entries.append((name.strip(), axis.strip()))
    return tuple((name, ",".join(a.strip() for a in axis.split("+"))) for name, axis in entries)


def _vocabulary(value: object) -> str:
    """A known vocabulary name; an unknown one is said on stderr and messages keep the letters."""
    name = str(value).strip().lower()
    if name not in vocabulary_names():
        print(
            f"spmd-mypy: [spmd_mypy] vocabulary = {value!r} is unknown (expected one of "
            f"{', '.join(vocabulary_names())}); messages use {DEFAULT_VOCABULARY}",
            file=sys.stderr,
        )
        return DEFAULT_VOCABULARY
    return name


def _mesh(value: object) -> Tuple[Tuple[str, int], ...]:
    """`dp:4, tp:8` (or dp=4), or a TOML table {dp = 4, tp = 8}; entries that do not
    read as a name and a positive size are dropped."""
    if isinstance(value, dict):
        entries = [(str(k), str(v)) for k, v in value.items()]
    else:
        entries = []
        for item in str(value).replace("\n", ",").split(","):
            name, sep, size = item.replace("=", ":").partition(":")
            if sep:
                entries.append((name.strip(), size.strip()))
    return tuple((name, int(size)) for name, size in entries if name.isidentifier() and size.isdigit() and int(size) > 0)


def _truthy(value: object) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def load(config_file: Optional[str]) -> Settings:
    """Read the settings next to mypy's own configuration; defaults when absent or unreadable."""
    if not config_file or not os.path.exists(config_file):
        return Settings()
    try:
        if config_file.endswith(".toml"):
            import tomllib

            with open(config_file, "rb") as f:
                section = tomllib.load(f).get("tool", {}).get("spmd_mypy", {})
        else:
            parser = configparser.ConfigParser()
            parser.read(config_file, encoding="utf-8")
            section = dict(parser["spmd_mypy"]) if parser.has_section("spmd_mypy") else {}
    except Exception:
        return Settings()
    return Settings(
        axes=_axes(section.get("axes", ())),
        strict=_truthy(section.get("strict", False)),
        groups=_groups(section.get("groups", "")),
        report_untyped=_truthy(section.get("report_untyped", False)),
        vocabulary=_vocabulary(section.get("vocabulary", DEFAULT_VOCABULARY)),
        mesh=_mesh(section.get("mesh", "")),
        synced_rng=_axes(section.get("synced_rng", ())),
    )
