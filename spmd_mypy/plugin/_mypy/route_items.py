"""Rewrite pass, part of route_declared: a TypedDict's constructor keywords.

`Batch(tokens=views)`, Batch a TypedDict declaring `tokens: List[Tensor]`
and views a name holding carriers: mypy checks the value against the item
with no plugin hook (checkexpr's check_typeddict_call), and a list of
carriers is no list[Tensor] (lists are invariant), so plain code gets a
false [typeddict-item] error; an item declaring an SPMD type is compared
by the carriers' strings, not per axis.  Before semantic analysis nothing
says which callee is a TypedDict, so a call that may build one -- its
callee a TypedDict of the module, a capitalised name imported from a user
module whose source says TypedDict (found under the importing module's
root), or an attribute of such a module imported whole (`import pkg.types
as T`); a module importing none of these leaves the pass nothing to do,
the case of most -- that is a statement's whole value (`b = Batch(...)`, `return Batch(...)`,
`b: T = Batch(...)`) has each keyword given a bare name rewritten to
`keyword_item(views, Batch, "tokens")`: the callee copied, and the key.
Where the callee is a TypedDict the module's own source defines, every
keyword is rewritten.  The stub's hook (declared.py) reads the callee's
type: a TypedDict's, and the value is checked per axis against an item
declaring an SPMD type, or a name relaxed as a re-assignment is where the
item is a list of plain tensors; any other callee gets the value typed as
without the rewrite.  A constructor call nested in another expression
(`out.append(Batch(...))`) is not rewritten."""

from __future__ import annotations

import os
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Set, Tuple

from mypy.nodes import (
    ARG_NAMED,
    AssignmentStmt,
    CallExpr,
    ClassDef,
    Expression,
    Import,
    ImportFrom,
    MemberExpr,
    MypyFile,
    NameExpr,
    StrExpr,
)

from ..sourcefile import file_version, read_source
from .analyzer import stdlib_modules
from .tree import KEYWORD_ITEM, copied_name, wrap_in_phantom

# Top-level packages whose classes are left alone: the standard library's
# (typeshed's, as mypy reads it), and the libraries whose calls the
# plugin's own hooks read as written.
_LIBRARIES = stdlib_modules() | {
    "torch", "megatron", "spmd_mypy", "spmd_types", "spmd_phantom", "typing_extensions", "mypy_extensions"
}


class Constructors(NamedTuple):
    """The callees of a module that may build a TypedDict of the user's."""

    names: FrozenSet[str]  # TypedDicts of the module, and names imported from a module that names TypedDict
    modules: FrozenSet[str]  # names bound to such a module: `T.Batch(...)` after `import pkg.types as T`
    typeddicts: FrozenSet[str]  # the module's own TypedDicts, as written: every keyword is routed


# a module file -> (its version, whether its source says `TypedDict`)
_SAYS: Dict[str, Tuple[Tuple[int, int], bool]] = {}


def _says_typeddict(path: str) -> bool:
    version = file_version(path)
    if version is None:
        return False
    hit = _SAYS.get(path)
    if hit is None or hit[0] != version:
        hit = _SAYS[path] = (version, b"TypedDict" in read_source(path))
    return hit[1]


def _root_and_package(tree: MypyFile) -> Tuple[str, str]:
    """The directory the module's dotted name starts in, and its package."""
    parts = tree.fullname.split(".")
    init = os.path.basename(tree.path).startswith("__init__.")
    root = os.path.dirname(tree.path)
    for _ in range(len(parts) if init else len(parts) - 1):
        root = os.path.dirname(root)
    return root, tree.fullname if init else tree.fullname.rpartition(".")[0]


def _names_typeddict(where: List[Tuple[str, str]], module: str, relative: int) -> bool:
    """Whether the user module `module` (relative to the package, `relative`
    levels up) is a file under the root whose source says TypedDict.  The
    standard library's and the libraries the plugin reads are not looked at."""
    root, package = where[0]
    if relative:
        for _ in range(relative - 1):
            package = package.rpartition(".")[0]
        module = f"{package}.{module}" if package and module else package or module
    elif module.partition(".")[0] in _LIBRARIES:
        return False
    if not module:
        return False
    base = os.path.join(root, *module.split("."))
    return _says_typeddict(base + ".py") or _says_typeddict(os.path.join(base, "__init__.py"))


