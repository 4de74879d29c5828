"""Find and decode `Spmd(...)` inside `Annotated[...]` in a source file.

mypy drops call expressions inside type expressions, so the plugin never sees
`Spmd(tp=V)` through mypy.  It does see the inner `Tensor` with its line and
column.  This module builds, per file, an index from the position of the
first element of every `Annotated[...]` subscript to its metadata, and
decodes an `Spmd(...)` call into a vocabulary `Spmd`, resolving names through
a callback (the analyzer's lookup), so `spmd.S(1)`, `from spmd_mypy import V`
and renamed imports all work.

Where types are written comes from mypy's parse (_mypy.annotation_spans
hands over plain (line, column, end) spans): only the annotations whose text
holds `Annotated` are parsed, each distinct text once.  A file without spans
(or not plain ASCII without tabs) is parsed whole.

String annotations: mypy reports the inner type at the position of the
string, so the index also maps a string constant's position to the metadata
of the first `Annotated` inside it.

Pure Python (stdlib ast; libcst only for syntax newer than the running
Python): imports neither mypy nor torch.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from .annotation_edits import carried
from .annotation_text import LazyExprs, recognize
from .positions import Pos, Span
from .sourcefile import LastLook, file_version, parse_source, read_source, source_file

__all__ = ["Meta", "index_for", "AnnotationError"]


class Meta(NamedTuple):
    """One Annotated[...]: its metadata expressions and where they are."""

    exprs: Sequence[ast.expr]  # a tuple, or the LazyExprs of a text read without parsing it
    line: int
    ambiguous: bool = False  # a string annotation holding several tensors
    misplaced: bool = False  # a Tensor nested in a container Annotated with Spmd
    dims: Optional[Tuple[Optional[int], ...]] = None  # jaxtyping's shape string beside it, read


class AnnotationError(Exception):
    """A malformed Spmd(...) annotation; reported as spmd-annotation."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


# -- the per-file index ----------------------------------------------------------


def _is_annotated(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "Annotated"
    return isinstance(node, ast.Attribute) and node.attr == "Annotated"


def _collect(tree: ast.Module, out: Dict[Pos, Meta]) -> None:
    """Index every Annotated[...] in the annotations of a module.

    Only the places that hold types are walked (parameter and return
    annotations, annotated assignments, alias values), not function bodies'
    expressions: the daemon re-indexes the edited file on every check."""
    for root in _annotation_roots(tree):
        _collect_expr(root, out, None)


def _annotation_roots(tree: ast.Module) -> Iterator[ast.expr]:
    """The type expressions of a module (and values that may be aliases)."""
    stack: List[ast.stmt] = list(reversed(tree.body))
    while stack:
        st = stack.pop()
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = st.args
            for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if arg is not None and arg.annotation is not None:
                    yield arg.annotation
            if st.returns is not None:
                yield st.returns
            stack.extend(reversed(st.body))
        elif isinstance(st, ast.ClassDef):
            stack.extend(reversed(st.body))
        elif isinstance(st, ast.AnnAssign):
            yield st.annotation
            if st.value is not None and _may_be_type(st.value):
                yield st.value
        elif isinstance(st, ast.Assign):
            if _may_be_type(st.value):
                yield st.value
            yield from _typevar_types(st.value)
        elif type(st).__name__ == "TypeAlias":  # `type X = ...` (Python 3.12)
            yield getattr(st, "value")
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in reversed(getattr(st, field, None) or []):
                    if isinstance(child, ast.stmt):
                        stack.append(child)
                    else:  # an except handler or a match case
                        stack.extend(reversed(getattr(child, "body", [])))


def _typevar_types(value: ast.expr) -> Iterator[ast.expr]:
    """The types of `X = TypeVar("X", A, B, bound=C)`: its values and bound."""
    if isinstance(value, ast.Call):
        f = value.func
        if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) == "TypeVar":
            yield from value.args[1:]
            yield from (k.value for k in value.keywords if k.arg == "bound")


def _may_be_type(value: ast.expr) -> bool:
    """An assigned value that may be a type alias (X = Annotated[...], "...")."""
    return isinstance(value, (ast.Subscript, ast.BinOp, ast.Constant, ast.Attribute, ast.Name))


