"""The codemod proper: rewrite recognised helper calls of one module into typed calls.

    result = migrate_source(code, axis="tp", path="model.py")
    result.code        # the new source (== code when nothing applies)
    result.notes       # what was not converted, each with its line and reason

One libcst pass (QualifiedNameProvider finds helpers under any alias or
attribute path; ScopeProvider gives a parameter's uses for the boundary
rule, boundary.py), then libcst's import visitors add the spmd_mypy names
used and remove helper imports left unused.  Formatting and comments outside
a rewritten call are kept; a call with a comment inside its dropped
arguments is reported instead of rewritten.  Rewritten code holds no helper
call, so a second run changes nothing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import (
    MetadataWrapper,
    PositionProvider,
    QualifiedName,
    QualifiedNameProvider,
    QualifiedNameSource,
    ScopeProvider,
)

from . import boundary
from .calls import Typed, TypeText, build, typed_call
from .table import STYLES, by_qualified_name, unconverted_by_qualified_name

FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
TYPE_NAMES = ("I", "R", "P", "S", "V")
HELPERS = by_qualified_name()
UNCONVERTED = unconverted_by_qualified_name()
STYLE_MODULES = frozenset(m for s in STYLES for m in s.modules)


def _last_name(qualified: str) -> str:
    parts = qualified.split(".")
    return parts[-2] if parts[-1] == "apply" else parts[-1]


# A helper is found by its qualified name, and whatever alias or attribute
# path a module uses, the helper's own name is written in it (in the call, or
# in the import that renames it): a file holding none of these words, and no
# `.apply` of its own autograd Function, has nothing to convert or report.
_WORDS = re.compile("|".join(sorted({re.escape(_last_name(q)) for q in (*HELPERS, *UNCONVERTED)})))


def might_change(code: str) -> bool:
    """Whether the codemod has anything to do in `code` (else: no parse)."""
    return _WORDS.search(code) is not None or (".apply" in code and "Function" in code)


@dataclass(frozen=True)
class Note:
    """Something the codemod left alone: where and why."""

    path: str
    line: int
    what: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}: not converted: {self.why}"


@dataclass
class Result:
    code: str
    converted: int = 0
    annotated: int = 0
    notes: List[Note] = field(default_factory=list)


@dataclass(frozen=True)
class Names:
    """How the rewritten code spells spmd_mypy, its types, Spmd and Annotated."""

    module: str  # the alias of `import spmd_mypy as <alias>`
    add_module: bool
    bare: Tuple[str, ...]  # type names written bare (imported from spmd_mypy)
    annotated: Optional[str]  # None: no boundary annotations in this file


def _names(module: cst.Module) -> Names:
    used: Set[str] = set()
    imported: Dict[str, str] = {}  # local name -> "module.name" for from-imports, "module" for imports

    class _Collect(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            used.add(node.value)

        def visit_Import(self, node: cst.Import) -> None:
            for a in node.names:
                full = cst.helpers.get_full_name_for_node(a.name) or ""
                local = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else full
                imported[local] = full

        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            mod = cst.helpers.get_full_name_for_node(node.module) if node.module and not node.relative else None
            if mod and not isinstance(node.names, cst.ImportStar):
                for a in node.names:
                    name = cst.helpers.get_full_name_for_node(a.name) or ""
                    local = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else name
                    imported[local] = f"{mod}.{name}"

    module.visit(_Collect())
    alias = next((k for k, v in imported.items() if v == "spmd_mypy"), None)
    add = alias is None
    if alias is None:
        alias = "spmd" if "spmd" not in used else "spmd_mypy"
    bare = tuple(
        n for n in (*TYPE_NAMES, "Spmd") if imported.get(n) == f"spmd_mypy.{n}" or (n not in used)
    )
    annotated: Optional[str] = "Annotated"
    if "Annotated" in used and imported.get("Annotated") not in ("typing.Annotated", "typing_extensions.Annotated"):
        annotated = None
    return Names(alias, add, bare, annotated)


def _short(qualified: str) -> str:
    """A helper's name as the report shows it: `name`, or `Class.apply`."""
    parts = qualified.split(".")
    return ".".join(parts[-2:]) if parts[-1] == "apply" else parts[-1]


