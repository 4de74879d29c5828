"""The semantic analyzer side: where the file being analysed is, name lookup,
aliases that hold a carrier, and where a tree writes types
(annotation_spans)."""

from __future__ import annotations

import bisect
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from mypy.nodes import (
    AssignmentStmt,
    Block,
    CallExpr,
    ClassDef,
    Decorator,
    FuncDef,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OpExpr,
    OverloadedFuncDef,
    Statement,
    StrExpr,
    TypeAlias,
    TypeAliasStmt,
)
from mypy.plugin import AnalyzeTypeContext
from mypy.types import CallableType, Instance, TupleType, Type, TypeAliasType, UnionType, get_proper_type

from .tree import sub_blocks
from .carriers import carried
from ..positions import Span


def analyzer_path(ctx: AnalyzeTypeContext) -> Optional[str]:
    sem = getattr(ctx.api, "api", None)
    mod = getattr(sem, "cur_mod_node", None)
    return getattr(mod, "path", None)


def analyzer_lookup(ctx: AnalyzeTypeContext) -> Callable[[str], Optional[str]]:
    """The fullname a name in the annotation stands for (None: not defined).

    The answers are kept while mypy's type analyzer is the same object: it
    analyses one type (a signature, an alias, an annotation) in one scope, and
    no name is bound meanwhile, so a name looked up again (Spmd, V, S in a
    signature's every annotation) resolves the same; mypy's only effect of a
    lookup, recording the module the symbol comes from, is done once."""
    api = ctx.api
    session = _SESSION
    if session[0] is not api:
        session[0], session[1] = api, _session_lookup(api.lookup_qualified, ctx.context)  # type: ignore[attr-defined]
    return session[1]


def _session_lookup(lookup_qualified: Any, context: Any) -> Callable[[str], Optional[str]]:
    """analyzer_lookup for one type analyzer.  The context is the first hook's:
    mypy reads it only to report a name not defined, which these lookups
    never ask for (suppress_errors)."""
    answers: Dict[str, Optional[str]] = {}

    def lookup(name: str) -> Optional[str]:
        full = answers.get(name, _MISSING)
        if full is _MISSING:
            sym = lookup_qualified(name, context, True)
            full = None if sym is None else getattr(sym.node, "fullname", None) or sym.fullname
            answers[name] = full
        return full

    return lookup


# (the type analyzer analyzer_lookup last answered for, its lookup); holding
# the analyzer keeps its identity from being reused
_SESSION: List[Any] = [None, None]
_MISSING: Any = object()


def type_position(ctx: AnalyzeTypeContext) -> Tuple[int, int]:
    return (ctx.type.line, ctx.type.column)


def mark_alias_target(ctx: AnalyzeTypeContext) -> None:
    """Stop mypy from treating `X = Annotated[Tensor, ...]` as an unindexed generic alias."""
    ctx.type.empty_tuple_index = True


def default_type(ctx: AnalyzeTypeContext) -> Type:
    """mypy's own analysis of the type a type-analyze hook was asked about
    (which asks for the hook again: the caller makes sure it gets none)."""
    return ctx.api.analyze_type(ctx.type)


_STDLIB_VERSIONS: List[Any] = []  # typeshed's VERSIONS, read once (stub_findable reads it too)


def _stdlib_versions() -> Any:
    if not _STDLIB_VERSIONS:
        from mypy.modulefinder import load_stdlib_py_versions

        _STDLIB_VERSIONS.append(load_stdlib_py_versions(None))
    return _STDLIB_VERSIONS[0]


def stdlib_modules() -> frozenset:
    """Top-level modules of typeshed's standard library (mypy will not let a
    user module shadow one)."""
    try:
        return frozenset(m.partition(".")[0] for m in _stdlib_versions())
    except Exception:
        return frozenset()


def module_tree(plugin: Any, module: str) -> Any:
    """The parsed tree of a module mypy loaded (its `path`), else None."""
    modules = getattr(plugin, "_modules", None) or {}
    return modules.get(module)


def alias_holding_carrier(plugin: Any, fullname: str) -> Optional[bool]:
    """Is `fullname` a non-generic type alias of a type that holds a carrier
    (`Act = Annotated[Tensor, Spmd(tp=V)]`)?  None: not known yet (its module
    is not analysed, or its target is not ready)."""
    return _is_carrier_alias(node_of(plugin, fullname))