def _typeddict_base(stmt: ClassDef, typeddicts: Set[str]) -> bool:
    return any(isinstance(b, (NameExpr, MemberExpr)) and b.name in typeddicts for b in stmt.base_type_exprs)


def constructors(tree: MypyFile) -> Optional[Constructors]:
    """The callees that may build a TypedDict, read from the module's top
    level: its own TypedDicts (classes based on one, `X = TypedDict("X",
    ...)`), capitalised names imported from a user module whose source says
    TypedDict, user modules imported whole that say it (`import pkg.types as
    T`), and its classes based on such a name.  None when there is none
    (most modules: no file is looked at unless a capitalised name or a
    module is imported from user code)."""
    names: Set[str] = set()
    modules: Set[str] = set()
    says = False  # the module imports TypedDict itself
    where: List[Tuple[str, str]] = []  # the module's root and package, once asked
    for imp in tree.imports:
        if isinstance(imp, ImportFrom):
            if not imp.relative and imp.id.partition(".")[0] in _LIBRARIES:
                says = says or imp.id in _TYPING and any(name == "TypedDict" for name, _ in imp.names)
                continue
            capital = [alias or name for name, alias in imp.names if (alias or name)[:1].isupper()]
            if capital and _names_typeddict(where or _located(tree, where), imp.id, imp.relative):
                names.update(capital)
        elif isinstance(imp, Import):
            for module, alias in imp.ids:
                says = says or module in _TYPING
                if module.partition(".")[0] not in _LIBRARIES and _names_typeddict(where or _located(tree, where), module, 0):
                    modules.add(alias or module.partition(".")[0])
    typeddicts: Set[str] = {"TypedDict"}  # a class based on one of these is one
    if says or names:
        for stmt in tree.defs:
            if isinstance(stmt, ClassDef):
                if _typeddict_base(stmt, typeddicts):
                    typeddicts.add(stmt.name)
                elif _typeddict_base(stmt, names):
                    names.add(stmt.name)  # based on an imported class that may be a TypedDict
            elif isinstance(stmt, AssignmentStmt) and isinstance(stmt.rvalue, CallExpr):
                callee = stmt.rvalue.callee
                if isinstance(callee, (NameExpr, MemberExpr)) and callee.name == "TypedDict":
                    typeddicts.update(lv.name for lv in stmt.lvalues if isinstance(lv, NameExpr))
    typeddicts.discard("TypedDict")
    if not names and not modules and not typeddicts:
        return None
    return Constructors(frozenset(names | typeddicts), frozenset(modules), frozenset(typeddicts))


_TYPING = ("typing", "typing_extensions")


def _located(tree: MypyFile, where: List[Tuple[str, str]]) -> List[Tuple[str, str]]:
    where.append(_root_and_package(tree))
    return where


def _may_construct(callee: Expression, known: Constructors) -> bool:
    if type(callee) is NameExpr:
        return callee.name in known.names
    if type(callee) is MemberExpr and callee.name[:1].isupper():
        left = callee.expr
        while type(left) is MemberExpr:
            left = left.expr
        return type(left) is NameExpr and left.name in known.modules
    return False


def route_constructor_keywords(value: Expression, known: Constructors) -> None:
    """`Batch(tokens=xs, ...)`, a call that may build a TypedDict: each
    keyword given a bare name becomes `keyword_item(xs, Batch, "tokens")`, in
    place; every keyword where the callee is the module's own TypedDict
    (a value that is no name is typed in mypy's context otherwise)."""
    if type(value) is not CallExpr or ARG_NAMED not in value.arg_kinds or not _may_construct(value.callee, known):
        return
    callee_name = value.callee.name if type(value.callee) is NameExpr else None
    every = callee_name is not None and callee_name in known.typeddicts
    args, names = value.args, value.arg_names
    for i, kind in enumerate(value.arg_kinds):
        name = names[i]
        if kind is ARG_NAMED and name is not None and (every or type(args[i]) is NameExpr):
            callee = copied_name(value.callee)
            if callee is not None:
                key = StrExpr(name)
                key.set_line(args[i])
                args[i] = wrap_in_phantom(args[i], KEYWORD_ITEM, callee, key)
