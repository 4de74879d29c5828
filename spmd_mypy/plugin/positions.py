"""Positions in a source file, shared by the annotation index (annotations.py)
and the mypy adapter (_mypy.analyzer.annotation_spans).  Pure Python."""

from __future__ import annotations

from typing import Tuple

Pos = Tuple[int, int]  # (line, 0-based column), as mypy reports them
# Where a type is written: (line, column, end line, end column).
Span = Tuple[int, int, int, int]
