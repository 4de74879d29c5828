"""spmd_types' regions and boundaries, rewritten before analysis (with refine_asserts).

- `with spmd.no_typecheck():` and a function decorated `@spmd.no_typecheck`
  / `@spmd.no_typecheck()` / `@spmd.no_typecheck(in_types=, out_types=)`:
  the body is not checked.  The spmd-* errors at its lines are dropped
  (region_errors.py, as `# type: ignore[spmd-...]` would), and each value
  assigned there is wrapped in `spmd_types._spmd_unchecked(e)`, whose hook
  makes its tensors of unknown SPMD type: a value leaving the region has the
  type a later assert_type states, and no other.
- `@spmd.local_map(in_types=..., out_types=...)`: the body is checked from
  its declared types: each parameter starts as `_spmd_declared(p, <in_types
  leaf>)`, each `return e` returns `_spmd_declared(e, <out_types leaf>)`
  (checked against what e is).  Callers see the declared types through the
  decorator's `__call__` hook (plugin/spmd_types_regions.py).
- an autograd Function with a `typecheck_forward` or `spmd_typecheck`
  staticmethod: its `forward` body starts from the types those assert on
  their parameters (forward values only: no gradient flows there), and its
  returns are checked against the type asserted on the output -- or, for an
  spmd_typecheck(*, ...) that returns the output types (spmd_types.rules),
  against that hook evaluated on forward's parameters (_spmd_rule_result).  Raw
  torch.distributed collectives there are what a forward runs (no
  spmd-collective error); the tensors they write are unknown after them.
- `if spmd.is_type_checking():` / `if spmd.TYPE_CHECKING:`: the checker is
  type checking, so the block always runs (its asserts count).
- reading such a staticmethod's asserts for the `.apply` hook: typecheck_hooks.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Set

from mypy.nodes import (
    ARG_NAMED,
    ArgKind,
    GDEF,
    ARG_POS,
    ARG_STAR,
    AssignmentStmt,
    Block,
    CallExpr,
    ClassDef,
    Decorator,
    DictExpr,
    Expression,
    ExpressionStmt,
    FuncDef,
    IfStmt,
    Import,
    ImportFrom,
    IndexExpr,
    IntExpr,
    ListExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OpExpr,
    OverloadedFuncDef,
    ReturnStmt,
    Statement,
    StrExpr,
    SymbolTableNode,
    TupleExpr,
    UnaryExpr,
    WithStmt,
)
from mypy.treetransform import TransformVisitor

from .signatures import decorator_call  # noqa: F401  (the spmd_types_regions feature reads it here)
from .spmd_types_rules import wrap_rule_returns
from .typecheck_hooks import (  # noqa: F401  (Asserted, remember_hooks, typecheck_hooks_of: re-exported)
    HOOK_NAMES,
    Asserted,
    hook_func,
    keyword_arg,
    read_hook,
    remember_hooks,
    typecheck_hooks_of,
)
from .region_errors import add_region
from .tree import flat_statements, is_phantom_call, sub_blocks

MODULE = "spmd_types"
ALIAS = "_spmd_types_"  # the name a rewritten tree binds spmd_types to
UNCHECKED = "_spmd_unchecked"
DECLARED = "_spmd_declared"
_RAW_DIST = ("dist", "torch.distributed", "distributed")
_RAW_CODES = frozenset({"spmd-collective"})  # what a raw collective in a forward drops


@dataclass
class Names:
    modules: Set[str]  # names bound to the module spmd_types
    functions: Dict[str, str]  # local name -> spmd_types function imported under it


def names_of(tree: MypyFile) -> Names:
    out = Names(set(), {})
    for imp in tree.imports:
        if isinstance(imp, Import):
            out.modules.update(alias or name for name, alias in imp.ids if name == MODULE)
        elif isinstance(imp, ImportFrom) and imp.id == MODULE:
            out.functions.update({alias or name: name for name, alias in imp.names})
    return out


def _refers(expr: Expression, names: Names, what: str) -> bool:
    """`spmd.<what>` or a name imported from spmd_types as <what>."""
    if isinstance(expr, MemberExpr) and isinstance(expr.expr, NameExpr):
        return expr.expr.name in names.modules and expr.name == what
    return isinstance(expr, NameExpr) and names.functions.get(expr.name) == what


def _calls(expr: Expression, names: Names, what: str) -> bool:
    return isinstance(expr, CallExpr) and _refers(expr.callee, names, what)


def _line(node: Statement | Expression, at: Statement | Expression) -> None:
    node.set_line(at.line, at.column, at.end_line, at.end_column)


def _module_call(name: str, args: List[Expression], kinds: List[ArgKind], arg_names: List[Optional[str]],
                 at: Statement | Expression) -> CallExpr:
    callee = MemberExpr(NameExpr(_ALIAS[0]), name)
    call = CallExpr(callee, args, kinds, arg_names)
    for node in (callee, callee.expr, call):
        _line(node, at)
    return call


# The name the calls written by this pass use for spmd_types: the file's own
# `import spmd_types as spmd`, else ALIAS (imported by the pass).
_ALIAS = [ALIAS]


def _ensure_import(tree: MypyFile, names: Names) -> None:
    if names.modules:
        _ALIAS[0] = sorted(names.modules)[0]
        return
    _ALIAS[0] = ALIAS
    if any(isinstance(d, Import) and (MODULE, ALIAS) in d.ids for d in tree.defs):
        return
    imp = Import([(MODULE, ALIAS)])
    first = next((d for d in tree.imports if d.is_top_level), None)
    imp.set_line(first.line if first is not None else 1, 0)
    imp.is_top_level = True
    at = tree.defs.index(first) if first is not None and first in tree.defs else 0
    tree.defs.insert(at, imp)
    tree.imports.append(imp)


def bind_alias(tree: MypyFile, modules: Dict[str, MypyFile]) -> None:
    """Bind ALIAS in the tree's names, as the import _ensure_import adds would:
    a tree rewritten during semantic analysis (mypy re-parsed it without
    asking for its dependencies) has its imports processed already."""
    names = names_of(tree)
    module = modules.get(MODULE)
    if names.functions and not names.modules and ALIAS not in tree.names and module is not None:
        tree.names[ALIAS] = SymbolTableNode(GDEF, module, module_public=False)


# -- unchecked regions ---------------------------------------------------------------


def _erase_assignments(block: Block) -> None:
    """Wrap each value assigned in `block` in _spmd_unchecked, except the
    asserts (assert_type states the type it leaves with, also there)."""
    for stmt in block.body:
        callee = stmt.rvalue.callee if isinstance(stmt, AssignmentStmt) and isinstance(stmt.rvalue, CallExpr) else None
        if isinstance(stmt, AssignmentStmt) and not (
            isinstance(callee, (MemberExpr, NameExpr)) and callee.name in (UNCHECKED, "assert_type", "mutate_type")
        ):
            stmt.rvalue = _module_call(UNCHECKED, [stmt.rvalue], [ARG_POS], [None], stmt.rvalue)
        for inner in sub_blocks(stmt):
            _erase_assignments(inner)


def _unchecked(tree: MypyFile, block: Block) -> None:
    if not block.body:
        return
    add_region(tree, block.body[0].line, max(s.end_line or s.line for s in block.body))
    _erase_assignments(block)


# -- declared boundaries -------------------------------------------------------------


def _copy(expr: Expression) -> Expression:
    return TransformVisitor().expr(expr)


def _declared(value: Expression, types: List[Expression], where: str, at: Statement | Expression,
              forward: bool = False) -> CallExpr:
    """`_spmd_declared(value, *types, where=..., forward=...)`; a PartitionSpec-only or (dict, spec)
    leaf is passed as its items."""
    args: List[Expression] = [value, *[_copy(t) for t in types]]
    kinds = [ARG_POS] * len(args)
    names: List[Optional[str]] = [None] * len(args)
    label = StrExpr(where)
    _line(label, at)
    args.append(label)
    kinds.append(ARG_NAMED)
    names.append("where")
    if forward:
        flag = NameExpr("True")
        _line(flag, at)
        args.append(flag)
        kinds.append(ARG_NAMED)
        names.append("forward")
    return _module_call(DECLARED, args, kinds, names, at)


def _leaf(expr: Expression) -> Optional[List[Expression]]:
    """A spec leaf as assert_type's arguments; None for a None leaf."""
    if isinstance(expr, NameExpr) and expr.name == "None":
        return None
    if isinstance(expr, TupleExpr) and len(expr.items) == 2:
        return [i for i in expr.items if not (isinstance(i, NameExpr) and i.name == "None")]
    return [expr]


