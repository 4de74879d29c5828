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
again when a value changes."""

from __future__ import annotations

import ast
import hashlib
from typing import Any, Callable, Dict, Optional, Tuple

from . import _mypy
from .annotations import AnnotationError
from .callsite import spmd_expr_ast
from .sourcefile import FileIndex

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


def _module_values(tree: ast.AST) -> Dict[str, ast.expr]:
    """The values of a module's top-level single-name assignments."""
    values: Dict[str, ast.expr] = {}
    for stmt in tree.body if isinstance(tree, ast.Module) else ():
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            values[stmt.target.id] = stmt.value
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            values[stmt.targets[0].id] = stmt.value
    return values


# A module's top-level values, per file version (a Final spec is written at the top level).
_VALUES: FileIndex[Dict[str, ast.expr]] = FileIndex(lambda data: True, _module_values, {})


def _final_specs(tree: ast.AST) -> Optional[str]:
    """A digest of the module's top-level `NAME: Final = <value naming Spmd>`
    statements (None when it has none)."""
    found = []
    for stmt in tree.body if isinstance(tree, ast.Module) else ():
        if isinstance(stmt, ast.AnnAssign) and stmt.value is not None and "Final" in ast.dump(stmt.annotation):
            value = ast.dump(stmt.value)
            if "Spmd" in value:
                found.append(f"{ast.dump(stmt.target)}={value}")
    return hashlib.sha1("\n".join(found).encode()).hexdigest()[:16] if found else None


# The digest of a module's Final specs, per file version (only files whose
# bytes name both Final and Spmd are parsed).
_DIGESTS: FileIndex[Optional[str]] = FileIndex(
    lambda data: data.find(b"Final") >= 0 and data.find(b"Spmd") >= 0, _final_specs, None
)


def final_specs_digest(path: Optional[str]) -> Optional[str]:
    """A digest of the Final specs the module at `path` defines, from its
    source as it is now (None: it defines none)."""
    return _DIGESTS.compute(path)


def _from_source(path: Optional[str], name: str) -> Optional[ast.expr]:
    return _VALUES.of(path).get(name)
