"""The layering rules of DESIGN.md ("Architecture"), read from the source with `ast`.

Each check walks every module of spmd_mypy/ on its own (nothing here imports
the package) and prints its offenders:

- no file over 600 lines, no function over 80;
- no private name (`_x`) imported from, or read as an attribute of, another of
  our modules (the package `_mypy` and the runtime's `_local` module are
  modules, not names: importing them is allowed, their private names are not);
- mypy imported only under spmd_mypy/plugin/_mypy/; torch never by vocab or
  plugin; mypy never by vocab or runtime;
- no import cycles between our modules;
- no name bound twice at a module's top level by imports (a later import
  silently replaces the earlier one: two helpers of one name in _mypy).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "spmd_mypy"
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
PRIVATE_MODULES = frozenset({"_mypy", "_local"})  # module names that start with _


def _modules() -> Dict[str, Path]:
    """dotted module name -> file, for every .py under spmd_mypy/."""
    out: Dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def _rel(name: str) -> str:
    return str(MODULES[name].relative_to(ROOT))


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _absolute(name: str, node: ast.ImportFrom) -> str:
    """The module an ImportFrom in module `name` imports from."""
    if node.level == 0:
        return node.module or ""
    base = name.split(".")
    if not _is_package(name):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(name: str) -> Iterator[Tuple[str, ast.AST]]:
    """(imported module, node) for every import in module `name`, at any depth.
    `from pkg import mod` counts as an import of pkg.mod when that is a module."""
    for node in ast.walk(TREES[name]):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(name, node)
            yield source, node
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in MODULES:
                    yield sub, node


def _ours(module: str) -> bool:
    return module == "spmd_mypy" or module.startswith("spmd_mypy.")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name not in PRIVATE_MODULES


def _report(what: str, offenders: List[str]) -> None:
    if offenders:
        print(f"{what}:")
        for line in offenders:
            print("  " + line)
    assert not offenders, f"{len(offenders)} {what}"


def test_no_file_over_600_lines() -> None:
    offenders = []
    for name, path in MODULES.items():
        n = len(path.read_text().splitlines())
        if n > MAX_FILE_LINES:
            offenders.append(f"{_rel(name)}: {n} lines")
    _report("files over 600 lines", offenders)


def test_no_function_over_80_lines() -> None:
    offenders = []
    for name, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                n = (node.end_lineno or node.lineno) - first + 1
                if n > MAX_FUNCTION_LINES:
                    offenders.append(f"{_rel(name)}:{node.lineno} {node.name}: {n} lines")
    _report("functions over 80 lines", offenders)


def _module_aliases(name: str) -> Dict[str, str]:
    """Local names in module `name` bound to another of our modules -> that module."""
    out: Dict[str, str] = {}
    for node in ast.walk(TREES[name]):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name):
                    out[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(name, node)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in MODULES:
                    out[alias.asname or alias.name] = sub
    return out


def _dotted(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def test_no_private_name_crosses_a_module() -> None:
    offenders = []
    for name, tree in TREES.items():
        aliases = _module_aliases(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(name, node)
                if not _ours(source) or source == name:
                    continue
                for alias in node.names:
                    if _private(alias.name) and f"{source}.{alias.name}" not in MODULES:
                        offenders.append(f"{_rel(name)}:{node.lineno} imports {source}.{alias.name}")
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                base = _dotted(node.value)
                if base is None:
                    continue
                head, _, rest = base.partition(".")
                module = aliases.get(head)
                if module is None:
                    continue
                target = f"{module}.{rest}" if rest else module
                if target in MODULES and target != name:
                    offenders.append(f"{_rel(name)}:{node.lineno} uses {target}.{node.attr}")
    _report("private names used across modules", offenders)


def _layer_offenders(forbidden: str, allowed_under: Optional[str], layers: Tuple[str, ...]) -> List[str]:
    """Imports of `forbidden` (or its submodules) from modules under `layers`
    (every module if empty), except those under `allowed_under`."""
    offenders = []
    for name in TREES:
        if layers and not name.startswith(layers):
            continue
        if allowed_under is not None and (name == allowed_under or name.startswith(allowed_under + ".")):
            continue
        for module, node in _imports(name):
            if module == forbidden or module.startswith(forbidden + "."):
                offenders.append(f"{_rel(name)}:{node.lineno} imports {module}")  # type: ignore[attr-defined]
    return offenders


def test_mypy_imported_only_under_plugin_mypy() -> None:
    _report("mypy imports outside plugin/_mypy", _layer_offenders("mypy", "spmd_mypy.plugin._mypy", ()))


def test_torch_never_imported_by_vocab_or_plugin() -> None:
    layers = ("spmd_mypy.vocab", "spmd_mypy.plugin")
    _report("torch imports in vocab or plugin", _layer_offenders("torch", None, layers))


def test_mypy_never_imported_by_vocab_or_runtime() -> None:
    layers = ("spmd_mypy.vocab", "spmd_mypy.runtime")
    _report("mypy imports in vocab or runtime", _layer_offenders("mypy", None, layers))


def _graph() -> Dict[str, Set[str]]:
    """module -> the other modules of ours it imports (a package counts as imported
    with its submodule, as Python runs it first; a package's own submodules it
    imports are its parts, not a cycle through it)."""
    graph: Dict[str, Set[str]] = {name: set() for name in TREES}
    for name in TREES:
        for module, _ in _imports(name):
            while module and module not in MODULES:
                module = module.rpartition(".")[0]
            if module and module != name and not (_is_package(module) and name.startswith(module + ".")):
                graph[name].add(module)
    return graph


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _rebound_imports(tree: ast.Module) -> List[str]:
    """Names that two top-level imports of one module bind."""
    seen: Set[str] = set()
    twice: List[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                name = (alias.asname or alias.name).split(".")[0]
                if name in seen and name != "annotations":
                    twice.append(f"line {node.lineno}: {name}")
                seen.add(name)
    return twice


def test_no_name_imported_twice() -> None:
    offenders = []
    for mod, path in _modules().items():
        twice = _rebound_imports(ast.parse(path.read_text()))
        offenders += [f"{mod} {t}" for t in twice]
    assert not offenders, "names bound by two imports:\n" + "\n".join(offenders)


def test_rebound_import_is_found() -> None:
    tree = ast.parse("from .a import f, g\nfrom .b import f\n")
    assert _rebound_imports(tree) == ["line 2: f"]


def test_cycle_finder_finds_a_cycle() -> None:
    """The check below can fail: a planted cycle is found."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    _report("import cycles", [" -> ".join(c) for c in _cycles(_graph())])


@pytest.mark.parametrize("source, private", [("from .ops import _kind\n", True), ("from .ops import kind\n", False)])
def test_private_import_is_recognised(source: str, private: bool) -> None:
    """The private-name check reads `from .m import _x` as private."""
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _private(node.names[0].name) is private