def _declare_parameters(func: FuncDef, in_types: Expression, where: str, forward: bool = False) -> None:
    leaves = tuple_display(in_types)
    if leaves is None or not func.body.body:
        return
    at = func.body.body[0]
    inserted: List[Statement] = []
    for argument, leaf in zip(func.arguments, leaves):
        types = _leaf(leaf)
        if types is None or argument.kind == ARG_STAR:
            continue
        name = argument.variable.name
        target, value = NameExpr(name), NameExpr(name)
        _line(target, at)
        _line(value, at)
        assign = AssignmentStmt([target], _declared(value, types, where, at, forward))
        _line(assign, at)
        inserted.append(assign)
    func.body.body[:0] = inserted


def _returns(block: Block) -> List[ReturnStmt]:
    """The return statements of a body, not of functions nested in it."""
    out: List[ReturnStmt] = []
    for stmt in block.body:
        if isinstance(stmt, ReturnStmt):
            out.append(stmt)
        elif not isinstance(stmt, (FuncDef, Decorator, ClassDef, OverloadedFuncDef)):
            for inner in sub_blocks(stmt):
                out += _returns(inner)
    return out


def _declare_returns(func: FuncDef, types: List[Expression], where: str, forward: bool = False) -> None:
    for ret in _returns(func.body):
        if ret.expr is None:
            continue
        inner = ret.expr
        if is_phantom_call(inner) and isinstance(inner, CallExpr) and inner.args:  # `returned(e)`
            inner.args[0] = _declared(inner.args[0], types, where, inner.args[0], forward)
        else:
            ret.expr = _declared(inner, types, where, inner, forward)


