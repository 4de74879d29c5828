"""Rewrite pass: declared values -- returns and annotated assignments.

mypy checks `return e` and `y: T = e` itself, by equality of carriers, and
offers no plugin hook there.  Before semantic analysis the plugin rewrites
those statements of a file that uses spmd, when the declared type may hold
a tensor, into `return <RETURNED>(e)` / `y: T = <ASSIGNED>(e)`: calls of two
stub functions whose function hooks compare per axis and then hand mypy the
declared type.

Inside a function, a plain re-assignment of one name to another, `ys = xs`
with ys a local or parameter declared a list or dict that may hold tensors,
becomes `ys = <REASSIGNED>(xs)`: mypy checks it against the declared list,
which a list of carriers does not fit (lists are invariant), so the stub's
hook (declared.py) gives xs's type with its carriers erased when it fits.
The same goes for a name written under a string key, `d["k"] = xs`, and
for a name under a string key of a dict display that is a routed value
(`return {"k": xs}`, `b: Batch = {"k": xs}`): there mypy checks the name
against the item a TypedDict declares, `k: List[Tensor]`, with no hook of
its own.  The hook reads the type mypy expects from its context, so a
plain dict's value, or an item declaring an SPMD type, keeps its type.

Entry point: route_declared(statements).  Module-level assignments are left
to mypy (see _route_block).  Idempotent: a value that is a stub call already
is left as it is (mypy may reuse a parsed tree).  When the pass runs, and the
import of the stub it needs, is rewrites.py's work."""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from mypy.nodes import (
    AssignmentStmt,
    ClassDef,
    Decorator,
    DictExpr,
    Expression,
    ExpressionStmt,
    FuncDef,
    IndexExpr,
    NameExpr,
    OverloadedFuncDef,
    ReturnStmt,
    Statement,
    StrExpr,
)
from mypy.options import Options
from mypy.types import CallableType, Type, UnboundType

from .route_items import Constructors, route_constructor_keywords
from .tree import ASSIGNED, REASSIGNED, RETURNED, sub_blocks, wrap_in_phantom