def node_of(plugin: Any, fullname: str) -> Any:
    """The node the name `fullname` stands for, None when it is not found or
    no build has handed the plugin its modules yet (mypy's lookup would
    assert).  An unexpected error propagates to the caller's guard."""
    if getattr(plugin, "_modules", None) is None:
        return None
    return getattr(plugin.lookup_fully_qualified(fullname), "node", None)


def _is_carrier_alias(node: Any) -> Optional[bool]:
    """alias_holding_carrier for the node a name stands for."""
    if node is None:
        return None
    if not isinstance(node, TypeAlias) or node.alias_tvars:
        return False
    return _holds_carrier(node.target, 4) or None


def _holds_carrier(typ: Type, depth: int) -> bool:
    """A carrier at the top, in a Union/tuple item or a type argument (bounded:
    aliases may be recursive)."""
    if depth < 0:
        return False
    p = get_proper_type(typ)
    if carried(p) is not None:
        return True
    if isinstance(p, (UnionType, TupleType)):
        return any(_holds_carrier(t, depth - 1) for t in p.items)
    if isinstance(p, Instance):
        return any(_holds_carrier(t, depth - 1) for t in p.args)
    return False


def alias_reference(plugin: Any, ctx: AnalyzeTypeContext, fullname: str) -> Optional[Type]:
    """A bare reference to a non-generic alias that holds a carrier; None
    when `fullname` is no such alias (any more: the daemon re-analyses edits).

    An alias of a carrier itself (`Act = Annotated[Tensor, Spmd(tp=V)]`) is
    the carrier, as mypy inlines `A = Tensor`: mypy would otherwise expand
    the alias again wherever it looks at a value of its type (tens of
    thousands of times in a cold run of the bench codebase, where without
    the plugin it expands none).  Other aliases stay aliases.  Either way
    the alias is recorded as used, as mypy does, so the daemon re-checks
    the users of an edited alias."""
    node = node_of(plugin, fullname)
    if not _is_carrier_alias(node):
        return None
    used = getattr(ctx.api, "aliases_used", None)
    if isinstance(used, set):
        used.add(fullname)
    target = node.target
    if isinstance(target, Instance) and carried(target) is not None:
        return Instance(target.type, target.args, line=ctx.context.line, column=ctx.context.column)
    return TypeAliasType(node, [], line=ctx.context.line, column=ctx.context.column)


_MAY_BE_TYPE = (IndexExpr, OpExpr, StrExpr, MemberExpr, NameExpr)


def annotation_spans(tree: object, marked: Optional[Sequence[int]] = None) -> Optional[List[Span]]:
    """Where the source of `tree` writes types: parameter and return
    annotations, annotated assignments, values that may be type aliases.
    None when a position is missing (the caller then parses the file itself).
    Reads the unanalyzed types and the values as parsed, which semantic
    analysis leaves in place (the Tensor hook asks during it).  The same walk
    as annotations._annotation_roots, on mypy's nodes.

    `marked`, sorted line numbers: only statements whose lines include one are
    walked (the caller wants the types written on those lines; most function
    bodies then need no walk at all)."""
    if not isinstance(tree, MypyFile):
        return None
    out: List[Span] = []
    stack: List[Statement] = list(reversed(_wanted(tree.defs, marked)))
    while stack:
        st = stack.pop()
        if isinstance(st, Decorator):
            st = st.func
        if isinstance(st, OverloadedFuncDef):
            stack.extend(reversed([*st.items, *([st.impl] if st.impl is not None else [])]))
        elif isinstance(st, FuncDef):
            sig = st.unanalyzed_type
            if isinstance(sig, CallableType) and not _add_spans(out, [*sig.arg_types, sig.ret_type]):
                return None
            body = st.body  # _wanted_in(body, marked), inline: most bodies are skipped here
            if marked is not None and body.end_line is not None and body.line >= 1:
                i = bisect.bisect_left(marked, body.line)
                if i == len(marked) or marked[i] > body.end_line:
                    continue
            stack.extend(reversed(_wanted(body.body, marked)))
        elif isinstance(st, ClassDef):
            stack.extend(reversed(_wanted_in(st.defs, marked)))
        elif isinstance(st, AssignmentStmt):
            written: List[Any] = [st.unanalyzed_type] if st.unanalyzed_type is not None else []
            if isinstance(st.rvalue, _MAY_BE_TYPE):
                written.append(st.rvalue)
            elif isinstance(st.rvalue, CallExpr):
                written.extend(typevar_types(st.rvalue))
            if not _add_spans(out, written):
                return None
        elif isinstance(st, TypeAliasStmt):
            return None  # `type X = ...`: rare; the caller parses the file
        else:
            for block in sub_blocks(stmt=st):
                stack.extend(reversed(_wanted_in(block, marked)))
    return out