def _declare_outputs(func: FuncDef, out_types: Expression, where: str) -> None:
    """A single leaf for a function returning one tensor; a tuple of leaves
    for one returning a tuple display of as many items.  A tuple of leaves
    returned as one expression (`return split(qkv)`) is not checked here:
    which item is which leaf is not written at the return (callers still see
    the declared types, as spmd_types stamps them there)."""
    found = _returns(func.body)
    tuples = [r for r in found if isinstance(_unrouted(r.expr), TupleExpr)]
    leaves = tuple_display(out_types)
    if leaves is not None and tuples and len(tuples) == len(found):
        for ret in tuples:
            expr = _unrouted(ret.expr)
            assert isinstance(expr, TupleExpr)
            if len(expr.items) != len(leaves):
                continue
            for i, leaf in enumerate(leaves):
                types = _leaf(leaf)
                if types is not None:
                    expr.items[i] = _declared(expr.items[i], types, where, expr.items[i])
        return
    if leaves is not None and (len(leaves) != 2 or not isinstance(out_types, TupleExpr)):
        return  # several outputs (a leaf written as a tuple is a pair: types, spec)
    single = _leaf(out_types)
    if single is not None:
        _declare_returns(func, single, where)


def _unrouted(expr: Optional[Expression]) -> Optional[Expression]:
    if expr is not None and is_phantom_call(expr) and isinstance(expr, CallExpr) and expr.args:
        return expr.args[0]
    return expr


