"""In-place collectives on a tensor with live aliases (the gradient-sync
contract's in-place half, issue 18 item 1).

A raw in-place collective (dist.all_reduce, dist.broadcast) of a tensor
another name aliases (bound from it, or it from that name, by `=`, `.data`,
a view or an index) while that name is read after the call is an spmd-alias
error: the collective overwrites the storage both names share, so a
gradient summed again through the other name is summed twice.
raw_collectives.py calls `report_live_aliases` at each such call.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from . import _mypy
from .errors import SPMD_ALIAS

_mypy.load("grad_sites")  # the mypy side of this feature (_mypy/__init__.py)

__all__ = ["report_live_aliases", "live_alias_message"]


def _aliases(func: Any, tensor: str, before: int) -> Dict[str, int]:
    """name text -> line, for the names sharing `tensor`'s storage at line
    `before`: bound from it, or it from them, through any chain of
    assignments (`a = w.grad; b = a`: b, a and w.grad share one storage); the
    line is where the name joined that storage."""
    storage: Dict[str, int] = {}  # name -> storage id
    joined: Dict[str, int] = {}
    for k, stmt in enumerate(_mypy.assignments(func)):
        if stmt.line >= before:
            break
        source = _mypy.alias_source(stmt.rvalue)
        src = _mypy.expr_text(source) if source is not None else None
        for lvalue in stmt.lvalues:
            lv = _mypy.expr_text(lvalue)
            if src is None or src == lv:
                storage[lv] = -1 - k  # a new storage (or the same one, `x = x.view(...)`)
                joined[lv] = stmt.line
                continue
            if src not in storage:
                storage[src], joined[src] = k, stmt.line
            storage[lv], joined[lv] = storage[src], stmt.line
    target = storage.get(tensor)
    return {n: joined[n] for n, sid in storage.items() if sid == target and n != tensor} if target is not None else {}


def live_alias_message(call_name: str, tensor: str, alias: str, bound: int, read: int, axes: str) -> str:
    over = f" over {axes}" if axes else ""
    axis = axes.split(",")[0].strip() if axes else "<axis>"
    return (
        f"in-place torch.distributed.{call_name} of {tensor}{over} while {alias} (an alias of {tensor}, "
        f"bound at line {bound}) is read at line {read}: the collective overwrites the storage both names share, "
        f"so {alias} already holds the sum there (a gradient summed again through it is summed twice). "
        f"Hint: {tensor} = spmd.all_reduce({tensor}, {axis}, src=P, dst=R)"
    )


def report_live_aliases(ctx: Any, call_name: str, axes: Optional[Tuple[str, ...]]) -> None:
    """spmd-alias at an in-place raw collective whose tensor another name aliases
    while that name is read after the call."""
    func = _mypy.current_function(ctx.api)
    call = ctx.context
    if func is None or not getattr(call, "args", None):
        return
    tensor = _mypy.expr_text(call.args[0])
    aliases = _aliases(func, tensor, call.line)
    if not aliases:
        return
    for line, expr in sorted(_mypy.reads_after(func, call.line), key=lambda r: r[0]):
        text = _mypy.expr_text(expr)
        if text in aliases:
            shown = ", ".join(repr(a) for a in axes) if axes else ""
            msg = live_alias_message(call_name, tensor, text, aliases[text], line, shown)
            ctx.api.fail(msg, call, code=SPMD_ALIAS)
            return
