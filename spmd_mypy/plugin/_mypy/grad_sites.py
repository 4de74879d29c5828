"""The gradient-sync contract on mypy's tree: the calls of the function
being checked (with the loops around each), the parameters a module class
declares (its own and its submodules', with `spmd.tie` declarations in
`__init__`), and the aliases of a name within a function.

The plugin's gradsync.py turns these into the vocabulary's Params and Sums
(vocab/gradsync.py) and reports; nothing here knows the contract's rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

from mypy.nodes import (
    ARG_POS,
    AssignmentStmt,
    Block,
    CallExpr,
    ComparisonExpr,
    Context,
    Decorator,
    Expression,
    ExpressionStmt,
    ForStmt,
    FuncDef,
    IfStmt,
    IndexExpr,
    ListExpr,
    MemberExpr,
    NameExpr,
    OpExpr,
    OverloadedFuncDef,
    RefExpr,
    Statement,
    StrExpr,
    TupleExpr,
    TypeInfo,
    UnaryExpr,
    Var,
)
from mypy.types import Instance, Type, get_proper_type

from .members import element_class, module_class, without_none
from .tree import REASSIGNED, functions_of, is_phantom_call, sub_blocks

TIE = "spmd_mypy.runtime.gradsync.tie"


@dataclass(frozen=True)
class CallSite:
    """A call in the function, the loops around it (innermost last), and
    the statement it is in (an assignment's targets are `targets`)."""

    call: CallExpr
    fullname: str
    loops: Tuple[ForStmt, ...]
    targets: Tuple[Expression, ...]


def current_function(api: Any) -> Optional[FuncDef]:
    func = api.scope.current_function() if hasattr(api, "scope") else None
    return func if isinstance(func, FuncDef) else None


def _children(e: Expression) -> List[Expression]:
    if isinstance(e, CallExpr):
        return [*e.args, e.callee]
    if isinstance(e, MemberExpr):
        return [e.expr]
    if isinstance(e, (TupleExpr, ListExpr)):
        return list(e.items)
    if isinstance(e, IndexExpr):
        return [e.base, e.index]
    if isinstance(e, OpExpr):
        return [e.left, e.right]
    if isinstance(e, ComparisonExpr):
        return list(e.operands)
    if isinstance(e, UnaryExpr):
        return [e.expr]
    return []


def _calls_in(expr: Optional[Expression]) -> Iterator[CallExpr]:
    todo = [expr] if expr is not None else []
    while todo:
        e = todo.pop()
        if isinstance(e, CallExpr):
            yield e
        todo += _children(e)


def _expressions(stmt: Statement) -> List[Expression]:
    if isinstance(stmt, AssignmentStmt):
        return [stmt.rvalue]
    if isinstance(stmt, ExpressionStmt):
        return [stmt.expr]
    if isinstance(stmt, ForStmt):
        return [stmt.expr]
    expr = getattr(stmt, "expr", None)
    if isinstance(expr, list):  # if / with: one expression per branch or item
        return [e for e in expr if isinstance(e, Expression)]
    return [expr] if isinstance(expr, Expression) else []


def calls_of_function(func: FuncDef) -> List[CallSite]:
    """Every call in `func`'s body (not in nested functions or classes), in
    source order."""
    out: List[CallSite] = []

    def walk(block: Block, loops: Tuple[ForStmt, ...]) -> None:
        for stmt in block.body:
            if isinstance(stmt, (FuncDef, Decorator, OverloadedFuncDef)):
                continue
            targets = tuple(stmt.lvalues) if isinstance(stmt, AssignmentStmt) else ()
            for expr in _expressions(stmt):
                for call in _calls_in(expr):
                    name = call.callee.fullname if isinstance(call.callee, RefExpr) else ""
                    out.append(CallSite(call, name or "", loops, targets))
            inner = loops + (stmt,) if isinstance(stmt, ForStmt) else loops
            for b in sub_blocks(stmt):
                walk(b, inner)

    walk(func.body, ())
    out.sort(key=lambda s: (s.call.line, s.call.column))
    return out


def called_function(site: CallSite, caller: FuncDef) -> Optional[FuncDef]:
    """The function a call runs when the program defines it: `helper(...)`
    (a function of some module) or `self.helper(...)` in a method (a method
    of the caller's class or its bases); else None."""
    callee = site.call.callee
    node: Any = None
    if isinstance(callee, NameExpr):
        node = callee.node
    elif isinstance(callee, MemberExpr) and isinstance(callee.expr, NameExpr) and callee.expr.name == "self":
        info = caller.info if caller.info is not None and not caller.is_static else None
        found = info.get(callee.name) if info is not None and hasattr(info, "get") else None
        node = found.node if found is not None else None
    if isinstance(node, Decorator):
        node = node.func
    return node if isinstance(node, FuncDef) and node.fullname else None


def bound_arguments(site: CallSite, callee: FuncDef) -> Dict[str, Expression]:
    """callee parameter name -> the argument expression `site` passes it
    (positional and keyword arguments; the `self` of `self.helper(...)` is the caller's `self`)."""
    names = list(callee.arg_names)
    out: Dict[str, Expression] = {}
    callee_expr = site.call.callee
    if isinstance(callee_expr, MemberExpr) and names and callee.info is not None and not callee.is_static:
        if names[0] is not None:
            out[str(names[0])] = callee_expr.expr
        names = names[1:]
    for k, (arg, kind, name) in enumerate(zip(site.call.args, site.call.arg_kinds, site.call.arg_names)):
        if name is not None:
            out[name] = arg
        elif kind == ARG_POS and k < len(names) and names[k] is not None:
            out[str(names[k])] = arg
    return out


def module_functions(tree: Any) -> List[FuncDef]:
    """The functions and methods of a module (outermost, not nested ones)."""
    return list(functions_of(tree.defs))


def member_path(expr: Expression) -> Optional[Tuple[NameExpr, Tuple[str, ...]]]:
    """`model.blocks.ln_w` -> (the NameExpr `model`, ("blocks", "ln_w"))."""
    names: List[str] = []
    while isinstance(expr, MemberExpr):
        names.append(expr.name)
        expr = expr.expr
    if not isinstance(expr, NameExpr):
        return None
    return expr, tuple(reversed(names))


def name_type(expr: NameExpr) -> Optional[Type]:
    node = expr.node
    return node.type if isinstance(node, Var) else None


def known_type(api: Any, expr: Expression) -> Optional[Type]:
    """The type of `expr` without checking code ahead of the checker: a
    name's declared or inferred type, the type already recorded, or for a
    call of a named function (a group getter) its type now; else None."""
    if isinstance(expr, NameExpr):
        found = name_type(expr)
        if found is not None:
            return found
    recorded = api.lookup_type_or_none(expr)
    if recorded is not None:
        return recorded
    if isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr) and not expr.args:
        return api.get_expression_type(expr)
    if isinstance(expr, MemberExpr) and isinstance(expr.expr, NameExpr) and name_type(expr.expr) is not None:
        return api.get_expression_type(expr)  # `self.dp_group`, `pg.tp_group`: an attribute of a typed name
    return None


