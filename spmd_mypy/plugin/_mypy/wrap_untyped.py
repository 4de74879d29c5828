"""Rewrite pass: calls torch leaves untyped.

torch.special, torch.linalg and torch.fft are Any to mypy (torch assigns their
functions from an untyped extension module), so their calls run no hook.  In a
file that uses spmd, each call whose callee names one of them -- judged from
the file's imports, before names are bound -- becomes `<UNTYPED>(call)`,
in place.  The stub function is the identity; its hook (untyped.py) reads the
real callee's fullname and types the call, or keeps its type.

Entry point: wrap_untyped_calls.  Idempotent: a call inside a wrapper, and the
wrapper itself, are never wrapped again."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from mypy.nodes import CallExpr, Import, ImportFrom, MypyFile
from mypy.server.subexpr import get_subexpressions

from .tree import UNTYPED, dotted_name, is_untyped_wrapper, wrap_in_phantom


_TORCH = "torch"


def _torch_bindings(tree: MypyFile) -> Dict[str, str]:
    """Names the file's imports bind to torch and its submodules and functions
    -> the dotted path each stands for (`import torch.special as S`: S -> torch.special)."""
    out: Dict[str, str] = {}
    for imp in tree.imports:
        if isinstance(imp, Import):
            for module, alias in imp.ids:
                if module == _TORCH or module.startswith(_TORCH + "."):
                    if alias:
                        out[alias] = module
                    else:
                        out[_TORCH] = _TORCH
        elif isinstance(imp, ImportFrom) and imp.relative == 0:
            if imp.id == _TORCH or imp.id.startswith(_TORCH + "."):
                for name, alias in imp.names:
                    out[alias or name] = f"{imp.id}.{name}"
    return out


def wrap_untyped_calls(tree: MypyFile, node: Any, wanted: Callable[[str], Optional[str]]) -> None:
    """Wrap the calls in `node` whose callee's dotted path `wanted` maps to a name
    (idempotent: the call inside a wrapper is never wrapped again)."""
    bindings = _torch_bindings(tree)
    if not bindings:
        return
    exprs = [e for e in get_subexpressions(node) if isinstance(e, CallExpr)]
    inside = {id(e.args[0]) for e in exprs if is_untyped_wrapper(e) and e.args}
    for call in exprs:
        if id(call) in inside or is_untyped_wrapper(call):
            continue
        path = dotted_name(call.callee, bindings)
        if path is None or wanted(path) is None:
            continue
        # In place: the call's parent is unknown, so the call node becomes
        # the wrapper and a copy of it goes inside.
        inner = CallExpr(call.callee, call.args, call.arg_kinds, call.arg_names)
        inner.set_line(call.line, call.column, call.end_line, call.end_column)
        wrapper = wrap_in_phantom(inner, UNTYPED)
        assert isinstance(wrapper, CallExpr)
        call.callee, call.args = wrapper.callee, wrapper.args
        call.arg_kinds, call.arg_names = wrapper.arg_kinds, wrapper.arg_names
