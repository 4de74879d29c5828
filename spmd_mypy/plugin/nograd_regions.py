"""The no-grad index: where a file's code runs with autograd off.

Code there records no gradient, so a raw torch.distributed collective on a
typed tensor is outside autograd by construction, as the code means it to be
(raw_collectives.py).  A region is

  - the body of `with torch.no_grad():`, `with torch.inference_mode():` or
    `with torch.set_grad_enabled(False):` (any item of the with);
  - a function decorated `@torch.no_grad()` / `@torch.inference_mode()`
    (with or without the call);
  - the `forward`, `backward`, `setup_context` and `jvp` methods of a class
    whose base is named `Function` (`torch.autograd.Function`): autograd runs
    them with gradients off; the Function's own backward is the gradient.

Found by the callee's or base's last name from the file's source with stdlib
ast (as global_scopes.py finds @global_spmd), cached by the file's version.
Pure Python."""

from __future__ import annotations

import ast
from typing import Optional, Tuple

from .sourcefile import FileIndex, callee_last_name, statements

Region = Tuple[int, int, str]  # (first line, last line, NO_GRAD or FUNCTION)

NO_GRAD = "no_grad"  # a with block or a decorated function
FUNCTION = "function"  # a method autograd runs for a Function

_CONTEXTS = frozenset({"no_grad", "inference_mode"})
_FUNCTION_METHODS = frozenset({"forward", "backward", "setup_context", "jvp", "vjp"})
_MARKERS = (b"no_grad", b"inference_mode", b"set_grad_enabled", b"Function")


def _grad_off(item: ast.expr) -> bool:
    """A context manager or decorator that turns gradients off."""
    name = callee_last_name(item)
    if name in _CONTEXTS:
        return True
    if name == "set_grad_enabled" and isinstance(item, ast.Call) and item.args:
        first = item.args[0]
        return isinstance(first, ast.Constant) and first.value is False
    return False


def _span(node: ast.AST, kind: str) -> Region:
    first = getattr(node, "lineno", 0)
    for dec in getattr(node, "decorator_list", ()):
        first = min(first, dec.lineno)
    return first, getattr(node, "end_lineno", None) or first, kind


def collect_regions(tree: ast.AST) -> Tuple[Region, ...]:
    out = []
    for node in statements(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            if any(_grad_off(item.context_expr) for item in node.items) and node.body:
                out.append((node.body[0].lineno, node.end_lineno or node.lineno, NO_GRAD))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_grad_off(dec) for dec in node.decorator_list):
                out.append(_span(node, NO_GRAD))
        elif isinstance(node, ast.ClassDef) and any(callee_last_name(b) == "Function" for b in node.bases):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in _FUNCTION_METHODS:
                    out.append(_span(item, FUNCTION))
    return tuple(out)


def grad_off_at(path: Optional[str], line: int, owner: object = None) -> Optional[str]:
    """Whether the code at `line` of the file runs with gradients off: FUNCTION
    (in an autograd Function's forward or backward), NO_GRAD, or None."""
    kinds = {kind for first, last, kind in regions_for(path, owner) if first <= line <= last}
    return FUNCTION if FUNCTION in kinds else NO_GRAD if kinds else None


_REGIONS: FileIndex[Tuple[Region, ...]] = FileIndex(
    lambda data: any(m in data for m in _MARKERS), lambda tree: collect_regions(tree), ()
)


def regions_for(path: Optional[str], owner: object = None) -> Tuple[Region, ...]:
    return _REGIONS.of(path, owner)