def loop_binding(site: CallSite, name: str) -> Optional[Tuple[ForStmt, Expression]]:
    """The innermost loop of `site` binding `name` as its index (`for p in`)
    or the last item of a tuple index (`for n, p in`), with that index."""
    for loop in reversed(site.loops):
        index = loop.index
        if isinstance(index, TupleExpr) and index.items:
            index = index.items[-1]
        if isinstance(index, NameExpr) and index.name == name:
            return loop, loop.expr
    return None


def method_call_of(expr: Expression, names: Tuple[str, ...]) -> Optional[Expression]:
    """The receiver of `recv.<one of names>(...)`, else None."""
    if isinstance(expr, CallExpr) and isinstance(expr.callee, MemberExpr) and expr.callee.name in names:
        return expr.callee.expr
    return None


def listed_items(expr: Expression) -> Optional[List[Expression]]:
    return list(expr.items) if isinstance(expr, (TupleExpr, ListExpr)) else None


@dataclass(frozen=True)
class DeclaredParam:
    """A parameter a module class declares with a tensor type."""

    path: str
    type: Type
    tied: Tuple[str, ...]
    line: int
    module: str  # the module the declaring class is in


def module_parameters(api: Any, typ: Optional[Type], depth: int = 4) -> Optional[List[DeclaredParam]]:
    """The tensor attributes declared by the module class of `typ` and by the
    module classes of its attributes (paths dotted; the elements of a module
    list built in `__init__` from one class as `name.*`); None if typ is no
    module."""
    inst = module_class(typ)
    prefix = ""
    if inst is None:  # a list of model chunks (`model: List[GPTStage]`): each element's, as `*.`
        inst, prefix = chunk_class(typ), "*."
    if inst is None:
        return None
    out: List[DeclaredParam] = []
    _collect(api, inst.type, prefix, depth, out, set())
    return out