def _collect_expr(root: ast.expr, out: Dict[Pos, Meta], shift: Optional[Pos]) -> None:
    # Parents before children, left to right (as ast.walk, without visiting
    # the insides of names and calls: no type is written there).
    stack: List[ast.AST] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Subscript):
            if _is_annotated(node.value):
                _collect_annotated(node, out, shift)
            stack.append(node.slice)
        elif isinstance(node, (ast.Tuple, ast.List)):
            stack.extend(reversed(node.elts))
        elif isinstance(node, ast.BinOp):
            stack.append(node.right)
            stack.append(node.left)
        elif isinstance(node, ast.Constant):
            if shift is None and isinstance(node.value, str) and "Annotated" in node.value:
                _collect_string(node, node.value, out)
        elif not isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _collect_annotated(node: ast.Subscript, out: Dict[Pos, Meta], shift: Optional[Pos]) -> None:
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if len(elts) < 2:
        return
    first = elts[0]
    pos = shift if shift is not None else (first.lineno, first.col_offset)
    line = shift[0] if shift is not None else node.lineno
    jax = _jaxtyping(first)
    meta = Meta(tuple(elts[1:]), line, dims=jax[1] if jax is not None else None)
    out.setdefault(pos, meta)
    if jax is not None:  # Float[Tensor, "b s h"]: mypy reads it as the tensor inside
        inner = jax[0]
        out.setdefault(shift if shift is not None else (inner.lineno, inner.col_offset), meta)
    elif shift is None and isinstance(first, (ast.Subscript, ast.BinOp)):
        # Annotated[list[Tensor], Spmd(...)]: the Spmd would be lost on
        # the container; the Tensors inside report it (reading.py).
        for inner in ast.walk(first):
            if isinstance(inner, (ast.Name, ast.Attribute)):
                out[(inner.lineno, inner.col_offset)] = meta._replace(misplaced=True)


# jaxtyping's array types (under a type checker, each is typing.Annotated).
JAXTYPING_NAMES = frozenset(
    "Shaped Num Real Inexact Float Float8e4m3fn Float8e5m2 BFloat16 Float16 Float32 Float64 "
    "Complex Complex64 Complex128 Integer Int Int4 Int8 Int16 Int32 Int64 UInt UInt4 UInt8 "
    "UInt16 UInt32 UInt64 Bool Key".split()
)


def _jaxtyping(node: ast.expr) -> Optional[Tuple[ast.expr, Optional[Tuple[Optional[int], ...]]]]:
    """For Float[Tensor, "b 8 h"]: the tensor expression and the sizes the string
    states (an int where written, None for a named dim; None for the whole when
    the rank is not fixed: "*b", "...").  None if node is not such a type."""
    if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Tuple):
        return None
    name = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
    elts = node.slice.elts
    if name not in JAXTYPING_NAMES or len(elts) != 2:
        return None
    text = elts[1]
    if not (isinstance(text, ast.Constant) and isinstance(text.value, str)):
        return None
    sizes: List[Optional[int]] = []
    for part in text.value.split():
        if part.startswith("*") or part == "..." or part.startswith("#*"):
            return elts[0], None
        size = part.split("=")[-1].lstrip("#")
        sizes.append(int(size) if size.isdigit() else None)
    return elts[0], tuple(sizes)


def _collect_string(node: ast.Constant, text: str, out: Dict[Pos, Meta]) -> None:
    try:
        inner = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return
    # mypy reports every type inside a string at the string's position,
    # so only a string holding exactly one tensor type can be read.
    tensors = [
        n for n in ast.walk(inner)
        if (isinstance(n, ast.Name) and n.id.endswith("Tensor"))
        or (isinstance(n, ast.Attribute) and n.attr.endswith("Tensor"))
    ]
    before = len(out)
    _collect_expr(inner.body, out, (node.lineno, node.col_offset))
    if len(out) > before and len(tensors) > 1:
        pos = (node.lineno, node.col_offset)
        out[pos] = out[pos]._replace(ambiguous=True)