def _add_spans(out: List[Span], nodes: List[Any]) -> bool:
    """The spans of written types (a node not written, line < 1, has none);
    False when one's end is unknown."""
    for node in nodes:
        line, end_line, end_column = node.line, node.end_line, node.end_column
        if line < 1:
            continue  # not written (an unannotated parameter)
        if end_line is None or end_column is None:
            return False
        out.append((line, node.column, end_line, end_column))
    return True


def _wanted(statements: List[Statement], marked: Optional[Sequence[int]]) -> List[Statement]:
    """The statements whose lines include a marked line (all when `marked` is None)."""
    if marked is None:
        return statements
    out = []
    count = len(marked)
    for st in statements:
        first, last = st.line, st.end_line
        if last is None or first < 1 or isinstance(st, Decorator):
            if _touches(st, marked):
                out.append(st)
            continue
        i = bisect.bisect_left(marked, first)
        if i < count and marked[i] <= last:
            out.append(st)
    return out


def _wanted_in(block: Block, marked: Optional[Sequence[int]]) -> List[Statement]:
    """_wanted of a block's statements.  A block spans its statements as parsed
    (the statements the rewrite passes insert write no type): without a marked
    line in that span, none of them is walked (most function bodies)."""
    if marked is not None and block.end_line is not None and block.line >= 1:
        i = bisect.bisect_left(marked, block.line)
        if i == len(marked) or marked[i] > block.end_line:
            return []
    return _wanted(block.body, marked)


def typevar_types(value: Any) -> List[Any]:
    """The type expressions of `X = TypeVar("X", A, B, bound=C)`: the values
    and the bound (as parsed; semantic analysis leaves the call in place)."""
    if not isinstance(value, CallExpr):
        return []
    callee = value.callee
    if not (isinstance(callee, (NameExpr, MemberExpr)) and callee.name == "TypeVar"):
        return []
    return [a for i, (a, n) in enumerate(zip(value.args, value.arg_names)) if (i > 0 and n is None) or n == "bound"]


def _touches(st: Statement, marked: Sequence[int]) -> bool:
    """Whether the statement's lines include a marked line (unknown end: yes)."""
    first, last = st.line, st.end_line
    if isinstance(st, Decorator):
        first = min([first, st.func.line, *(d.line for d in st.decorators)])
        last = st.func.end_line if last is None else max(last, st.func.end_line or last)
    if last is None or first < 1:
        return True
    i = bisect.bisect_left(marked, first)
    return i < len(marked) and marked[i] <= last


def stub_findable(options: Any, module: str) -> bool:
    """Whether mypy will find `module` (mypy_path, MYPYPATH, the interpreter's
    sys.path and site-packages, as mypy searches them)."""
    from mypy.build import default_data_dir
    from mypy.modulefinder import FindModuleCache, compute_search_paths

    search = compute_search_paths([], options, default_data_dir())
    versions = _stdlib_versions() if getattr(options, "custom_typeshed_dir", None) is None else None
    finder = FindModuleCache(search, None, options, versions)
    # The finder's first lookup indexes every entry of every search directory
    # by the entry's name without its extension (a Python call per entry of
    # site-packages: most of this check's cost); the two names it looks up
    # for one top-level module are indexed here alike, filtered in C first.
    top = module.partition(".")[0]
    for lib_path in (search.package_path, search.mypy_path + search.python_path, search.typeshed_path):
        finder.initial_components[lib_path] = _top_level_index(lib_path, (top, top + "-stubs"))
    return isinstance(finder.find_module(module, fast_path=True), str)


def _top_level_index(lib_path: Tuple[str, ...], names: Tuple[str, ...]) -> Dict[str, List[str]]:
    """mypy's FindModuleCache.get_toplevel_possibilities index, for `names` only:
    name -> the directories of lib_path with an entry of that name (any extension),
    once per such entry, in order."""
    index: Dict[str, List[str]] = {name: [] for name in names}
    for folder in lib_path:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            if entry.startswith(names[0]):  # every name starts with the first
                root = os.path.splitext(entry)[0]
                if root in index:
                    index[root].append(folder)
    return index