def _decorated(tree: MypyFile, dec: Decorator, names: Names) -> None:
    for d in dec.decorators:
        if _refers(d, names, "no_typecheck") or _calls(d, names, "no_typecheck"):
            _unchecked(tree, dec.func.body)
        elif _calls(d, names, "local_map"):
            assert isinstance(d, CallExpr)
            in_types, out_types = keyword_arg(d, "in_types"), keyword_arg(d, "out_types")
            if in_types is not None:
                _declare_parameters(dec.func, in_types, "spmd_types.local_map in_types")
            if out_types is not None:
                _declare_outputs(dec.func, out_types, "spmd_types.local_map out_types")


# -- autograd Functions with a typecheck hook -------------------------------------------


def _free_names(exprs: List[Expression]) -> Set[str]:
    """The names an expression reads (a display, call, attribute, operator,
    subscript); an expression of any other kind reads "?" (never copied)."""
    found: Set[str] = set()
    todo: List[Optional[Expression]] = list(exprs)
    while todo:
        e = todo.pop()
        if e is None or isinstance(e, (StrExpr, IntExpr)):
            continue
        if isinstance(e, NameExpr):
            found.add(e.name)
        elif isinstance(e, MemberExpr):
            todo.append(e.expr)
        elif isinstance(e, CallExpr):
            todo += [e.callee, *e.args]
        elif isinstance(e, DictExpr):
            todo += [x for kv in e.items for x in kv]
        elif isinstance(e, (TupleExpr, ListExpr)):
            todo += e.items
        elif isinstance(e, OpExpr):
            todo += [e.left, e.right]
        elif isinstance(e, UnaryExpr):
            todo.append(e.expr)
        elif isinstance(e, IndexExpr):
            todo += [e.base, e.index]
        else:
            found.add("?")
    return found


def _assigned_in(func: FuncDef) -> Set[str]:
    return {t.name for s in flat_statements(func.body) if isinstance(s, AssignmentStmt) for t in s.lvalues
            if isinstance(t, NameExpr)}


def _check_forward(tree: MypyFile, cls: ClassDef) -> None:
    """forward's body from its hook's declared types (see the module docstring)."""
    funcs = {f.name: f for f in (hook_func(s) for s in cls.defs.body) if f is not None}
    hook = next((funcs[n] for n in HOOK_NAMES if n in funcs), None)
    forward = funcs.get("forward")
    if hook is None or forward is None or len(forward.arguments) < 1 or not forward.body.body:
        return
    asserted = read_hook(hook)
    fwd_params = [a.variable.name for a in forward.arguments[1:]]
    local = _assigned_in(hook) - set(asserted.parameters)
    at = forward.body.body[0]
    inserted: List[Statement] = []
    for i, name in enumerate(asserted.parameters):
        types = asserted.inputs.get(name)
        target = name if asserted.keyword_only else (fwd_params[i] if i < len(fwd_params) else None)
        if types is None or target is None or target not in fwd_params or _free_names(types) & (local | {'?'}):
            continue
        if target != name and name in _free_names(types):
            continue  # refers to the hook's own parameter name
        lhs, rhs = NameExpr(target), NameExpr(target)
        _line(lhs, at)
        _line(rhs, at)
        assign = AssignmentStmt([lhs], _declared(rhs, types, f"{cls.name}.forward ({hook.name})", at, forward=True))
        _line(assign, at)
        inserted.append(assign)
    forward.body.body[:0] = inserted
    if asserted.output is not None and not (_free_names(asserted.output) & (local | {'?'})) and (
        asserted.keyword_only or asserted.parameters == fwd_params[: len(asserted.parameters)]
    ):
        _declare_returns(forward, asserted.output, f"{cls.name}.forward's result ({hook.name})", forward=True)
    elif hook.name == "spmd_typecheck" and asserted.keyword_only:
        wrap_rule_returns(forward, hook, cls.name, _ALIAS[0], _returns(forward.body))
    _raw_collectives(tree, forward.body)


