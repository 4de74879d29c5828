"""An annotation index carried over a small edit of its file (the daemon).

The mypy daemon re-analyses a file on every edit, and the Tensor hook's
first question of the new version builds the file's annotation index
again (annotations.py): a walk of mypy's tree and a look at every written
type.  An edit of a few lines that writes no type leaves that index as it
was, its positions after the edit shifted by the lines it added or
removed.  `carried` gives that index when it can prove so, and None
otherwise (the caller then builds it afresh):

- the lines that differ, before and after, do not write `Annotated`;
- each side of them is a whole run of tokens on its own: no string, bracket
  or backslash continued past it, no bracket closed that it did not open,
  and no backslash before it continues into it, so the statements around
  it keep their shape (a changed line cannot turn
  an `Annotated[...]` on another line into a type, or out of one);
- no `type X = ...` statement starts in them (mypy's spans stop there);
- the file after the edit is ASCII without tabs, as the index's build
  from mypy's spans needs;
- before the edit no annotation that held `Annotated` spanned them, or
  touched the line before or after.

Pure Python: imports neither mypy nor torch.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .positions import Pos

# (first line, last line) of an annotation that held `Annotated`, 1-based
Lines = Tuple[int, int]

_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")


def carried(
    old: bytes, index: Dict[Pos, Any], spans: List[Lines], new: bytes
) -> Optional[Tuple[Dict[Pos, Any], List[Lines]]]:
    """The index (and its annotations' lines) of `new`, from those of `old`;
    None when the edit from `old` to `new` may change it (module docstring)."""
    if not new.isascii() or new.find(b"\t") >= 0:
        return None  # columns: the index is built from mypy's spans only then
    first, old_part, new_part, previous = changed_lines(old, new)
    if previous.rstrip().endswith(b"\\"):
        return None  # the changed lines continue the statement before them
    if not _inert(old_part) or not _inert(new_part):
        return None
    old_end = first + len(old_part)
    # 1-based: the changed lines are first + 1 .. old_end; one line of slack
    low, high = first, old_end + 1
    if any(start <= high and end >= low for start, end in spans):
        return None
    shift = len(new_part) - len(old_part)
    if not shift:
        return index, spans
    moved: Dict[Pos, Any] = {}  # annotations.Meta values: each moved with its line
    for (line, column), meta in index.items():
        if line > old_end:
            meta = meta._replace(line=meta.line + shift)
            line += shift
        moved[(line, column)] = meta
    lines = [(s + shift, e + shift) if s > old_end else (s, e) for s, e in spans]
    return moved, lines


def changed_lines(old: bytes, new: bytes) -> Tuple[int, List[bytes], List[bytes], bytes]:
    """(first, old lines, new lines, the line before): the lines of `old`
    from its 0-based line `first` on became those of `new` (the lines after
    them are the same on both sides), and the line before them (empty when
    `first` is 0).  Found on the bytes (the lines each side shares at its
    start and end), so that a file is never split whole: a long file's
    edit is a few lines."""
    head = _common_prefix(old, new)
    start = old.rfind(b"\n", 0, head) + 1  # the first changed line starts here
    tail = _common_suffix(old, new, min(len(old), len(new)) - start)
    # the lines after the change: from the first newline of the common end
    cut = old.find(b"\n", len(old) - tail)
    old_stop, new_stop = (len(old), len(new)) if cut < 0 else (cut, len(new) - (len(old) - cut))
    previous = old[old.rfind(b"\n", 0, start - 1) + 1:start - 1] if start else b""
    return (
        old.count(b"\n", 0, start),
        old[start:old_stop].split(b"\n"),
        new[start:new_stop].split(b"\n"),
        previous,
    )


def _common_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common start of `a` and `b` (a bisection
    whose comparisons are slices compared in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:  # a[:low] == b[:low]; the answer is at most high
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _common_suffix(a: bytes, b: bytes, most: int) -> int:
    """The length of the longest common end of `a` and `b`, at most `most`."""
    low, high, la, lb = 0, most, len(a), len(b)
    while low < high:
        mid = (low + high + 1) // 2
        if a[la - mid:la - low] == b[lb - mid:lb - low]:
            low = mid
        else:
            high = mid - 1
    return low


def _inert(lines: List[bytes]) -> bool:
    """Whether these lines write no `Annotated` and are a whole run of tokens
    on their own (see the module docstring).  A scan of their characters, not
    tokenize (whose patterns cost more to build than an index): strings must
    close on their line, no backslash outside them, brackets balance."""
    depth = 0
    for raw in lines:
        if raw.find(b"Annotated") >= 0 or not raw.isascii():
            return False
        line = raw.decode("ascii")
        if any(part.lstrip().startswith("type") for part in line.split(";")):
            return False  # perhaps `type X = ...`
        depth = _scan_line(line, depth)
        if depth < 0:
            return False
    return depth == 0


def _scan_line(line: str, depth: int) -> int:
    """The bracket depth after `line`, from `depth` before it; -1 when a
    bracket closes below zero, a string does not close on the line, a
    triple quote opens or a backslash stands outside a string."""
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "#":
            break
        if c == "'" or c == '"':
            if line.startswith(c * 3, i):
                return -1
            i += 1
            while i < n and line[i] != c:
                i += 2 if line[i] == "\\" else 1
            if i >= n:
                return -1
        elif c == "\\":
            return -1
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth < 0:
                return -1
        i += 1
    return depth
