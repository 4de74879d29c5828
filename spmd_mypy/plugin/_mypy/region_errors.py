"""spmd-mypy's errors dropped in code its user declared unchecked.

spmd_types' `with spmd.no_typecheck():` bodies (spmd_types_regions.py) are
not checked: the spmd-* errors a hook reports at their lines are dropped,
as a `# type: ignore[spmd-...]` written there would drop them.  A raw
torch.distributed collective in a checked autograd forward drops only its
spmd-collective error (that is where raw collectives belong).  They are
dropped by an error watcher around each hook call in such a file (the guard,
plugin/guard.py), not by ignore codes added to mypy's per-line ignores: mypy
adds a note to every other error on a line that ignores some codes ('Error
code "operator" not covered by "type: ignore[spmd-op, ...]" comment'), so
an ignore the user never wrote showed up under plain mypy's own errors
there.  An error the user's own ignore on the line covers is left to mypy,
which then counts that ignore as used.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

from mypy.errors import ErrorInfo, ErrorWatcher
from mypy.nodes import MypyFile

__all__ = [
    "REGION_CODES", "add_region", "any_region", "on_first_region", "region_dropped", "region_errors_dropped",
    "region_lines",
]

# spmd-mypy's error codes a region's lines drop
REGION_CODES: FrozenSet[str] = frozenset({
    "spmd-op", "spmd-collective", "spmd-arg", "spmd-return", "spmd-assign", "spmd-backward",
    "spmd-inplace", "spmd-global", "spmd-group", "spmd-untyped",
})

# path -> (the tree the lines are of: a file parsed again has its own,
# line -> the codes dropped there)
Lines = Dict[int, FrozenSet[str]]
_REGIONS: Dict[str, Tuple[MypyFile, Lines]] = {}
_LISTENERS: List[Callable[[], None]] = []


def add_region(tree: MypyFile, first: int, last: int, codes: FrozenSet[str] = REGION_CODES) -> None:
    """Lines first..last of the tree drop `codes` (an unchecked region: all
    of spmd-mypy's)."""
    first_ever = not _REGIONS
    held = _REGIONS.get(tree.path)
    if held is None or held[0] is not tree:
        held = _REGIONS[tree.path] = (tree, {})
    lines = held[1]
    for line in range(first, last + 1):
        lines[line] = lines.get(line, frozenset()) | codes
    if first_ever:
        for listener in _LISTENERS:
            listener()


def on_first_region(listener: Callable[[], None]) -> None:
    """Call `listener` once a region is known (hooks then run watched)."""
    _LISTENERS.append(listener)


def any_region() -> bool:
    return bool(_REGIONS)


def region_lines(api: Any) -> Optional[Lines]:
    """The lines of the file the checker `api` checks that drop codes (None: none)."""
    tree = getattr(api, "tree", None)
    held = _REGIONS.get(getattr(tree, "path", "")) if tree is not None else None
    return held[1] if held is not None and held[0] is tree and held[1] else None


def _drops(lines: Lines, errors: Any, file: str, line: int, code: Optional[str]) -> bool:
    """Whether an error of `code` at `line` is dropped: the line drops the
    code, and no ignore comment of the user's own there covers it (mypy then
    ignores it, and counts that ignore as used)."""
    if code not in lines.get(line, ()):
        return False
    ignored = errors.ignored_lines.get(file, {}).get(line)
    return ignored is None or (bool(ignored) and code not in ignored)


def region_errors_dropped(api: Any, lines: Lines) -> ErrorWatcher:
    """A watcher (a context manager) dropping the errors reported at `lines`
    with the codes each drops."""
    errors = api.msg.errors

    def drop(file: str, info: ErrorInfo) -> bool:
        return _drops(lines, errors, file, info.line, getattr(info.code, "code", None))

    return api.msg.filter_errors(filter_errors=drop)


def region_dropped(api: Any, line: int, code: str) -> bool:
    """Whether an error reported past every watcher (calls.fail_past_filters)
    would be dropped at this line."""
    lines = region_lines(api)
    errors = api.msg.errors
    return lines is not None and _drops(lines, errors, errors.file, line, code)
