"""An `Spmd(...)` passed as an argument and read statically (spmd.assert_spmd):
written in the call, or a module-level `Final` name (`SPEC: Final =
Spmd(...)`, in this module or imported).  Anything else is an error: a spec
held in an ordinary variable could change, so the checker cannot read it.

A Final spec's value is no part of its module's interface in mypy's cache
(its type is `Spmd` whatever the value): an edit of the value alone would
leave the modules importing it fresh, with the verdict of the old value.
`final_specs_digest` is a digest of a module's Final specs, which the
plugin's report_config_data adds to what it reports for the module; mypy
hashes that into the module's interface, so the importers are checked
again when a value changes.

The same file reading gives a module-level alias of a str enum's member its
value as an axis (`DP = MeshAxisName.DP`, torchtitan's sharding modules):
mypy types `DP` as MeshAxisName without the member, so the member is read
from the alias's statement in the source (`enum_alias_value`), trusted only
when the module binds the name once, at its top level, and never declares
it `global`; the digest covers such statements too."""

from __future__ import annotations

import ast
import hashlib
import re
from typing import Any, Callable, Dict, FrozenSet, List, NamedTuple, Optional, Set, Tuple

from . import _mypy
from .annotations import AnnotationError
from .callsite import spmd_expr_ast
from .answers import depends_on_site
from .sourcefile import FileIndex, dotted as dotted_name, statements, file_version, installed_package, read_source, source_file

Resolve = Callable[[str], Optional[str]]


def spec_argument(api: Any, expr: _mypy.Expression) -> Tuple[ast.expr, Resolve]:
    """The argument as stdlib ast and how its dotted names resolve
    (AnnotationError when it cannot be read statically)."""
    found = _mypy.final_name(expr)
    if found is None:
        if _mypy.call_parts(expr) is None:
            raise AnnotationError(
                f"{_mypy.expr_text(expr)!r} is not read statically: write Spmd(...) in the call, "
                f"or name a module-level Final spec ({_mypy.expr_text(expr)}: Final = Spmd(...))",
                0,
            )
        names: Dict[str, str] = {}
        return spmd_expr_ast(expr, names), names.get
    module, name = found
    value = _mypy.module_value(api, module, name)
    if value is not None:  # this module, or one whose statements mypy still holds
        names = {}
        return spmd_expr_ast(value, names), names.get
    node = _from_source(_mypy.module_file(api, module), name)
    if node is None:
        raise AnnotationError(f"cannot read the Final spec {module}.{name} from its source", 0)
    return node, lambda dotted: _mypy.resolve_in_module(api, module, dotted)


class _TopLevel(NamedTuple):
    """What a module's source says at its top level, from one parse."""

    values: Dict[str, ast.expr]  # each single-name assignment's value (the last)
    aliases: Dict[str, ast.Attribute]  # `NAME = a.b` bound once, declared global nowhere
    finals: FrozenSet[str]  # the names annotated Final (`NAME: Final = ...`)


def _top_level(tree: ast.AST) -> _TopLevel:
    values: Dict[str, ast.expr] = {}
    assigned: Dict[str, ast.expr] = {}
    bound: Dict[str, int] = {}
    finals: Set[str] = set()
    body = tree.body if isinstance(tree, ast.Module) else []
    for stmt in body:
        for target in _bound_names(stmt):
            bound[target] = bound.get(target, 0) + 1
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            assigned[stmt.targets[0].id] = stmt.value
    _assignments(body, "", values, finals)
    declared_global = {n for node in statements(tree) if isinstance(node, ast.Global) for n in node.names}
    aliases = {
        n: v for n, v in assigned.items()
        if isinstance(v, ast.Attribute) and bound.get(n) == 1 and n not in declared_global
    }
    return _TopLevel(values, aliases, frozenset(finals))


def _assignments(body: List[ast.stmt], prefix: str, values: Dict[str, ast.expr], finals: Set[str]) -> None:
    """Each single-name assignment's value in `body` (the last), under its
    qualified name (`Layout.COLUMN` in `class Layout:`, classes nested in
    classes too); the names annotated Final into `finals`."""
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            _assignments(stmt.body, f"{prefix}{stmt.name}.", values, finals)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            values[prefix + stmt.target.id] = stmt.value
            if "Final" in ast.dump(stmt.annotation):
                finals.add(prefix + stmt.target.id)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            values[prefix + stmt.targets[0].id] = stmt.value


# A module's top-level statements, per file version (a Final spec and an
# alias of a member are written at the top level).
_TOP_LEVEL: FileIndex[_TopLevel] = FileIndex(lambda data: True, _top_level, _TopLevel({}, {}, frozenset()))


