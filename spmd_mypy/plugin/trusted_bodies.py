"""The bodies of autograd Functions declared as trusted boundaries.

`spmd.trusted(Fn.apply, in_types=(...), out_types=...)`, or the decorator
`@spmd.trusted(in_types=(...), out_types=...)` above the class, declares what the
Function does as a whole; its body is not checked against it (it is
trusted).  The declaration still says what the body receives, so the
checker types the body's tensor parameters from it, in the same file:

  - `forward`'s tensor parameters after ctx, one per in_types entry;
  - `backward`'s gradient parameters after ctx, one per out_types entry,
    each the gradient type of that entry (vocab.localtype.grad_type);

each without gradient (autograd records nothing in a Function's forward and
backward), and only where the parameter is annotated a plain `Tensor` (an
Spmd annotation of its own wins).  Returns keep their plain annotation, so
nothing in the body is compared with the declaration: the body's values are
typed by the ordinary rules (its ops, its raw collectives, which
raw_collectives.py types there), and checked by them, no more.

Found from the file's source with stdlib ast: the Function class by its name
in `<Name>.apply`, defined in the same file with a base named `Function`, or
the class a `@<...>trusted(in_types=..., out_types=...)` decorates.
Pure Python."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from .positions import Pos
from .sourcefile import FileIndex, statements

# Where a parameter's `Tensor` is written -> (the declared entry, a Spmd(...)
# call; whether the parameter is its gradient: backward's).
Entry = Tuple[ast.expr, bool]


def _last_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _entries(node: Optional[ast.expr]) -> List[Optional[ast.expr]]:
    """The entries of in_types/out_types: a tuple, `(x,) * n`, or one entry."""
    if node is None:
        return []
    if isinstance(node, ast.Tuple):
        return list[Optional[ast.expr]](node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and isinstance(node.left, ast.Tuple):
        times = node.right
        if isinstance(times, ast.Constant) and isinstance(times.value, int):
            entries: List[Optional[ast.expr]] = list(node.left.elts)
            return entries * times.value
        return []
    return [node]


def _declarations(tree: ast.AST) -> Dict[str, Tuple[List[Optional[ast.expr]], List[Optional[ast.expr]]]]:
    """Function class name -> (in_types entries, out_types entries)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):  # @spmd.trusted(in_types=..., out_types=...) above it
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and _last_name(d.func) == "trusted" and not d.args:
                    out[node.name] = _declared(d)
        if not (isinstance(node, ast.Call) and _last_name(node.func) == "trusted" and node.args):
            continue
        target = node.args[0]
        if isinstance(target, ast.Attribute) and target.attr == "apply" and isinstance(target.value, ast.Name):
            out[target.value.id] = _declared(node)
    return out


def _declared(call: ast.Call) -> Tuple[List[Optional[ast.expr]], List[Optional[ast.expr]]]:
    kws = {k.arg: k.value for k in call.keywords}
    return _entries(kws.get("in_types")), _entries(kws.get("out_types"))


def _plain_tensor(annotation: Optional[ast.expr]) -> bool:
    return annotation is not None and _last_name(annotation) == "Tensor"


def collect(tree: ast.AST) -> Dict[Pos, Entry]:
    declared = _declarations(tree)
    out: Dict[Pos, Entry] = {}
    if not declared:
        return out
    for node in statements(tree):
        if not isinstance(node, ast.ClassDef) or node.name not in declared:
            continue
        if not any(_last_name(b) == "Function" for b in node.bases):
            continue
        ins, outs = declared[node.name]
        for item in node.body:
            if not isinstance(item, ast.FunctionDef) or item.name not in ("forward", "backward"):
                continue
            params = [*item.args.posonlyargs, *item.args.args][1:]  # after ctx
            entries = ins if item.name == "forward" else outs
            for param, entry in zip(params, entries):
                ann = param.annotation
                if entry is not None and isinstance(entry, ast.Call) and _plain_tensor(ann):
                    assert ann is not None
                    out[(ann.lineno, ann.col_offset)] = (entry, item.name == "backward")
    return out


def declared_at(path: Optional[str], pos: Pos, owner: object = None) -> Optional[Entry]:
    """The trusted declaration's entry for the parameter whose `Tensor` is at `pos`."""
    return entries_for(path, owner).get(pos)


_ENTRIES: FileIndex[Dict[Pos, Entry]] = FileIndex(
    lambda data: b"trusted" in data and b".apply" in data, lambda tree: collect(tree), {}
)


def entries_for(path: Optional[str], owner: object = None) -> Dict[Pos, Entry]:
    return _ENTRIES.of(path, owner)