_NOT_TENSOR_NAMES = frozenset(
    "None int float str bool bytes complex object Any dict list tuple set frozenset type "
    "Dict List Tuple Set FrozenSet Type Optional Union Literal Callable Iterator Iterable "
    "Generator AsyncIterator AsyncGenerator Awaitable Coroutine Sequence Mapping "
    "MutableMapping MutableSequence Self NoReturn Never TypeGuard TypeIs ClassVar Final TypeAlias "
    "typing builtins collections abc".split()
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _may_hold_tensor(annotation: Optional[Type]) -> bool:
    """Syntactic test on an unanalysed annotation: False when every name in it
    is a builtin or typing name that cannot hold a tensor."""
    if annotation is None:
        return False
    if isinstance(annotation, UnboundType):
        # its text is its name, `?` and its arguments (`Annotated?[...]`,
        # `None?`): mostly the answer without printing it
        verdict = _NAME_VERDICTS.get(annotation.name)
        if verdict is None:
            verdict = _name_verdict(annotation.name)
        if verdict == _HOLDS or (verdict == _HOLDS_NOT and not annotation.args):
            return verdict == _HOLDS
    names = set(_IDENT.findall(_text(annotation)))
    return not names <= _NOT_TENSOR_NAMES


_OPTIONS = Options()  # str(type) builds an Options per call (about 3 us)


def _text(annotation: Type) -> str:
    """str(annotation), with options built once."""
    return annotation.str_with_options(_OPTIONS)


_INVARIANT = re.compile(r"\b(List|list|Dict|dict|DefaultDict|defaultdict|OrderedDict|MutableSequence|MutableMapping)\b")


def _declares_list(annotation: Optional[Type]) -> bool:
    """Whether an unanalysed annotation is (or holds) a list or dict that may
    hold a tensor: a name declared so takes a list of carriers only relaxed."""
    return (
        annotation is not None
        and _may_hold_tensor(annotation)
        and _INVARIANT.search(_text(annotation)) is not None
    )


class _Declared:
    """A function's names declared a type: its parameters (read only when a
    re-assignment asks) and its annotated locals that may hold a tensor."""

    __slots__ = ("func", "locals")

    def __init__(self, func: FuncDef) -> None:
        self.func = func
        self.locals: Dict[str, Type] = {}

    def is_list(self, name: str) -> bool:
        annotation = self.locals.get(name)
        if annotation is None:
            sig, names = self.func.unanalyzed_type, self.func.arg_names
            if isinstance(sig, CallableType) and name in names:
                annotation = sig.arg_types[names.index(name)]
        return _declares_list(annotation)


def _reassigned_list(stmt: AssignmentStmt, declared: _Declared) -> bool:
    """`ys = xs`: one name re-assigned another, ys declared a list."""
    lvalues = stmt.lvalues
    return (
        len(lvalues) == 1
        and type(lvalues[0]) is NameExpr
        and declared.is_list(lvalues[0].name)  # type: ignore[attr-defined]
    )


def _keyed_write(stmt: AssignmentStmt) -> bool:
    """`d["k"] = xs`: a name written under a string key (a TypedDict's item)."""
    lvalues = stmt.lvalues
    return len(lvalues) == 1 and isinstance(lvalues[0], IndexExpr) and type(lvalues[0].index) is StrExpr


def _route_keyed_names(value: Expression) -> Expression:
    """`{"k": xs}`: each name under a string key of a dict display routed
    like a re-assignment (the display is checked against a declared type,
    a TypedDict's among them).  Returns `value`, changed in place."""
    if type(value) is DictExpr:
        items = value.items
        for i, (key, item) in enumerate(items):
            if type(key) is StrExpr and type(item) is NameExpr:
                items[i] = (key, wrap_in_phantom(item, REASSIGNED))
    return value


_HOLDS, _HOLDS_NOT, _READ = 1, 0, -1
_NAME_VERDICTS: Dict[str, int] = {}  # an annotation's name -> what it says (_name_verdict)


def _name_verdict(name: str) -> int:
    """_HOLDS: a name in `name` may hold a tensor; _HOLDS_NOT: none of them
    does (the answer if the annotation has no arguments); _READ: not known
    from the name alone (not plain identifiers)."""
    parts = name.split(".")
    if not name.isascii() or not all(p.isidentifier() for p in parts):
        verdict = _READ
    else:
        verdict = _HOLDS_NOT if _NOT_TENSOR_NAMES.issuperset(parts) else _HOLDS
    if len(_NAME_VERDICTS) < 4096:
        _NAME_VERDICTS[name] = verdict
    return verdict


def _route_block(
    stmts: List[Statement],
    wrap_returns: bool,
    in_function: bool,
    declared: Optional[_Declared] = None,
    known: Optional[Constructors] = None,
) -> None:
    """Wrap the returns (if `wrap_returns`) and, inside functions, the annotated
    assignments of `stmts` and the re-assignments of names the function
    (`declared`) declares a list or dict, and the keywords of a call that may
    build a TypedDict (`known`, route_items); recurse into nested statements
    and definitions.  Module-level assignments are left to mypy:
    the module's top level may be analysed before any hook could rewrite it
    (see rewrites.route_in_analyzer)."""
    for stmt in stmts:
        kind = type(stmt)
        if kind is AssignmentStmt and stmt.unanalyzed_type is None:  # type: ignore[attr-defined]
            if (
                type(stmt.rvalue) is NameExpr  # type: ignore[attr-defined]
                and declared is not None
                and (_reassigned_list(stmt, declared) or _keyed_write(stmt))  # type: ignore[arg-type]
            ):
                stmt.rvalue = wrap_in_phantom(stmt.rvalue, REASSIGNED)  # type: ignore[attr-defined]
            elif known is not None and declared is not None:
                route_constructor_keywords(stmt.rvalue, known)  # type: ignore[attr-defined]
            continue  # the most common statements: no block inside
        if kind is ExpressionStmt:
            continue
        if isinstance(stmt, ReturnStmt):
            if known is not None and in_function and stmt.expr is not None:
                route_constructor_keywords(stmt.expr, known)
            if wrap_returns and stmt.expr is not None:
                stmt.expr = wrap_in_phantom(_route_keyed_names(stmt.expr), RETURNED)
        elif isinstance(stmt, AssignmentStmt):
            if known is not None and in_function:
                route_constructor_keywords(stmt.rvalue, known)
            if (
                in_function
                and len(stmt.lvalues) == 1
                and isinstance(stmt.lvalues[0], NameExpr)
                and stmt.unanalyzed_type is not None
                and not stmt.is_final_def
                and _may_hold_tensor(stmt.unanalyzed_type)
            ):
                if declared is not None:
                    declared.locals[stmt.lvalues[0].name] = stmt.unanalyzed_type
                if type(stmt.rvalue).__name__ != "TempNode":  # `y: T` without a value
                    stmt.rvalue = wrap_in_phantom(_route_keyed_names(stmt.rvalue), ASSIGNED)
        elif isinstance(stmt, (FuncDef, Decorator, OverloadedFuncDef)):
            _route_function(stmt, known)
        elif isinstance(stmt, ClassDef):
            for inner in stmt.defs.body:  # class-body assignments are attributes
                if isinstance(inner, (FuncDef, Decorator, OverloadedFuncDef)):
                    _route_function(inner, known)
                elif isinstance(inner, ClassDef):
                    _route_block([inner], False, False, None, known)
        else:
            for block in sub_blocks(stmt):
                _route_block(block.body, wrap_returns, in_function, declared, known)


def _route_function(node: Statement, known: Optional[Constructors]) -> None:
    if isinstance(node, OverloadedFuncDef):
        parts: List[Statement] = list(node.items)
        if node.impl is not None:
            parts.append(node.impl)
        for part in parts:
            _route_function(part, known)
        return
    func = node.func if isinstance(node, Decorator) else node
    if not isinstance(func, FuncDef):
        return
    sig = func.unanalyzed_type
    ret = sig.ret_type if isinstance(sig, CallableType) else None
    wrap = _may_hold_tensor(ret) and not func.is_generator and not func.is_coroutine
    _route_block(func.body.body, wrap, True, _Declared(func), known)


def route_declared(stmts: List[Statement], known: Optional[Constructors] = None) -> None:
    """Wrap the declared values in `stmts` (a module's, or one definition),
    and the keywords of the calls to `known` that may build a TypedDict."""
    _route_block(stmts, False, False, None, known)