def _final_specs(tree: ast.AST) -> List[str]:
    """The module's `NAME: Final = <value naming Spmd>` statements, at its
    top level and in its classes' bodies, dumped with their qualified names."""
    values: Dict[str, ast.expr] = {}
    finals: Set[str] = set()
    _assignments(tree.body if isinstance(tree, ast.Module) else [], "", values, finals)
    dumped = ((name, ast.dump(values[name])) for name in sorted(finals))
    return [f"{name}={value}" for name, value in dumped if "Spmd" in value]


# `NAME = a.b.MEMBER` at the top level of a module: an alias's statement
# (after a newline: a literal start lets the scan skip to newlines, several
# times faster than `^` in multiline mode).
_ALIAS_LINE = re.compile(rb"\n([A-Za-z_]\w*[ \t]*=[ \t]*[A-Za-z_][\w.]*\.[A-Za-z_]\w*)[ \t]*(?:#[^\n]*)?(?=\r?\n|$)")

# path -> (file version, digest)
_DIGESTS: Dict[str, Tuple[Tuple[int, int], Optional[str]]] = {}


def final_specs_digest(path: Optional[str]) -> Optional[str]:
    """A digest of the Final specs and member aliases the module at `path`
    defines, from its source as it is now (None: it defines none).  The
    source is parsed only when its bytes name both Final and Spmd."""
    if not source_file(path):
        return None
    assert path is not None
    key = file_version(path)
    if key is None:
        return None
    hit = _DIGESTS.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    data = read_source(path)
    found = [line.decode("utf-8", "replace") for line in _ALIAS_LINE.findall(b"\n" + data)]
    if data.find(b"Final") >= 0 and data.find(b"Spmd") >= 0:
        try:
            found += _final_specs(ast.parse(data))
        except (SyntaxError, ValueError):
            found.append("unparsed")  # mypy reports the file; its next version parses again
    digest = hashlib.sha1("\n".join(found).encode()).hexdigest()[:16] if found else None
    _DIGESTS[path] = (key, digest)
    return digest


def _bound_names(stmt: ast.stmt) -> List[str]:
    """The names a module-level statement binds in the module's scope: its
    targets and imports, a def's or class's name (not what their bodies
    bind), and what the blocks of an if/for/while/try/with bind."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    names: List[str] = []
    blocks = [getattr(stmt, field, None) or [] for field in ("body", "orelse", "finalbody")]
    blocks += [h.body for h in getattr(stmt, "handlers", None) or []]
    blocks += [c.body for c in getattr(stmt, "cases", None) or []]
    for block in blocks:
        for inner in block:
            names += _bound_names(inner)
    heads = [n for n in ast.iter_child_nodes(stmt) if not isinstance(n, (ast.stmt, ast.excepthandler))]
    for node in (n for head in heads for n in ast.walk(head)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)  # a target, a for's or with's name, a walrus
    return names


def enum_alias_value(api: Any, expr: _mypy.Expression) -> Optional[str]:
    """The axis a module-level alias of a str enum's member names (see the
    module's docstring), else None."""
    found = _mypy.enum_alias(expr)
    if found is None:
        return None
    module, name, info = found
    value = _TOP_LEVEL.compute(_mypy.module_file(api, module)).aliases.get(name)
    if not isinstance(value, ast.Attribute):
        return None
    target = _mypy.resolve_in_module(api, module, ast.unparse(value.value))
    if target != info.fullname:
        return None  # the statement names another class than mypy's type says
    depends_on_site()  # read from a module's source, which no call key holds
    return _mypy.enum_member_value(info, value.attr)


def _from_source(path: Optional[str], name: str) -> Optional[ast.expr]:
    return _TOP_LEVEL.of(path).values.get(name)


def named_spec(api: Any, fullname: str) -> Optional[Tuple[ast.expr, Resolve]]:
    """For annotation metadata written as a name (`Annotated[Tensor, SPEC]`)
    that stands for the module-level variable `fullname` bound to
    `Spmd(...)`: that call, and how the names in it resolve in its module,
    when the variable is Final; AnnotationError when it is not (its value
    could change).  None when the name is bound to anything else: metadata
    of another library."""
    module, name = _mypy.owning_module(api, fullname) or ("", fullname)
    path = _mypy.module_file(api, module) if module else None
    # not torch's, ours or an installed package's module (none defines specs)
    top = _TOP_LEVEL.of(path) if source_file(path) and not installed_package(path) else None
    value = top.values.get(name) if top is not None else None
    if not isinstance(value, ast.Call) or (dotted_name(value.func) or "").rpartition(".")[2] != "Spmd":
        return None
    if name not in top.finals:  # type: ignore[union-attr]
        raise AnnotationError(
            f"{name!r} is not read statically: write Spmd(...) in the annotation, "
            f"or make it a {'class' if '.' in name else 'module'}-level Final spec "
            f"({name.rpartition('.')[2]}: Final = Spmd(...))",
            0,
        )
    return value, lambda written: _mypy.resolve_in_module(api, module, written)
