"""How much of code written for spmd_types, megatron-core and DTensor the checker
types statically (issue 14).

Corpus (fresh-written): tests/spmd_types_style/*.py (programs for spmd_types'
runtime checker) and tests/interop/corpus/*.py (Megatron-style and
torchtitan-style files).  The sites are found from each file's Python ast,
independently of the plugin:

  spmd_types annotations  every assert_type / assert_type_like / mutate_type
                          statement on a name (probe: the name's type after it)
  spmd_types boundaries   every call of a function decorated @local_map or
                          @no_typecheck(in_types=, out_types=), and every
                          `Fn.apply(...)` of a Function with a typecheck_forward
                          or spmd_typecheck staticmethod, outside that Function
                          (probe: the call's type)
  megatron-core calls     every call of a function imported from megatron.core
                          (or reached through a module imported from it), and
                          every call of a `self.<layer>` built from a
                          megatron-core class (probe: the call's type); the
                          process-group getters of parallel_state are not
                          counted (they are typed where a call takes them
                          as its axis)
  DTensor boundary calls  every DTensor.from_local / distribute_tensor /
                          .to_local call (probe: the call's type)

A probe is a `reveal_type(...)` line the bench adds to a copy of the file
(after the statement for an annotation, before it for a call); a site is read
(typed) when mypy with the plugin reveals a known SPMD type there
(`SpmdTensor[Literal[...]]` or `PlacedDTensor[Literal[...]]`, also inside a
tuple or a callable's signature).  The corpus itself must be clean (no error).

Run:  python bench/bench_interop.py        (one mypy run, about a minute)
"""

from __future__ import annotations

import ast
import datetime
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

from _mypyrun import REPO, child_env, git_state, ini_text

CORPUS = sorted((REPO / "tests" / "spmd_types_style").glob("[!_t]*.py")) + sorted(
    (REPO / "tests" / "interop" / "corpus").glob("*.py")
)
CORPUS = [p for p in CORPUS if p.name != "run_on_ranks.py"]
KNOWN = re.compile(r"(SpmdTensor|PlacedDTensor)\[Literal\[")
KINDS = ("spmd_types annotations", "spmd_types boundaries", "megatron-core calls", "DTensor boundary calls")


@dataclass
class Site:
    kind: str
    line: int  # in the original file
    text: str


@dataclass
class Probe:
    before: int  # insert before this original line (1-based)
    indent: str
    expr: str
    site: Site


@dataclass
class FileSites:
    path: Path
    probes: List[Probe] = field(default_factory=list)


def _dotted(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


class _Finder(ast.NodeVisitor):
    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines()
        self.spmd_types: Set[str] = set()  # names bound to the module spmd_types
        self.megatron: Set[str] = set()  # names bound to megatron.core things
        self.layers: Set[str] = set()  # megatron-core layer classes imported
        self.layer_attrs: Set[str] = set()  # self.<attr> built from one
        self.boundaries: Set[str] = set()  # functions and Function classes with declared types
        self.probes: List[Probe] = []
        self._stmt: Optional[ast.stmt] = None

    # imports ---------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name == "spmd_types":
                self.spmd_types.add(a.asname or a.name)
            if a.name.startswith("megatron.core"):
                self.megatron.add(a.asname or a.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.module.startswith("megatron.core") or node.module == "megatron":
            for a in node.names:
                name = a.asname or a.name
                self.megatron.add(name)
                if a.name.endswith(("ParallelLinear", "ParallelEmbedding")):
                    self.layers.add(name)

    def _is_spmd(self, func: ast.AST, names: Tuple[str, ...]) -> bool:
        return isinstance(func, ast.Attribute) and _dotted(func.value) in self.spmd_types and func.attr in names

    # definitions -------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for d in node.decorator_list:
            if isinstance(d, ast.Call) and self._is_spmd(d.func, ("local_map", "no_typecheck")) and any(
                k.arg == "out_types" for k in d.keywords
            ):
                self.boundaries.add(node.name)
        self._body(node.body)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        names = {s.name for s in node.body if isinstance(s, ast.FunctionDef)}
        if names & {"typecheck_forward", "spmd_typecheck"}:
            self.boundaries.add(node.name)
        self._body(node.body, inside=node.name)

    def _body(self, body: List[ast.stmt], inside: Optional[str] = None) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
                if isinstance(stmt, ast.FunctionDef) and inside and stmt.name in ("typecheck_forward", "spmd_typecheck"):
                    continue  # the hook's own asserts and apply are its declaration
                self.visit(stmt)
                continue
            self._statement(stmt)
            for field_name in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(stmt, field_name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], (ast.stmt, ast.ExceptHandler)):
                    self._body([s for s in inner if isinstance(s, ast.stmt)], inside)

    def _statement(self, stmt: ast.stmt) -> None:
        indent = self.lines[stmt.lineno - 1][: stmt.col_offset]
        # an assert on a name: its type after the statement
        value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign, ast.Return)) else None
        if isinstance(value, ast.Call) and self._is_spmd(value.func, ("assert_type", "assert_type_like", "mutate_type")):
            if value.args and isinstance(value.args[0], ast.Name) and not isinstance(stmt, ast.Return):
                site = Site(KINDS[0], stmt.lineno, ast.get_source_segment(self.source, value) or "")
                self.probes.append(Probe(stmt.end_lineno + 1, indent, value.args[0].id, site))  # type: ignore[operator]
            return
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call):
            target = _dotted(stmt.targets[0])
            if target and target.startswith("self.") and _dotted(stmt.value.func) in self.layers:
                self.layer_attrs.add(target)
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.value, ast.Call):
            target = _dotted(stmt.target)
            if target and target.startswith("self.") and _dotted(stmt.value.func) in self.layers:
                self.layer_attrs.add(target)
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                kind = self._call_kind(node)
                if kind is not None:
                    text = ast.get_source_segment(self.source, node) or ""
                    self.probes.append(Probe(stmt.lineno, indent, text, Site(kind, node.lineno, text)))

    def _call_kind(self, call: ast.Call) -> Optional[str]:
        name = _dotted(call.func) or ""
        root = name.split(".")[0]
        if name in self.boundaries or (name.endswith(".apply") and name[: -len(".apply")] in self.boundaries):
            return KINDS[1]
        getter = "parallel_state" in name or name.endswith("_group")  # a group: typed where it is the axis
        if name in self.layer_attrs or (root in self.megatron and root not in self.layers and not getter):
            return KINDS[2]
        if name.endswith(("DTensor.from_local", "distribute_tensor")) or (
            isinstance(call.func, ast.Attribute) and call.func.attr == "to_local"
        ):
            return KINDS[3]
        return None


