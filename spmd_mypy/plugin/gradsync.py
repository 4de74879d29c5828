"""The gradient-sync contract (vocab/gradsync.py) in the checker.

A function that finishes gradients calls `spmd.sync_grads(model, *axes)`,
`spmd.sync_grads_on_step(opt, model, *axes)`, `spmd.sync_grad(w, axis)`
or installs the sums in backward, DDP-style, with
`spmd.sync_grads_in_backward(model, *axes)` (read like sync_grads).
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

The in-place half of the contract (a collective on a tensor another name
aliases) is grad_aliases.py.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

from ..vocab.axis import axis_names
from ..vocab.gradsync import EVERY, NAMED, PENDING_ONLY, Param, Problem, Sum, check_contract, shown_path
from ..vocab.spec import Spmd
from . import _mypy, comm_sites
from .carrier import spmd_of
from .errors import SPMD_GRADSYNC
from .groups import axis_of
from .guard import default_return, guarded

_mypy.load("grad_sites")  # the mypy side of this feature (_mypy/__init__.py)

_API = "spmd_mypy.runtime.gradsync."
SYNC_GRADS = _API + "sync_grads"
SYNC_GRAD = _API + "sync_grad"
ON_STEP = _API + "sync_grads_on_step"
IN_BACKWARD = _API + "sync_grads_in_backward"
FINISHING = (SYNC_GRADS, SYNC_GRAD, ON_STEP, IN_BACKWARD)
SPMD_ALL_REDUCE = "spmd_mypy.runtime.api.all_reduce"
RAW_ALL_REDUCE = ("torch.distributed.distributed_c10d.all_reduce", "torch.distributed.all_reduce")

class Root(NamedTuple):
    """The module the sums finish, as written (`model`), with its type."""

    name: str
    type: Optional[_mypy.Type]


def _root(expr: Any) -> Root:
    return Root(expr.name, _mypy.name_type(expr))


def _axes(ctx: Any, expr: _mypy.Expression) -> Tuple[str, ...]:
    found = axis_of(expr, _mypy.known_type(ctx.api, expr), ctx.api)
    if found is None:
        return ()
    return axis_names(found)


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
        return _root(root), ".".join(path)
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
        return (_root(root), NAMED, (".".join(path),)) if path else None
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


def _grad_owner(func: Any, expr: _mypy.Expression, line: int, depth: int = 0) -> Optional[_mypy.Expression]:
    """The parameter whose gradient `expr` is: `w` for `w.grad`, or for a
    name bound to `w.grad` (or a view of it) before `line`, through any chain
    of such bindings (`g = w.grad; h = g`)."""
    direct = _strip_grad(expr)
    if direct is not None or depth > 8:
        return direct
    text = _mypy.expr_text(expr)
    bound = None
    for stmt in _mypy.assignments(func):
        if stmt.line < line and any(_mypy.expr_text(lv) == text for lv in stmt.lvalues):
            bound = stmt  # the last binding before the call
    if bound is None:
        return None
    source = _mypy.alias_source(bound.rvalue)
    if source is None or _mypy.expr_text(source) == text:
        return None
    return _grad_owner(func, source, bound.line, depth + 1)


def _built_module(ctx: Any, expr: _mypy.Expression) -> Optional[Tuple[Root, str]]:
    """A module argument that is no name (`spmd.sync_grads_in_backward(Block(h), "dp")`):
    its text and the type the checker gave it."""
    typ = _mypy.known_type(ctx.api, expr)
    return (Root(_mypy.expr_text(expr), typ), "") if typ is not None else None


def _sums_of(ctx: Any, func: Any, site: _mypy.CallSite) -> Iterator[Tuple[Root, Sum]]:
    call, name = site.call, site.fullname
    text = _mypy.expr_text(call)
    if name in (SYNC_GRADS, ON_STEP, IN_BACKWARD):
        at = 1 if name == ON_STEP else 0
        if len(call.args) <= at:
            return
        owner = _module_of(site, call.args[at]) or _built_module(ctx, call.args[at])
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
    """The hook of the finishing calls, at a function's first one: the
    function's own API sums go to the communication report, and the contract
    is checked for each finishing function whose code includes this one's
    (the function itself, or the callers in its file that call it as a helper)."""
    func = _mypy.current_function(ctx.api)
    if func is None:
        return ctx.default_return_type
    graph = _graph(ctx.api)
    sites = [site for site, _ in graph.calls(func)]
    first = next((s for s in sites if s.fullname in FINISHING), None)
    if first is None or first.call is not ctx.context:
        return ctx.default_return_type
    if comm_sites.wanted(ctx.api):  # read module parameters only for a report that will be read
        _record_report(ctx, func, sites)
    for root in graph.roots_of(func):
        _check_contract_of(ctx, root, graph)
    return ctx.default_return_type


def _check_contract_of(ctx: Any, func: Any, graph: "FinishingGraph") -> None:
    """The contract of finishing function `func` with the sums of the helpers
    it calls; a missing sum is reported at its first finishing call (an API
    call or a helper call)."""
    anchor = graph.first_finishing_call(func)
    if anchor is None:
        return
    by_root: Dict[str, Tuple[Root, List[Sum]]] = {}
    complete = True
    for root, s in _all_sums(ctx, func, graph, ()):
        if root is None:
            complete = False  # a helper's sums this function's code cannot place
            continue
        by_root.setdefault(root.name, (root, []))[1].append(s)
    here = getattr(getattr(ctx.api, "tree", None), "fullname", None)
    for name, (root, sums) in by_root.items():
        declared = _mypy.module_parameters(ctx.api, root.type)
        if declared is None:
            continue
        fix = _fix_in_backward(graph, func, name)
        for problem in check_contract(_params(declared, here), sums, name, f"{func.name}()", fix):
            if complete or problem.kind != "missing":
                _report(ctx, problem, anchor)


def _all_sums(ctx: Any, func: Any, graph: "FinishingGraph", stack: Tuple[Any, ...]) -> Iterator[Tuple[Optional[Root], Sum]]:
    """The sums of `func`'s code: its own, and those of the finishing helpers
    it calls, placed on its own roots (a helper's `block` parameter passed
    `model.block`: its sums of `block.w` are sums of `model.block.w`); a
    sum that cannot be placed is yielded with root None."""
    for site, callee in graph.calls(func):
        yield from _sums_of(ctx, func, site)
        if callee is None or not graph.finishes(callee) or callee in stack or len(stack) > 4:
            continue
        bound = _mypy.bound_arguments(site, callee)
        for root, s in _all_sums(ctx, callee, graph, stack + (func,)):
            arg = bound.get(root.name) if root is not None else None
            owner = _module_of(site, arg) if arg is not None else None
            yield (owner[0], _placed(s, owner[1])) if owner is not None else (None, s)


def _fix_in_backward(graph: "FinishingGraph", func: Any, root: str) -> Optional[Callable[[str], str]]:
    """For finishing code that installs `spmd.sync_grads_in_backward(root, ...)`:
    the hint of a missing sum adds the axis to that call (a sum written after
    it, at the installation, would run before any backward)."""
    for site, _ in graph.calls(func):
        call = site.call
        if site.fullname == IN_BACKWARD and call.args and _mypy.expr_text(call.args[0]) == root:
            text = _mypy.expr_text(call)
            return lambda axis: f"{text[:-1]}, '{axis}')"
    return None


def _placed(s: Sum, prefix: str) -> Sum:
    """A helper's sum with its paths under the submodule `prefix` of the caller's root."""
    if not prefix:
        return s
    if s.kind == NAMED:
        paths = tuple(f"{prefix}.{p}" for p in s.params)
    else:
        paths = tuple(f"{prefix}.{p}" for p in s.params) or (prefix,)
    return Sum(s.line, s.axis, s.kind, paths, s.text)


def _record_report(ctx: Any, func: Any, sites: List[_mypy.CallSite]) -> None:
    """The communication report's entries of `func`'s own API sums."""
    here = getattr(getattr(ctx.api, "tree", None), "fullname", None)
    for site in sites:
        if site.fullname not in FINISHING:
            continue
        for root, s in _sums_of(ctx, func, site):
            declared = _mypy.module_parameters(ctx.api, root.type)
            if declared is not None:
                _record_sums(ctx, site, root.name, s, _params(declared, here))


class FinishingGraph:
    """The functions of one module that finish gradients (call the API, or a
    function of the module that does) and who calls whom among them."""

    def __init__(self, functions: List[Any]) -> None:
        self.ours = {id(f) for f in functions}
        # each function's calls, with the function of the program each runs (or None)
        self.sites: Dict[int, List[Tuple[_mypy.CallSite, Any]]] = {}
        for f in functions:
            self.calls(f)
        self.finishing = {id(f) for f in functions if self._reaches(id(f), set())}
        self.callers: Dict[int, List[Any]] = {}
        for f in functions:
            for _, c in self.sites[id(f)] if id(f) in self.finishing else ():
                if c is not None and id(c) in self.finishing and c is not f:
                    self.callers.setdefault(id(c), []).append(f)

    def calls(self, func: Any) -> List[Tuple[_mypy.CallSite, Any]]:
        """`func`'s calls with the function each runs, read once (another module's too)."""
        found = self.sites.get(id(func))
        if found is None:
            found = self.sites[id(func)] = [(s, _mypy.called_function(s, func)) for s in _mypy.calls_of_function(func)]
        return found

    def _reaches(self, key: int, seen: set) -> bool:
        seen.add(key)
        return any(
            s.fullname in FINISHING or (c is not None and id(c) in self.ours and id(c) not in seen and self._reaches(id(c), seen))
            for s, c in self.sites.get(key, ())
        )

    def finishes(self, func: Any) -> bool:
        """Whether `func` sums gradients (a function of another module: if it calls the API)."""
        if id(func) in self.ours:
            return id(func) in self.finishing
        return any(s.fullname in FINISHING for s, _ in self.calls(func))

    def roots_of(self, func: Any) -> List[Any]:
        """The finishing functions no other finishing function of the module
        calls, among `func` and its callers (transitively)."""
        out: List[Any] = []
        todo, seen = [func], set()
        while todo:
            f = todo.pop()
            if id(f) not in seen:
                seen.add(id(f))
                callers = self.callers.get(id(f), [])
                out += [] if callers else [f]
                todo += callers
        return out

    def first_finishing_call(self, func: Any) -> Optional[_mypy.Expression]:
        """`func`'s first API call or call of a finishing function."""
        for site, callee in self.calls(func):
            if site.fullname in FINISHING or (callee is not None and self.finishes(callee)):
                return site.call
        return None


_GRAPHS: Dict[int, Tuple[Any, FinishingGraph]] = {}  # checker identity -> (tree, graph): the last one


def _graph(api: Any) -> FinishingGraph:
    tree = getattr(api, "tree", None)
    key = _mypy.checker_identity(api)
    held = _GRAPHS.get(key)
    if held is None or held[0] is not tree:
        _GRAPHS.clear()
        held = _GRAPHS[key] = (tree, FinishingGraph(_mypy.module_functions(tree) if tree is not None else []))
    return held[1]


def _record_sums(ctx: Any, site: _mypy.CallSite, root: str, s: Sum, params: List[Param]) -> None:
    """The communication report's entries of one API sum: one all-reduce per
    typed parameter it sums (comm_sites.GRADIENT_SYNC)."""
    op = site.fullname.rsplit(".", 1)[-1]
    for p in params:
        if s.covers(p):
            comm_sites.record_gradient_sum(ctx, site.call, op, s.axis, shown_path(root, p.path))


HOOKS: Dict[str, Callable[[Any], _mypy.Type]] = {name: guarded(check_finishing, default_return) for name in FINISHING}
