"""Reading the source files the plugin looks at, shared by the annotation
index (annotations.py) and the global-scope index (global_scopes.py): which
files are worth a look, their version, their bytes and their ast, and the
last answer about a file for one owner.  Pure Python."""

from __future__ import annotations

import ast
import os
from typing import Callable, Dict, Generic, Iterator, List, Optional, Tuple, TypeVar

# torch's own installed sources never hold SPMD annotations; mypy analyzes
# about 1,700 of them on a cold run, so they are not even stat-ed.  Nor do
# this package's (the runtime is typed with plain Tensors, the vocabulary
# holds none), which mypy analyzes whenever checked code imports spmd_mypy:
# they are a library to the plugin, as torch is.
LIBRARY_DIRS = (
    os.sep + "site-packages" + os.sep + "torch" + os.sep,
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
)


def source_file(path: Optional[str]) -> bool:
    """A Python source or stub outside torch and this package: worth a look."""
    if not path or not path.endswith((".py", ".pyi")):
        return False
    return not any(s in path for s in LIBRARY_DIRS)


_INSTALLED_DIRS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


def installed_package(path: Optional[str]) -> bool:
    """A module of a package installed into an environment (numpy, filelock
    and the like, which torch's sources import): not the user's code."""
    return path is not None and any(d in path for d in _INSTALLED_DIRS)


def file_version(path: str) -> Optional[Tuple[int, int]]:
    """(mtime, size) of a file, None if it cannot be stat-ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def read_source(path: str) -> bytes:
    """A file's bytes (empty if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def parse_source(data: bytes) -> Optional[ast.AST]:
    """A file's ast; None when it is not UTF-8 or does not parse."""
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        return ast.parse(source)
    except SyntaxError:
        pass
    try:  # syntax newer than this Python: libcst parses it, then ast of its code
        import libcst

        module = libcst.parse_module(source)
        return ast.parse(module.code, feature_version=(3, 8))
    except Exception:
        return None


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def statements(tree: ast.AST) -> Iterator[ast.AST]:
    """Every statement of a module's tree, nested ones too (and the except
    handlers and match cases that hold them), parents before children: what
    ast.walk finds of them without visiting a single expression (most of a
    tree's nodes)."""
    stack: List[ast.AST] = list(reversed(getattr(tree, "body", ())))
    while stack:
        node = stack.pop()
        yield node
        for field in _BLOCKS:
            block = getattr(node, field, None)
            if block and isinstance(block, list):
                stack.extend(reversed(block))


def dotted(node: ast.expr) -> Optional[str]:
    """The dotted name an expression spells (`spmd.Spmd`), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def callee_last_name(node: ast.expr) -> str:
    """The last name of a decorator, a with item or a callee, called or not:
    `torch.no_grad()` -> no_grad, `spmd.global_spmd` -> global_spmd; else ""."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


T = TypeVar("T")


class LastLook:
    """The last answer about one file for one owner.  Hooks ask about the file
    being analysed or checked thousands of times; an owner is an object that
    lives for one look at one version of it (the analyzer's tree, the
    checker's scope of one pass: _mypy.analysis_owner / check_owner), so
    while it is the same, the answer is too and no stat is needed."""

    __slots__ = ("owner", "path", "value")

    def __init__(self) -> None:
        self.owner: object = None
        self.path: Optional[str] = None
        self.value: object = None

    def get(self, owner: object, path: Optional[str], compute: Callable[[Optional[str]], T]) -> T:
        if owner is None:
            return compute(path)
        if owner is self.owner and path == self.path:
            return self.value  # type: ignore[return-value]
        value = compute(path)
        self.owner, self.path, self.value = owner, path, value
        return value


class FileIndex(Generic[T]):
    """What one reader collects from a file's ast, cached per file version.

    `wanted(data)` is the cheap pre-filter on the file's bytes (most files
    never mention what the reader looks for, and are not parsed);
    `collect(tree)` builds the answer; `empty` is the answer for a file that
    is not looked at, not read, or not parsed.  The last answer for one
    owner is kept too (LastLook), so repeated questions need no stat."""

    def __init__(
        self, wanted: Callable[[bytes], bool], collect: Callable[[ast.AST], T], empty: T
    ) -> None:
        self.wanted = wanted
        self.collect = collect
        self.empty = empty
        self.last = LastLook()
        self.cache: Dict[str, Tuple[Tuple[int, int], T]] = {}

    def of(self, path: Optional[str], owner: object = None) -> T:
        return self.last.get(owner, path, self.compute)

    def compute(self, path: Optional[str]) -> T:
        if not source_file(path):
            return self.empty
        assert path is not None
        key = file_version(path)
        if key is None:
            return self.empty
        hit = self.cache.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        data = read_source(path)
        tree = parse_source(data) if self.wanted(data) else None
        value = self.collect(tree) if tree is not None else self.empty
        self.cache[path] = (key, value)
        return value