class FileFacts:
    """What the plugin knows of one version of a file, from its bytes: the
    cheap pre-filters of every per-file pass (one read of the file serves them
    all) and the annotation index, built on first use (until then the bytes
    are kept, for files that mention Spmd).  `owner` is the last owner that
    looked (see sourcefile.LastLook): while it is the same, so is the version."""

    __slots__ = (
        "key", "owner", "uses", "untyped", "global_code", "raw_dist", "comms", "spmd_types", "configured", "trusted",
        "hooks",
        "data", "built", "source", "lines",
    )

    def __init__(self, key: object, data: bytes) -> None:
        self.key = key
        self.owner: object = None
        # bytes.find, not `in`: `in` on bytes first tries its operand as an int
        # (a TypeError built and cleared: ~1K instructions per test)
        find = data.find
        self.uses = find(b"spmd") >= 0 or find(b"Spmd") >= 0 or find(b"SPMD") >= 0
        self.untyped = find(b"special") >= 0 or find(b"linalg") >= 0 or find(b"fft") >= 0 or find(b"unique") >= 0
        self.global_code = find(b"global_spmd") >= 0  # @global_spmd scopes (global_scopes.py)
        self.raw_dist = find(b"distributed") >= 0  # raw torch.distributed calls (_mypy.retype_raw_writes)
        self.comms = find(b"reveal_comms") >= 0  # spmd.reveal_comms (comm_sites.note_file)
        self.spmd_types = find(b"spmd_types") >= 0  # imports of spmd_types (_mypy.refine_asserts)
        self.configured = find(b"configurations") >= 0  # @spmd.configurations (_mypy.mark_configured)
        self.trusted = find(b"trusted(") >= 0  # @spmd.trusted(...) above a class (_mypy/trusted_classes.py)
        # an autograd Function's typecheck hook (spmd_types' convention): read from its body
        self.hooks = find(b"def typecheck_forward(") >= 0 or find(b"def spmd_typecheck(") >= 0
        # the cheap pre-filter: most files never mention Spmd, and have no index
        # tensors, groups (groups.py), or a Final spec's name written as metadata
        has_meta = find(b"Spmd") >= 0 or find(b"Axis(") >= 0 or (self.uses and find(b"Annotated") >= 0)
        self.data: Optional[bytes] = data if has_meta else None
        self.built: Optional[Dict[Pos, Meta]] = None if has_meta else {}
        # with an index built from mypy's spans: the bytes it was built from and
        # the lines of its annotations, so an edit can carry it (annotation_edits)
        self.source: Optional[bytes] = None
        self.lines: Optional[List[Tuple[int, int]]] = None

    def index(self, spans: Optional["Spans"]) -> Dict[Pos, Meta]:
        """Position of each Annotated's first element -> its metadata."""
        built = self.built
        return built if built is not None else _index(self, spans)


_NOTHING = FileFacts(None, b"")
_CACHE: Dict[str, FileFacts] = {}
_LAST_SCAN = LastLook()


def look(path: Optional[str], owner: object = None) -> FileFacts:
    """The facts of the file at `path`, looked at for `owner` (the analyzer's
    tree, the checker's scope, the tree mypy hands get_additional_deps): a
    repeated look by the same owner needs no stat."""
    last = _LAST_SCAN
    if owner is not None and owner is last.owner and path == last.path:
        return last.value  # type: ignore[return-value]
    facts = _scan_file(path, owner)
    if owner is not None:
        last.owner, last.path, last.value = owner, path, facts
    return facts



def last_facts(owner: object) -> Optional[FileFacts]:
    """The facts of the last look, if `owner` made it (look's answer for it)."""
    last = _LAST_SCAN
    return last.value if owner is not None and last.owner is owner else None  # type: ignore[return-value]


def seen_without_spmd(owner: object) -> bool:
    """Whether the last look at a file for `owner` found no spmd in it: the
    Tensor hook's answer for the rest of that tree (torch's and typeshed's
    stubs hold most Tensors mypy analyses) without looking again."""
    last = _LAST_SCAN
    return owner is not None and last.owner is owner and not last.value.uses  # type: ignore[attr-defined]


def _scan_file(path: Optional[str], owner: object = None) -> FileFacts:
    if not source_file(path):
        return _NOTHING
    assert path is not None
    hit = _CACHE.get(path)
    if hit is not None and owner is not None and hit.owner is owner:
        return hit  # the same tree (or check pass) looked at this version before
    key = file_version(path)
    if key is None:
        return _NOTHING
    if hit is None or hit.key != key:
        made = _CACHE[path] = FileFacts(key, read_source(path))
        if hit is not None and made.data is not None and hit.lines is not None:
            _carry(hit, made)
        hit = made
    if owner is not None:
        hit.owner = owner
    return hit


# Where a file writes types (_mypy.annotation_spans), given the sorted numbers
# of the lines that write Annotated: only statements on those need a walk.
Spans = Callable[[Sequence[int]], Optional[List[Span]]]


def marked_lines(data: bytes) -> List[int]:
    """The numbers of the lines that write Annotated (the spans worth parsing)."""
    out: List[int] = []
    line = 1
    for before in data.split(b"Annotated")[:-1]:  # C-level: lines are never iterated in Python
        line += before.count(b"\n")
        if not out or out[-1] != line:
            out.append(line)
    return out


def _index(facts: FileFacts, spans: Optional[Spans]) -> Dict[Pos, Meta]:
    if facts.built is None:
        data = facts.data or b""
        index = None
        if spans is not None and data.isascii() and b"\t" not in data:
            # mypy's columns count characters (and tabs as one): the same as
            # ast's byte offsets only in ASCII without tabs
            found = spans(marked_lines(data))
            if found is not None:
                lines: List[Tuple[int, int]] = []
                index = _index_of_spans(data, found, lines)
                if index is not None:
                    facts.source, facts.lines = data, lines
        if index is None:
            index = {}
            tree = parse_source(data)
            if isinstance(tree, ast.Module):
                _collect(tree, index)
        facts.built, facts.data = index, None
    return facts.built


