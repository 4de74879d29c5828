"""The gradient-sync contract (vocab/gradsync.py) in the checker.

A function that finishes gradients calls `spmd.sync_grads(model, *axes)`,
`spmd.sync_grads_on_step(opt, model, *axes)` or `spmd.sync_grad(w, axis)`.
At the first such call of a function, the whole function is read
(_mypy.calls_of_function) and its sums collected:

  spmd.sync_grads(model, "dp")                   every parameter pending on dp
  spmd.sync_grad(model.ln_w, "tp")               that parameter on tp
  for w in (model.ln1_w, model.ln2_w):           each listed parameter
      spmd.sync_grad(w, "tp")                    (or spmd.all_reduce(w.grad, "tp", ...))
  for p in model.parameters():                   every parameter, whatever its state
      dist.all_reduce(p.grad, group=dp_group)    (the group declared as an axis)

For each module they finish (the root name, typed as an nn.Module subclass),
its declared parameters (_mypy.module_parameters: class-body and `__init__`
annotations, submodules, `spmd.tie` in `__init__`) and the sums go to
vocab.gradsync.check_contract; each problem is an spmd-gradsync error at
the finishing code (a missing sum: at the function's first finishing call,
and also at the parameter's declaration when it is in the checked file).

`report_live_aliases` is the in-place half: a raw in-place collective
(dist.all_reduce, dist.broadcast) of a tensor another name aliases (bound
from it, or it from that name, by `=`, `.data`, a view or an index) while
that name is read after the call is an spmd-alias error.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ..vocab.gradsync import EVERY, NAMED, PENDING_ONLY, Param, Problem, Sum, check_contract
from ..vocab.spec import Spmd
from . import _mypy
from .carrier import spmd_of
from .errors import SPMD_ALIAS, SPMD_GRADSYNC
from .groups import axis_of
from .guard import default_return, guarded

_API = "spmd_mypy.runtime.gradsync."
SYNC_GRADS = _API + "sync_grads"
SYNC_GRAD = _API + "sync_grad"
ON_STEP = _API + "sync_grads_on_step"
FINISHING = (SYNC_GRADS, SYNC_GRAD, ON_STEP)
SPMD_ALL_REDUCE = "spmd_mypy.runtime.api.all_reduce"
RAW_ALL_REDUCE = ("torch.distributed.distributed_c10d.all_reduce", "torch.distributed.all_reduce")

Root = Any  # a NameExpr (mypy's): the module the sums finish


def _axes(ctx: Any, expr: _mypy.Expression) -> Tuple[str, ...]:
    found = axis_of(expr, _mypy.known_type(ctx.api, expr))
    if found is None:
        return ()
    return found if isinstance(found, tuple) else (found,)


Target = Tuple[Root, str, Tuple[str, ...]]  # (root, kind, parameter paths or module prefixes)


def _module_of(site: _mypy.CallSite, expr: _mypy.Expression, depth: int = 0) -> Optional[Tuple[Root, str]]:
    """(root, dotted prefix) of a module expression: `model` -> (model, ""),
    `model.blocks` -> (model, "blocks"); a loop variable over a module list
    `model.layers` -> (model, "layers.*")."""
    found = _mypy.member_path(expr)
    if found is None or depth > 4:
        return None
    root, path = found
    bound = _mypy.loop_binding(site, root.name)
    if bound is None:
        return root, ".".join(path)
    outer = _module_of(site, bound[1], depth + 1)
    if outer is None or _mypy.listed_items(bound[1]) is not None:
        return None
    return outer[0], ".".join(p for p in (outer[1], "*", *path) if p)


def _targets(site: _mypy.CallSite, expr: _mypy.Expression, depth: int = 0) -> Optional[Target]:
    """(root, kind, paths) of the parameters `expr` stands for: a parameter
    `model.a.w`, a loop variable over `model.parameters()`, over a tuple of
    parameters, or an attribute of a loop variable over a module list."""
    found = _mypy.member_path(expr)
    if found is None or depth > 4:
        return None
    root, path = found
    bound = _mypy.loop_binding(site, root.name)
    if bound is None:
        return (root, NAMED, (".".join(path),)) if path else None
    iterated = bound[1]
    receiver = _mypy.method_call_of(iterated, ("parameters", "named_parameters"))
    if receiver is not None:
        owner = _module_of(site, receiver, depth + 1)
        if owner is None or path:
            return None
        return owner[0], EVERY, (owner[1],) if owner[1] else ()
    items = _mypy.listed_items(iterated)
    if items is None:
        owner = _module_of(site, iterated, depth + 1)  # `for layer in model.layers: layer.ln_w`
        if owner is None or not path:
            return None
        return owner[0], NAMED, (".".join(p for p in (owner[1], "*", *path) if p),)
    resolved: List[Target] = []
    for item in items:
        one = _targets(site, item, depth + 1)
        if one is None or one[1] != NAMED or (resolved and one[0].name != resolved[0][0].name):
            return None
        resolved.append(one)
    if not resolved:
        return None
    suffix = "." + ".".join(path) if path else ""
    return resolved[0][0], NAMED, tuple(p + suffix for r in resolved for p in r[2])


def _strip_grad(expr: Any) -> Optional[_mypy.Expression]:
    """`w` for `w.grad` or `w.grad.data`, else None."""
    while getattr(expr, "name", None) in ("grad", "data") and hasattr(expr, "expr"):
        inner = expr.expr
        if getattr(expr, "name", None) == "grad":
            return inner
        expr = inner
    return None


def _grad_owner(func: Any, expr: _mypy.Expression, line: int) -> Optional[_mypy.Expression]:
    """The parameter whose gradient `expr` is: `w` for `w.grad`, or for a
    name bound to `w.grad` (or a view of it) before `line`."""
    direct = _strip_grad(expr)
    if direct is not None:
        return direct
    text = _mypy.expr_text(expr)
    bound = None
    for stmt in _mypy.assignments(func):
        if stmt.line < line and any(_mypy.expr_text(lv) == text for lv in stmt.lvalues):
            bound = stmt.rvalue  # the last binding before the call
    source = _mypy.alias_source(bound) if bound is not None else None
    return _strip_grad(source) if source is not None else None


def _sums_of(ctx: Any, func: Any, site: _mypy.CallSite) -> Iterator[Tuple[Root, Sum]]:
    call, name = site.call, site.fullname
    text = _mypy.expr_text(call)
    if name in (SYNC_GRADS, ON_STEP):
        at = 0 if name == SYNC_GRADS else 1
        if len(call.args) <= at:
            return
        owner = _module_of(site, call.args[at])
        if owner is None:
            return
        prefix = (owner[1],) if owner[1] else ()
        for arg in call.args[at + 1:]:
            for axis in _axes(ctx, arg):
                yield owner[0], Sum(call.line, axis, PENDING_ONLY, prefix, text)
        return
    if name == SYNC_GRAD:
        param = call.args[0] if call.args else None
        axis_expr = call.args[1] if len(call.args) > 1 else None
    elif name == SPMD_ALL_REDUCE:
        param = _grad_owner(func, call.args[0], call.line) if call.args else None
        axis_expr = call.args[1] if len(call.args) > 1 else None
    elif name in RAW_ALL_REDUCE:
        param = _grad_owner(func, call.args[0], call.line) if call.args else None
        axis_expr = _mypy.call_argument(call, 2, "group")
    else:
        return
    if param is None or axis_expr is None:
        return
    target = _targets(site, param)
    if target is None:
        return
    root, kind, paths = target
    for axis in _axes(ctx, axis_expr):
        yield root, Sum(call.line, axis, kind, paths, text)


def _params(declared: List[_mypy.DeclaredParam], here: Optional[str]) -> List[Param]:
    out: List[Param] = []
    for d in declared:
        spmd = spmd_of(d.type)
        if spmd is None and not d.tied:
            continue
        line = d.line if d.module == here and d.line > 0 else None
        out.append(Param(d.path, spmd if spmd is not None else Spmd(), d.tied, line))
    return out


def _report(ctx: Any, problem: Problem, anchor: _mypy.Expression) -> None:
    if problem.line is not None:
        ctx.api.fail(problem.message, _mypy.at_line(problem.line), code=SPMD_GRADSYNC)
        return
    ctx.api.fail(problem.message, anchor, code=SPMD_GRADSYNC)
    if problem.param.line is not None:
        where = f" (declared here; the finishing code is at line {anchor.line})"
        ctx.api.fail(problem.message + where, _mypy.at_line(problem.param.line), code=SPMD_GRADSYNC)


def check_finishing(ctx: Any) -> _mypy.Type:
    """The hook of the finishing calls: the contract of the whole function,
    checked once, at its first finishing call."""
    func = _mypy.current_function(ctx.api)
    if func is None:
        return ctx.default_return_type
    sites = _mypy.calls_of_function(func)
    first = next((s for s in sites if s.fullname in FINISHING), None)
    if first is None or first.call is not ctx.context:
        return ctx.default_return_type
    by_root: Dict[str, Tuple[Root, List[Sum]]] = {}
    for site in sites:
        for root, s in _sums_of(ctx, func, site):
            by_root.setdefault(root.name, (root, []))[1].append(s)
    tree = getattr(ctx.api, "tree", None)
    here = getattr(tree, "fullname", None)
    for name, (root, sums) in by_root.items():
        declared = _mypy.module_parameters(ctx.api, _mypy.name_type(root))
        if declared is None:
            continue
        params = _params(declared, here)
        for problem in check_contract(params, sums, name, f"{func.name}()"):
            _report(ctx, problem, first.call)
    return ctx.default_return_type


HOOKS: Dict[str, Callable[[Any], _mypy.Type]] = {name: guarded(check_finishing, default_return) for name in FINISHING}


# -- in-place collectives and live aliases --------------------------------------------


def _aliases(func: Any, tensor: str, before: int) -> Dict[str, int]:
    """name text -> line, for the names sharing `tensor`'s storage at line `before`."""
    found: Dict[str, int] = {}
    for stmt in _mypy.assignments(func):
        if stmt.line >= before:
            break
        source = _mypy.alias_source(stmt.rvalue)
        src = _mypy.expr_text(source) if source is not None else None
        for lvalue in stmt.lvalues:
            lv = _mypy.expr_text(lvalue)
            found.pop(lv, None)
            if lv == tensor:
                found = {}  # tensor rebound: earlier aliases are of another tensor
                if src is not None and src != tensor:
                    found[src] = stmt.line
            elif src == tensor:
                found[lv] = stmt.line
    return found


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