def chunk_class(typ: Optional[Type]) -> Optional[Instance]:
    """M of a sequence of modules `List[M]` / `Sequence[M]` / `Tuple[M, ...]`
    (Megatron's list of model chunks), else None."""
    p = get_proper_type(without_none(typ)) if typ is not None else None
    if isinstance(p, Instance) and len(p.args) == 1 and p.type.has_base("typing.Sequence"):
        return module_class(p.args[0])
    return None


def _init_of(info: TypeInfo) -> Optional[FuncDef]:
    sym = info.names.get("__init__")
    init = sym.node if sym is not None else None
    if isinstance(init, Decorator):
        init = init.func
    return init if isinstance(init, FuncDef) else None


def _list_elements(api: Any, info: TypeInfo) -> Dict[str, TypeInfo]:
    """attribute -> element class, for `self.x = nn.ModuleList([...])` (or
    nn.Sequential) in `__init__` whose elements are of one module class."""
    init = _init_of(info)
    out: Dict[str, TypeInfo] = {}
    for site in calls_of_function(init) if init is not None else ():
        if not site.fullname.endswith((".ModuleList", ".Sequential")) or len(site.targets) != 1:
            continue
        target = member_path(site.targets[0])
        if target is None or target[0].name != "self" or len(target[1]) != 1 or not site.call.args:
            continue
        elem = element_class(api, site.call.args[0])
        if elem is not None:
            out[target[1][0]] = elem.type
    return out


def _collect(api: Any, info: TypeInfo, prefix: str, depth: int, out: List[DeclaredParam], seen: set) -> None:
    if info.fullname in seen or depth < 0:
        return
    seen = seen | {info.fullname}
    ties = _ties(info)
    for name, elem in _list_elements(api, info).items():
        _collect(api, elem, f"{prefix}{name}.*.", depth - 1, out, seen)
    done = set()
    for base in info.mro:
        if base.fullname.startswith("torch."):
            continue
        for name, sym in base.names.items():
            node = sym.node
            if name in done or not isinstance(node, Var) or node.type is None:
                continue
            done.add(name)
            typ = without_none(node.type)
            sub = module_class(typ) if typ is not None else None
            if sub is not None:
                _collect(api, sub.type, f"{prefix}{name}.", depth - 1, out, seen)
            elif typ is not None and _is_tensor(typ):
                out.append(DeclaredParam(prefix + name, typ, ties.get(name, ()), node.line, base.module_name))
    for path, axes in ties.items():
        if path not in done:  # a tie of a submodule's parameter: `spmd.tie(self.head.weight, "pp")`
            out.append(DeclaredParam(prefix + path, Instance(info, []), axes, -1, info.module_name))


def _is_tensor(typ: Type) -> bool:
    p = get_proper_type(typ)
    return isinstance(p, Instance) and p.type.has_base("torch._tensor.Tensor")


