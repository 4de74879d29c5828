"""The global-scope index: where a file's code is global (@global_spmd
functions) and where it is local again (functions handed to local_map).

Read from the file's source with stdlib ast, cached by the file's version, as
the annotation index is (sourcefile.py); global_mode asks global_axes_at per
hook.  Pure Python."""

from __future__ import annotations

import ast
from typing import Dict, Optional, Tuple

from .annotations import look
from .sourcefile import FileIndex, callee_last_name

# One scope: (first line, last line, axes or None).  axes None marks a function
# handed to local_map (local code again); a tuple marks @global_spmd code, the
# empty tuple meaning every mesh axis.
Scope = Tuple[int, int, Optional[Tuple[str, ...]]]


def _axes_literal(call: ast.expr) -> Tuple[str, ...]:
    """axes=... of @global_spmd(axes=...): a name or a tuple of names (else every axis)."""
    if not isinstance(call, ast.Call):
        return ()
    for kw in call.keywords:
        if kw.arg == "axes":
            v = kw.value
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                return (v.value,)
            if isinstance(v, (ast.Tuple, ast.List)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in v.elts
            ):
                return tuple(e.value for e in v.elts)  # type: ignore[attr-defined]
    return ()


def _collect_scopes(tree: ast.AST) -> Tuple[Scope, ...]:
    defs: Dict[str, list] = {}  # function name -> its (first, last) lines
    mapped: set = set()  # names passed to local_map(fn, ...)
    out: list = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            span = (first, node.end_lineno or node.lineno)
            defs.setdefault(node.name, []).append(span)
            for dec in node.decorator_list:
                name = callee_last_name(dec)
                if name == "global_spmd":
                    out.append((span[0], span[1], _axes_literal(dec)))
                elif name == "local_map":
                    out.append((span[0], span[1], None))
        elif isinstance(node, ast.Call) and callee_last_name(node.func) == "local_map":
            if node.args and isinstance(node.args[0], ast.Name):
                mapped.add(node.args[0].id)
    for name in mapped:
        for first, last in defs.get(name, ()):
            out.append((first, last, None))
    return tuple(out)


def global_axes_at(path: Optional[str], line: int, owner: object = None) -> Optional[Tuple[str, ...]]:
    """The global axes of the code at `line` (() = every axis), None in local code.

    The innermost enclosing scope decides: a function handed to local_map is
    local even when it is nested in a global one."""
    best: Optional[Scope] = None
    for scope in scopes_for(path, owner):
        first, last, _ = scope
        if first <= line <= last and (best is None or first >= best[0] and last <= best[1]):
            best = scope
    return None if best is None else best[2]


_SCOPES: FileIndex[Tuple[Scope, ...]] = FileIndex(
    lambda data: b"global_spmd" in data, lambda tree: _collect_scopes(tree), ()
)


def scopes_for(path: Optional[str], owner: object = None) -> Tuple[Scope, ...]:
    """The global and local_map scopes of a file (cached by mtime and size);
    a file whose bytes never name global_spmd (the look every hook's file
    gets, annotations.FileFacts) is not read again."""
    if not look(path, owner).global_code:
        return ()
    return _SCOPES.of(path, owner)