def find_sites(path: Path) -> FileSites:
    source = path.read_text()
    finder = _Finder(source)
    finder.visit(ast.parse(source))
    return FileSites(path, finder.probes)


def probed_source(fs: FileSites) -> Tuple[str, Dict[int, Site]]:
    """The file with its probes inserted, and new line -> site."""
    lines = fs.path.read_text().splitlines()
    by_line: Dict[int, List[Probe]] = {}
    for p in fs.probes:
        by_line.setdefault(p.before, []).append(p)
    out: List[str] = []
    where: Dict[int, Site] = {}
    for n in range(1, len(lines) + 2):
        for p in by_line.get(n, []):
            expr = " ".join(part.strip() for part in p.expr.splitlines())
            out.append(f"{p.indent}reveal_type({expr})")
            where[len(out)] = p.site
        if n <= len(lines):
            out.append(lines[n - 1])
    return "\n".join(out) + "\n", where


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def run() -> Tuple[Dict[str, List[Tuple[Site, bool, str]]], List[str]]:
    work = Path(tempfile.mkdtemp(prefix="bench_interop_"))
    try:
        cache = REPO / ".mypy_cache_interop_bench"
        (work / "mypy.ini").write_text(ini_text("with", cache))
        clean = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(work / "mypy.ini"),
                                "--no-error-summary", *map(str, CORPUS)], capture_output=True, text=True,
                               env=child_env(), cwd=REPO)
        errors = [line for line in clean.stdout.splitlines() if ": error:" in line]
        maps: Dict[str, Tuple[Path, Dict[int, Site]]] = {}
        for i, path in enumerate(CORPUS):
            fs = find_sites(path)
            text, where = probed_source(fs)
            folder = work / f"f{i}"
            folder.mkdir()
            copy = folder / path.name
            copy.write_text(text)
            if path.parent.name == "spmd_types_style":  # sibling imports (run_on_ranks does not matter here)
                for sib in path.parent.glob("*.py"):
                    if sib.name != path.name:
                        shutil.copy(sib, folder / sib.name)
            maps[str(copy)] = (path, where)
        got = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(work / "mypy.ini"),
                              "--no-error-summary", *maps], capture_output=True, text=True, env=child_env(), cwd=work)
        revealed: Dict[Tuple[str, int], str] = {}
        for line in got.stdout.splitlines():
            m = re.match(r"(.+?):(\d+): note: Revealed type is \"(.*)\"$", line)
            if m:
                revealed[(str((work / m.group(1)).resolve()), int(m.group(2)))] = m.group(3)
        results: Dict[str, List[Tuple[Site, bool, str]]] = {k: [] for k in KINDS}
        for copy, (path, where) in maps.items():
            for line, site in where.items():
                typ = revealed.get((str(Path(copy).resolve()), line), "(no reveal)")
                results[site.kind].append((Site(site.kind, site.line, f"{_shown(path)}:{site.line}: {site.text}"),
                                           bool(KNOWN.search(typ)), typ))
        return results, errors
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    results, errors = run()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"bench_interop: {len(CORPUS)} files, {stamp}, {git_state()}")
    print("| figure | value | target | verdict |")
    print("|---|---|---|---|")
    for kind in KINDS:
        found = results[kind]
        read = sum(1 for _, ok, _ in found if ok)
        verdict = "ok" if found and read == len(found) else "BELOW"
        print(f"| {kind} read/typed | {read}/{len(found)} | all | {verdict} |")
    print(f"| mypy errors on the corpus | {len(errors)} | 0 | {'ok' if not errors else 'ABOVE'} |")
    for kind in KINDS:
        for site, ok, typ in results[kind]:
            if not ok:
                print(f"  not typed: {site.text.splitlines()[0][:120]} -> {typ}")
    for e in errors:
        print("  error:", e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