def _ties(info: TypeInfo) -> Dict[str, Tuple[str, ...]]:
    """path -> axes for each `spmd.tie(..., "pp")` in the class's __init__:
    `self.w = spmd.tie(nn.Parameter(...), "pp")` or `spmd.tie(self.head.weight, "pp")`."""
    init = _init_of(info)
    if init is None:
        return {}
    out: Dict[str, Tuple[str, ...]] = {}
    for site in calls_of_function(init):
        if site.fullname != TIE or len(site.call.args) < 2 or not isinstance(site.call.args[1], StrExpr):
            continue
        axis = site.call.args[1].value
        found = member_path(site.call.args[0])
        if found is None and len(site.targets) == 1:
            found = member_path(site.targets[0])
        if found is not None and found[0].name == "self" and found[1]:
            path = ".".join(found[1])
            out[path] = out.get(path, ()) + (axis,)
    return out


def at_line(line: int) -> Context:
    ctx = Context(line=line)
    return ctx


# -- aliases ----------------------------------------------------------------------------

_VIEWS = frozenset({"view", "view_as", "reshape", "flatten", "detach", "as_strided", "narrow", "squeeze",
                    "unsqueeze", "t", "transpose", "permute", "expand", "unflatten", "chunk", "split"})


def alias_source(expr: Expression) -> Optional[Expression]:
    """The tensor `expr` shares storage with: `x` for `x`, `x.data`,
    `x.view(...)`, `x.detach()`, `x[...]`; else None.  (`xs` for the
    rewrite's `reassigned(xs)`: route_declared.)"""
    if isinstance(expr, (NameExpr, MemberExpr)) and not (isinstance(expr, MemberExpr) and expr.name == "data"):
        return expr
    if isinstance(expr, MemberExpr) and expr.name == "data":
        return expr.expr
    if isinstance(expr, CallExpr) and isinstance(expr.callee, MemberExpr):
        if expr.callee.name in _VIEWS:
            return expr.callee.expr
        if is_phantom_call(expr, REASSIGNED):
            return alias_source(expr.args[0])
    if isinstance(expr, IndexExpr):
        return expr.base
    return None


def assignments(func: FuncDef) -> List[AssignmentStmt]:
    out: List[AssignmentStmt] = []

    def walk(block: Block) -> None:
        for stmt in block.body:
            if isinstance(stmt, AssignmentStmt):
                out.append(stmt)
            if not isinstance(stmt, (FuncDef, Decorator, OverloadedFuncDef)):
                for b in sub_blocks(stmt):
                    walk(b)

    walk(func.body)
    return out


def reads_after(func: FuncDef, line: int) -> List[Tuple[int, Expression]]:
    """(line, expression) of every name and attribute read after `line` in
    `func` (assignment targets excluded)."""
    out: List[Tuple[int, Expression]] = []

    def visit(e: Expression) -> None:
        todo = [e]
        while todo:
            x = todo.pop()
            if isinstance(x, (NameExpr, MemberExpr)) and x.line > line:
                out.append((x.line, x))
            todo += _children(x)

    def walk(block: Block) -> None:
        for stmt in block.body:
            if isinstance(stmt, (FuncDef, Decorator, OverloadedFuncDef)):
                continue
            for expr in _expressions(stmt):
                visit(expr)
            blocks = sub_blocks(stmt)
            if isinstance(stmt, IfStmt):
                # the branch holding `line`: its siblings never run after it
                # (Megatron-FSDP's all_reduce in one branch, a read of its
                # buffer in the other)
                blocks = [b for b in blocks if _spans(b, line)] or blocks
            for b in blocks:
                walk(b)

    walk(func.body)
    return out


def _spans(block: Block, line: int) -> bool:
    """Whether `line` lies within the statements of `block`."""
    if not block.body:
        return False
    last = block.body[-1]
    return block.body[0].line <= line <= (getattr(last, "end_line", None) or last.line)