def _first(
    names: Set[QualifiedName], table: Dict[str, object], own: Optional[str] = None, package: Sequence[str] = ()
) -> Optional[str]:
    """The first of `names` in `table`: an imported name (a relative import,
    `from .mappings import ...`, resolved against `package`, the directories
    holding the file), or, in the module `own` of a style (picotron's
    tp_communications applying its own Functions), a name defined there."""
    for q in sorted(names, key=lambda q: q.name):
        if q.source == QualifiedNameSource.IMPORT and q.name in table:
            return q.name
        if q.source == QualifiedNameSource.IMPORT and q.name.startswith("."):
            found = _relative(q.name, package, table)
            if found is not None:
                return found
        if own is not None and q.source == QualifiedNameSource.LOCAL and f"{own}.{q.name}" in table:
            return f"{own}.{q.name}"
    return None


def _relative(name: str, package: Sequence[str], table: Dict[str, object]) -> Optional[str]:
    """The key of `table` a relative name (`..mpu.mappings.f`) stands for in a
    file under the directories `package`: the key's module, less the name's
    tail, must be those directories' last components (one fewer per dot
    past the first)."""
    level = len(name) - len(name.lstrip("."))
    tail = name[level:]
    base = list(package[: len(package) - (level - 1)]) if level > 1 else list(package)
    for key in table:
        if key.endswith("." + tail):
            prefix = key[: -len(tail) - 1].split(".")
            if base[-len(prefix):] == prefix:
                return key
    return None


_STYLE_MODULES = tuple(m for style in STYLES for m in style.modules)


def own_module(path: str) -> Optional[str]:
    """The style module (`picotron.tensor_parallel.tp_communications`) that
    `path` is, judged by its last components, else None."""
    parts = os.path.normpath(path).replace(os.sep, "/").removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    for module in _STYLE_MODULES:
        dotted = module.split(".")
        if parts[-len(dotted):] == dotted:
            return module
    return None


