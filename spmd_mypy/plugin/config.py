"""Plugin settings: `[spmd_mypy]` in mypy.ini/setup.cfg or `[tool.spmd_mypy]` in pyproject.toml.

    [spmd_mypy]
    axes = dp, tp      # the mesh axes the code uses (unknown names become errors)
    strict = true      # per-axis annotations must name every declared axis
"""

from __future__ import annotations

import configparser
import os
from typing import NamedTuple, Optional, Tuple

__all__ = ["Settings", "load"]


class Settings(NamedTuple):
    axes: Tuple[str, ...] = ()
    strict: bool = False

    def as_data(self) -> dict:
        return {"axes": list(self.axes), "strict": self.strict}


def _axes(value: object) -> Tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return tuple(a.strip() for a in str(value).replace(",", " ").split() if a.strip())


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
    return Settings(axes=_axes(section.get("axes", ())), strict=_truthy(section.get("strict", False)))