def _raw_collectives(tree: MypyFile, block: Block) -> None:
    """A raw collective statement in a forward: no spmd-collective error; its
    tensor arguments are unknown after it."""
    for i, stmt in enumerate(list(block.body)):
        if isinstance(stmt, ExpressionStmt) and isinstance(stmt.expr, CallExpr) and _raw_dist(stmt.expr.callee):
            add_region(tree, stmt.line, stmt.line, _RAW_CODES)
            after: List[Statement] = []
            for arg in stmt.expr.args:
                if isinstance(arg, NameExpr):
                    lhs, rhs = NameExpr(arg.name), NameExpr(arg.name)
                    _line(lhs, stmt)
                    _line(rhs, stmt)
                    assign = AssignmentStmt([lhs], _module_call(UNCHECKED, [rhs], [ARG_POS], [None], stmt))
                    _line(assign, stmt)
                    after.append(assign)
            block.body[block.body.index(stmt) + 1:block.body.index(stmt) + 1] = after
        else:
            for inner in sub_blocks(stmt):
                _raw_collectives(tree, inner)


def _raw_dist(callee: Expression) -> bool:
    if not isinstance(callee, MemberExpr):
        return False
    base = callee.expr
    text = base.name if isinstance(base, NameExpr) else (
        f"{base.expr.name}.{base.name}" if isinstance(base, MemberExpr) and isinstance(base.expr, NameExpr) else "")
    return text in _RAW_DIST


# -- the pass ------------------------------------------------------------------------


def _block(tree: MypyFile, block: Block, names: Names) -> None:
    for i, stmt in enumerate(block.body):
        if isinstance(stmt, WithStmt) and any(_calls(e, names, "no_typecheck") and not e.args  # type: ignore[attr-defined]
                                              for e in stmt.expr):
            _unchecked(tree, stmt.body)
            continue
        if isinstance(stmt, IfStmt) and len(stmt.expr) == 1 and _always_checking(stmt.expr[0], names):
            true = NameExpr("True")
            _line(true, stmt.expr[0])
            stmt.expr[0] = true
        if isinstance(stmt, Decorator):
            _decorated(tree, stmt, names)
            _block(tree, stmt.func.body, names)
        elif isinstance(stmt, FuncDef):
            _block(tree, stmt.body, names)
        elif isinstance(stmt, OverloadedFuncDef):
            for item in [*stmt.items, *([stmt.impl] if stmt.impl else [])]:
                _block(tree, Block([item]), names)
        elif isinstance(stmt, ClassDef):
            _check_forward(tree, stmt)
            _block(tree, stmt.defs, names)
        else:
            for inner in sub_blocks(stmt):
                _block(tree, inner, names)


def _always_checking(expr: Expression, names: Names) -> bool:
    return _calls(expr, names, "is_type_checking") or _refers(expr, names, "TYPE_CHECKING")


def rewrite_regions(tree: MypyFile, stmts: List[Statement]) -> None:
    """The rewrites of the module docstring, in `stmts` (functions and classes)."""
    names = names_of(tree)
    if not names.modules and not names.functions:
        return
    _ensure_import(tree, names)
    _block(tree, Block(stmts), names)


def tuple_display(expr: Expression) -> Optional[List[Expression]]:
    """The items of a tuple written out, or of `(a, b) * n` / `n * (a, b)`
    with n an int literal (torchtitan's `out_types=((types, spec),) * 3`)."""
    if isinstance(expr, TupleExpr):
        return list(expr.items)
    if isinstance(expr, OpExpr) and expr.op == "*":
        for seq, count in ((expr.left, expr.right), (expr.right, expr.left)):
            if isinstance(seq, TupleExpr) and isinstance(count, IntExpr) and 0 <= count.value <= 64:
                return list(seq.items) * count.value
    return None


def none_literal(expr: Expression) -> bool:
    return isinstance(expr, NameExpr) and expr.name == "None"