class _Migrate(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (QualifiedNameProvider, ScopeProvider, PositionProvider)

    def __init__(self, module: cst.Module, path: str, axis: str, names: Names) -> None:
        super().__init__()
        self.module, self.path, self.axis, self.names = module, path, axis, names
        self.type_text = TypeText(names.module, names.bare)
        self.result = Result(module.code)
        self.func_ids: Set[int] = set()
        self.tensor_args: Dict[int, boundary.Fixed] = {}
        self.results: Dict[int, boundary.Fixed] = {}
        self.local_functions: Set[str] = set()
        self.types_used: Set[str] = set()
        self.own = own_module(path)
        self.package = os.path.abspath(path).replace(os.sep, "/").split("/")[:-1]  # for relative imports
        self.def_names: Set[int] = set()
        self.in_function_class = 0  # inside an autograd Function of this module
        self.in_helper = 0  # inside a helper's own definition (this module's)
        self.in_known = 0  # inside the definition of a helper or of one the table leaves alone

    # -- helpers ---------------------------------------------------------------------
    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def _qnames(self, node: cst.CSTNode) -> Set[QualifiedName]:
        return set(self.get_metadata(QualifiedNameProvider, node, set()))

    def _note(self, node: cst.CSTNode, what: str, why: str) -> None:
        self.result.notes.append(Note(self.path, self._line(node), what, why))

    def _is_tensor(self, annotation: Optional[cst.Annotation]) -> bool:
        if annotation is None:
            return False
        return any(q.name in boundary.TENSOR_NAMES for q in self._qnames(annotation.annotation))

    # -- visits ----------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        for stmt in node.body:
            if isinstance(stmt, cst.ClassDef):
                bases = set().union(*(self._qnames(b.value) for b in stmt.bases)) if stmt.bases else set()
                if any(q.name in FUNCTION_BASES for q in bases):
                    self.local_functions.add(stmt.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.def_names.add(id(node.name))  # a helper's own definition, in its module
        self.in_helper += self._is_helper(node.name.value)
        self.in_known += self._is_known(node.name.value)

    def _is_helper(self, name: str) -> bool:
        return self.own is not None and f"{self.own}.{name}" in HELPERS

    def _is_known(self, name: str) -> bool:
        return self._is_helper(name) or self.own is not None and f"{self.own}.{name}" in UNCONVERTED

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.def_names.add(id(node.name))
        self.in_function_class += node.name.value in self.local_functions

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.in_function_class -= original.name.value in self.local_functions
        return updated

    def _own(self) -> Optional[str]:
        """The style module this file is, outside its autograd Functions (whose
        backward applies the others) and its helpers' definitions: the
        helpers' own implementation is left as it is."""
        return self.own if not self.in_function_class and not self.in_helper else None

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        self.func_ids.add(id(node.func))

    def visit_Name(self, node: cst.Name) -> None:
        self._referenced(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._referenced(node)

    def _referenced(self, node: cst.CSTNode) -> None:
        if id(node) in self.func_ids:
            return
        name = _first(self._qnames(node), HELPERS, self._own(), self.package)  # type: ignore[arg-type]
        if name is not None and id(node) not in self.def_names:
            self._note(node, _short(name), "referenced, not called: convert its calls by hand")

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        qnames = self._qnames(original.func)
        name = _first(qnames, HELPERS, self._own(), self.package)  # type: ignore[arg-type]
        if name is None:
            self._unknown(original, qnames)
            return updated
        short = _short(name)
        helper = HELPERS[name][1]
        typed = typed_call(helper, original, self.axis, self.module.code_for_node)
        if isinstance(typed, str):
            self._note(original, short, typed)
            return updated
        without_tensor = original.deep_replace(typed.tensor, cst.Name("_"))
        if "#" in self.module.code_for_node(without_tensor):
            self._note(original, short, "a comment inside its arguments would be lost: move it out of the call")
            return updated
        new = typed_call(helper, updated, self.axis, self.module.code_for_node)
        assert isinstance(new, Typed)
        self.types_used.update(t.split("(", 1)[0] for t in (typed.src, typed.dst))
        if typed.axis_name is not None:
            self.results[id(original)] = (typed.axis_name, typed.dst)
            if isinstance(typed.tensor, cst.Name):
                self.tensor_args[id(typed.tensor)] = (typed.axis_name, typed.src)
        self.result.converted += 1
        return build(new, self.names.module, self.type_text)

    def _unknown(self, call: cst.Call, qnames: Set[QualifiedName]) -> None:
        if self.own is not None and (self.in_known or self.in_function_class):
            return  # the helpers' own implementation: its private Functions are no user's calls
        reason = _first(qnames, UNCONVERTED, self._own(), self.package)  # type: ignore[arg-type]
        if reason is not None:
            self._note(call, _short(reason), UNCONVERTED[reason])
            return
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "apply"
            and isinstance(func.value, cst.Name)
            and func.value.value in self.local_functions
        ):
            self._note(
                call,
                f"{func.value.value}.apply",
                "an autograd Function this codemod does not know: its result is untyped; "
                "replace it with the typed call it equals, or annotate the function that calls it",
            )

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.in_helper -= self._is_helper(original.name.value)
        self.in_known -= self._is_known(original.name.value)
        if self.names.annotated is None:
            return updated
        scanned = boundary.scan(original.body)
        if scanned.nested:
            return updated
        scope = self.get_metadata(ScopeProvider, original.body.body[0], None) if original.body.body else None
        params = updated.params
        if scope is not None:
            params = params.with_changes(
                params=[self._param(o, u, scope) for o, u in zip(original.params.params, params.params)],
                kwonly_params=[
                    self._param(o, u, scope) for o, u in zip(original.params.kwonly_params, params.kwonly_params)
                ],
            )
        returns = updated.returns
        if self._is_tensor(original.returns) and returns is not None:
            fixed = boundary.return_type(scanned.returns, self.results)
            if fixed is not None:
                returns = self._annotate(returns, fixed)
        return updated.with_changes(params=params, returns=returns)

    def _param(self, original: cst.Param, updated: cst.Param, scope: object) -> cst.Param:
        if not self._is_tensor(original.annotation) or updated.annotation is None:
            return updated
        name = original.name.value
        accesses = [a.node for a in scope.accesses[name]]  # type: ignore[attr-defined]
        assignments = len(scope.assignments[name])  # type: ignore[attr-defined]
        fixed = boundary.param_type(accesses, assignments, self.tensor_args)
        return updated if fixed is None else updated.with_changes(annotation=self._annotate(updated.annotation, fixed))

    def _annotate(self, annotation: cst.Annotation, fixed: boundary.Fixed) -> cst.Annotation:
        assert self.names.annotated is not None
        self.result.annotated += 1
        self.types_used.add(fixed[1].split("(", 1)[0])
        spmd_name = "Spmd" if "Spmd" in self.names.bare else f"{self.names.module}.Spmd"
        return annotation.with_changes(
            annotation=boundary.annotated(
                annotation.annotation, fixed, self.names.annotated, spmd_name, self.type_text
            )
        )


def _style_imports(module: cst.Module) -> List[Tuple[str, Optional[str], Optional[str]]]:
    """(module, name, asname) of every import of a style module or of a helper's name."""
    found: List[Tuple[str, Optional[str], Optional[str]]] = []
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for a in small.names:
                    full = cst.helpers.get_full_name_for_node(a.name) or ""
                    alias = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None
                    if full in STYLE_MODULES:
                        found.append((full, None, alias))
            elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
                mod = cst.helpers.get_full_name_for_node(small.module) or ""
                if isinstance(small.names, cst.ImportStar):
                    continue
                for a in small.names:
                    name = cst.helpers.get_full_name_for_node(a.name) or ""
                    alias = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None
                    full = f"{mod}.{name}"
                    if full in STYLE_MODULES or full in HELPERS or f"{full}.apply" in HELPERS:
                        found.append((mod, name, alias))
    return found


def _fix_imports(tree: cst.Module, original: cst.Module, names: Names, migrate: _Migrate) -> cst.Module:
    ctx = CodemodContext()
    if names.add_module:
        AddImportsVisitor.add_needed_import(ctx, "spmd_mypy", asname=None if names.module == "spmd_mypy" else names.module)
    needed = set(migrate.types_used)
    if migrate.result.annotated:
        needed.add("Spmd")
        if names.annotated == "Annotated":
            AddImportsVisitor.add_needed_import(ctx, "typing", "Annotated")
    for name in sorted(needed & set(names.bare)):
        AddImportsVisitor.add_needed_import(ctx, "spmd_mypy", name)
    for mod, obj, alias in _style_imports(original):
        RemoveImportsVisitor.remove_unused_import(ctx, mod, obj, alias)
    tree = _RemoveImports(ctx).transform_module(tree)
    return AddImportsVisitor(ctx).transform_module(tree)


Block = Union[cst.Module, cst.IndentedBlock]


class _RemoveImports(RemoveImportsVisitor):
    """libcst's visitor, keeping the layout around what it removes: a
    parenthesized import that loses its last names keeps its trailing comma
    (so `)` stays on its own line), and the blank lines and comments before
    a removed import line move to the statement after it."""

    def __init__(self, context: CodemodContext) -> None:
        super().__init__(context)
        self._removed: Dict[int, Sequence[cst.EmptyLine]] = {}  # id(original line) -> its leading lines

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> Union[cst.ImportFrom, cst.RemovalSentinel]:
        new = super().leave_ImportFrom(original_node, updated_node)
        if not isinstance(new, cst.ImportFrom) or new.rpar is None or isinstance(new.names, cst.ImportStar):
            return new
        assert not isinstance(original_node.names, cst.ImportStar)
        last, was_last = new.names[-1], original_node.names[-1]
        if isinstance(was_last.comma, cst.Comma) and not isinstance(last.comma, cst.Comma):
            new = new.with_changes(names=[*new.names[:-1], last.with_changes(comma=was_last.comma)])
        return new

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        if not updated_node.body and original_node.body:  # emptied: libcst drops the line
            self._removed[id(original_node)] = original_node.leading_lines
        return updated_node

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return self._carry(original_node, super().leave_Module(original_node, updated_node))

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return self._carry(original_node, updated_node)

    def _carry(self, original: Block, updated: Block) -> Block:
        """updated's statements, each given the leading lines of the removed lines before it."""
        if not any(id(stmt) in self._removed for stmt in original.body):
            return updated
        body, carried = list(updated.body), []  # type: ignore[var-annotated]
        kept = iter(range(len(body)))  # updated.body holds the statements not removed, in order
        for stmt in original.body:
            if id(stmt) in self._removed:
                carried += self._removed[id(stmt)]
                continue
            i = next(kept)
            if carried:
                own = list(body[i].leading_lines)  # type: ignore[union-attr]
                if own and _blank(own[0]) and _blank(carried[-1]):
                    carried = carried[:-1]  # one blank line where the two meet
                body[i] = body[i].with_changes(leading_lines=[*carried, *own])
                carried = []
        return updated.with_changes(body=body)


def _blank(line: cst.EmptyLine) -> bool:
    return line.comment is None


def migrate_source(code: str, axis: str = "tp", path: str = "<string>") -> Result:
    """Rewrite one module's helper calls; see the module docstring."""
    if not might_change(code):
        return Result(code)
    try:
        original = cst.parse_module(code)
    except cst.ParserSyntaxError as e:
        result = Result(code)
        at = re.search(r"error at (\d+):", e.message)  # libcst's own line (raw_line is where it stopped)
        line = int(at.group(1)) if at else e.raw_line
        result.notes.append(Note(path, line, "module", f"libcst cannot parse it, nothing converted ({e.message})"))
        return result
    names = _names(original)
    migrate = _Migrate(original, path, axis, names)
    tree = MetadataWrapper(original, unsafe_skip_copy=True).visit(migrate)
    result = migrate.result
    if result.converted or result.annotated:
        tree = _fix_imports(tree, original, names, migrate)
        result.code = tree.code
    result.notes.sort(key=lambda n: n.line)
    return result
