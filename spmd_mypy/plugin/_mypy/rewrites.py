"""When the rewrite passes run: before semantic analysis, or from the analyzer.

route_declared_values rewrites a whole tree when mypy asks for its extra
dependencies (get_additional_deps, before analysis); route_in_analyzer does
the same from a type-analyze hook for a tree mypy parsed without asking.
Both put the stub module in the tree first, and record what they routed, so
each tree and each function is rewritten once."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from mypy.nodes import (
    GDEF,
    Decorator,
    ExpressionStmt,
    FuncDef,
    Import,
    ImportFrom,
    MypyFile,
    OverloadedFuncDef,
    Statement,
    StrExpr,
    SymbolTableNode,
)
from mypy.plugin import AnalyzeTypeContext

from .alias_values import wrap_alias_values
from .configurations import mark_configured
from .raw_writes import retype_raw_writes
from .route_declared import route_declared
from .route_items import Constructors, constructors
from .trusted_classes import retype_trusted_classes
from .tree import PHANTOM_ALIAS, PHANTOM_MODULE, functions_of

SPMD_TYPES = "spmd_types"  # the passes for its code run in trees that import it


def _imports_spmd_types(tree: MypyFile) -> bool:
    """Whether the tree imports spmd_types (`import spmd_types [as x]`, `from
    spmd_types import ...`): else its passes find nothing to rewrite, and
    their modules are not imported."""
    for imp in tree.imports:
        if isinstance(imp, Import):
            if any(name == SPMD_TYPES for name, _ in imp.ids):
                return True
        elif isinstance(imp, ImportFrom) and imp.id == SPMD_TYPES:
            return True
    return False


def _refine_asserts(tree: MypyFile, stmts: Optional[List[Statement]] = None) -> None:
    if _imports_spmd_types(tree):
        from .spmd_types_tree import refine_asserts

        refine_asserts(tree, stmts)


def _wrap_untyped_calls(tree: MypyFile, stmts: Any, untyped: Callable[[str], Optional[str]]) -> None:
    from .wrap_untyped import wrap_untyped_calls  # files that name torch.special/linalg/fft only

    wrap_untyped_calls(tree, stmts, untyped)


def _leads_module(stmt: Statement) -> bool:
    """A docstring or a __future__ import: they stay first."""
    if isinstance(stmt, ExpressionStmt):
        return isinstance(stmt.expr, StrExpr)
    return isinstance(stmt, ImportFrom) and stmt.id == "__future__"


def route_declared_values(
    tree: Any,
    untyped: Optional[Callable[[str], Optional[str]]] = None,
    raw_writes: bool = True,
    spmd_types: bool = True,
    configured: bool = True,
    trusted: bool = True,
) -> bool:
    """Rewrite returns and annotated assignments of `tree` (route_declared), and,
    given `untyped`, the calls whose callee it names (wrap_untyped_calls).
    True when it wrapped an alias's value (alias_values.py) or gave a
    trusted class its apply (trusted_classes.py): rewrites that only this
    pass makes, before analysis, so the module must be parsed anew on every
    run (the analyzer's pass comes too late for aliases and class bodies).

    The other passes run unless the caller knows from the file's bytes that
    they find nothing: `raw_writes` (the file names torch.distributed),
    `spmd_types` (it imports spmd_types), `configured` (it writes
    `configurations`), `trusted` (it writes `trusted(`: a decorated autograd
    Function, trusted_classes.py).  The import of the stub goes in first, so that a
    rewrite interrupted by an unexpected node never leaves a call to an
    unbound name."""
    if not isinstance(tree, MypyFile) or tree.is_stub or not tree.defs:
        return False
    if not _imports_phantom(tree):
        imp = Import([(PHANTOM_MODULE, PHANTOM_ALIAS)])
        at = 0
        while at < len(tree.defs) and _leads_module(tree.defs[at]):
            at += 1
        imp.set_line(tree.defs[at].line if at < len(tree.defs) else 1, 0)
        imp.is_top_level = True
        tree.defs.insert(at, imp)
        tree.imports.append(imp)
    route_declared(tree.defs, _constructors(tree))
    wrapped = wrap_alias_values(tree.defs)
    if trusted:
        wrapped = retype_trusted_classes(tree.defs) or wrapped
    if spmd_types:
        _refine_asserts(tree)
    if raw_writes:
        retype_raw_writes(tree)
    if untyped is not None:
        _wrap_untyped_calls(tree, tree, untyped)
    if configured:
        mark_configured(tree.defs)
    _ROUTED[tree.path] = (tree, None)
    return wrapped


def _imports_phantom(tree: MypyFile) -> bool:
    """Whether the module's top level imports the stub as the rewrites call it
    (every import is in tree.imports: a look there first, most trees have none)."""
    ids = (PHANTOM_MODULE, PHANTOM_ALIAS)
    for imports in (tree.imports, tree.defs):
        for d in imports:
            if isinstance(d, Import) and ids in d.ids:
                break
        else:
            return False
    return True


def routed_in_analyzer(ctx: AnalyzeTypeContext) -> bool:
    """Whether the tree being analysed is routed whole already (route_in_analyzer
    has nothing to do): the check before any other work, as hooks fire per Tensor."""
    return routed_whole(getattr(getattr(ctx.api, "api", None), "cur_mod_node", None))


def routed_whole(tree: object) -> bool:
    """Whether `tree` (analysis_owner's) is routed whole already."""
    done = _ROUTED.get(getattr(tree, "path", ""))
    return done is not None and done[0] is tree and done[1] is None


def route_in_analyzer(ctx: AnalyzeTypeContext, untyped: Optional[Callable[[str], Optional[str]]] = None) -> None:
    """The same rewrite, from a type-analyze hook during semantic analysis.

    mypy parses a cached module that turned stale (a dependency's interface
    changed) without calling get_additional_deps, so this is the only
    chance there.  Only code whose body is not analysed yet is rewritten:
    every function during the module's top-level pass (function bodies are
    analysed after it), else the function whose signature is being analysed.
    The stub module is bound in the module's names, as the import would, and
    so is spmd_types for a file that only imports names from it.
    Each tree and function is walked once (the hooks fire per Tensor)."""
    sem = getattr(ctx.api, "api", None)
    tree = getattr(sem, "cur_mod_node", None)
    if sem is None or not isinstance(tree, MypyFile) or tree.is_stub:
        return
    if routed_whole(tree):
        return  # the whole tree is routed already
    if PHANTOM_ALIAS not in tree.names:
        phantom = sem.modules.get(PHANTOM_MODULE)
        if phantom is None:
            return
        tree.names[PHANTOM_ALIAS] = SymbolTableNode(GDEF, phantom, module_public=False)
    if _imports_spmd_types(tree):
        from .spmd_types_regions import bind_alias

        bind_alias(tree, sem.modules)  # the name the spmd_types rewrites call through
    if not sem.recurse_into_functions:
        route_declared(tree.defs, _constructors(tree))
        _refine_asserts(tree)
        retype_raw_writes(tree, tree.defs)  # function bodies only: the top level is analysed
        if untyped is not None:  # function bodies only: the top level is analysed
            for func in functions_of(tree.defs):
                _wrap_untyped_calls(tree, func.body, untyped)
        mark_configured(tree.defs)
        _ROUTED[tree.path] = (tree, None)
        return
    stmt = sem.statement
    if not isinstance(stmt, (FuncDef, Decorator, OverloadedFuncDef)):
        return
    done = _ROUTED.get(tree.path)
    if done is None or done[0] is not tree:
        done = _ROUTED[tree.path] = (tree, set())
    funcs = done[1]
    if funcs is not None and id(stmt) not in funcs:
        funcs.add(id(stmt))
        route_declared([stmt], _constructors(tree))
        _refine_asserts(tree, [stmt])
        retype_raw_writes(tree, [stmt])
        if untyped is not None:
            for func in functions_of([stmt]):
                _wrap_untyped_calls(tree, func.body, untyped)
        cls = getattr(sem, "type", None)
        mark_configured([stmt], cls.defn.decorators if cls is not None else ())


# path -> (the tree last routed, None when all of it is, else the ids of the
# functions routed one by one).  Holding the tree keeps those ids valid.
_ROUTED: Dict[str, Tuple[Any, Optional[set]]] = {}

# The tree last read by route_items.constructors, and what it found: a
# stale module is routed one function at a time, each asking again.
_KNOWN: List[Tuple[Any, Optional[Constructors]]] = [(None, None)]


def _constructors(tree: MypyFile) -> Optional[Constructors]:
    last = _KNOWN[0]
    if last[0] is not tree:
        last = _KNOWN[0] = (tree, constructors(tree))
    return last[1]