# text (its bytes) -> the index of that annotation alone: (line, column,
# metadata) with line and column relative to its start (line 1, column 0),
# the metadata's own line too; None when it does not parse.  Codebases write
# the same annotations over and over, so each text is parsed once.
Snippet = List[Tuple[int, int, Meta]]
_SNIPPETS: Dict[bytes, Optional[Snippet]] = {}
_MAX_SNIPPETS = 65536


def _snippet(raw: bytes) -> Optional[Snippet]:
    recognized = recognize(raw)  # the common form, read without parsing it
    if recognized is not None:
        column, plan = recognized
        found: Optional[Snippet] = [(1, column, Meta(LazyExprs(raw, plan), 1))]
    else:
        found = parsed_snippet(raw)
    if len(_SNIPPETS) >= _MAX_SNIPPETS:
        _SNIPPETS.clear()
    _SNIPPETS[raw] = found
    return found


def parsed_snippet(raw: bytes) -> Optional[Snippet]:
    """A text's snippet from its parse (what annotation_text.recognize must agree with)."""
    try:  # parenthesised: an annotation may span lines
        root = ast.parse("(" + raw.decode("ascii") + ")", mode="eval").body
    except (SyntaxError, ValueError):
        return None
    out: Dict[Pos, Meta] = {}
    _collect_expr(root, out, None)
    return [(line, col - 1 if line == 1 else col, meta) for (line, col), meta in out.items()]


def _index_of_spans(
    data: bytes, spans: List[Span], written: Optional[List[Tuple[int, int]]] = None
) -> Optional[Dict[Pos, Meta]]:
    """The index from the places mypy's parse says types are written: only
    those that write Annotated are parsed, each on its own.  None if one does
    not parse (the caller then parses the whole file).  The first and last
    line of each span that writes Annotated are added to `written`."""
    lines = data.split(b"\n")
    count = len(lines)
    out: Dict[Pos, Meta] = {}
    snippets, missing, new = _SNIPPETS, _MISSING, tuple.__new__  # Meta._make without its frame
    for line, col, end_line, end_col in spans:
        if end_line > count or end_line < line:
            return None
        if line == end_line:
            raw = lines[line - 1][col:end_col]
        else:
            raw = b"\n".join([lines[line - 1][col:], *lines[line:end_line - 1], lines[end_line - 1][:end_col]])
        found = snippets.get(raw, missing)  # texts that write Annotated, seen before
        if found is missing:
            if raw.find(b"Annotated") < 0:  # find: see FileFacts
                continue
            found = _snippet(raw)
        if found is None:
            return None
        if written is not None:
            written.append((line, end_line))
        for r_line, r_col, meta in found:  # type: ignore[union-attr]
            exprs, m_line, ambiguous, misplaced, dims = meta
            pos = (line, col + r_col) if r_line == 1 else (line + r_line - 1, r_col)
            out[pos] = new(Meta, (exprs, line + m_line - 1, ambiguous, misplaced, dims))
    return out


_MISSING: Any = object()


def _carry(old: FileFacts, new: FileFacts) -> None:
    """The index of `old` given to `new`, the next version of its file, when
    the edit between them leaves it as it was (annotation_edits.carried)."""
    assert old.source is not None and old.built is not None and old.lines is not None and new.data is not None
    found = carried(old.source, old.built, old.lines, new.data)
    if found is not None:
        new.built, new.lines = found
        new.source, new.data = new.data, None


# Each of these takes an optional `owner` (see sourcefile.LastLook).


def scan(path: Optional[str], owner: object = None, spans: Optional[Spans] = None) -> Tuple[Dict[Pos, Meta], bool]:
    """(index_for(path), mentions_spmd(path)) with one look at the file.
    `spans` gives where the file writes types (_mypy.annotation_spans), so
    that only those are parsed; without it the whole file is."""
    facts = look(path, owner)
    return _index(facts, spans), facts.uses


def index_for(path: Optional[str], owner: object = None, spans: Optional[Spans] = None) -> Dict[Pos, Meta]:
    """Position of each Annotated's first element -> its metadata (cached per file)."""
    return _index(look(path, owner), spans)


def mentions_spmd(path: Optional[str], owner: object = None) -> bool:
    """Whether the file mentions spmd at all (then it may build carriers)."""
    return look(path, owner).uses


def mentions_untyped_torch(path: Optional[str], owner: object = None) -> bool:
    """Whether a file may call torch.special, torch.linalg or
    torch.fft (the pre-filter for wrapping those calls: _mypy.route_declared_values)."""
    return look(path, owner).untyped
