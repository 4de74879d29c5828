"""The share of typed tensor expressions per file, and the unchecked calls (issue 13, item 3);
`check`, the same in-process run for the communication report (spmd_mypy/comms.py).

It uses mypy's build API, parse tree and types directly, so it lives under
plugin/_mypy.  The plugin never imports this module; `python -m
spmd_mypy.coverage PATHS` does.

mypy runs in process with the plugin (the user's config if mypy finds one,
else the plugin with allow_redefinition), `export_types` on and the trees
kept; the files asked for are passed with their text, so they are always
checked again (the cache still serves torch).  Then, per file, every
expression mypy typed is classified:

  - typed tensor: a carrier with a known SPMD type, or a Union (Optional) whose
    tensor alternatives all are;
  - untyped tensor: a plain Tensor (Parameter, ...), `SpmdTensor[Any]`, a
    Union with such an alternative, or `Any` produced by a call that takes a
    tensor argument (a method of a tensor included);
  - anything else does not count.

Not counted: assignment targets (the value assigned is counted), and the
plugin's own rewrites (`spmd_phantom.returned/assigned(e)` count as `e`;
`spmd_phantom.untyped(e)` counts as itself, `e` not; `x =
spmd_phantom.raw_write(x, call)` counts as `call`).

An unchecked call is a call with a typed tensor argument (or a method call on
a typed tensor) whose result is an untyped tensor or Any: an unannotated
autograd Function's `.apply`, an unannotated module or third-party function,
an op the rules cannot type.  So is a call that returns a tuple or list of
untyped tensors, or takes a typed tensor inside a list or tuple:
torch.distributed.nn.functional.all_gather over a group that names no axis.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

from mypy import build
from mypy.config_parser import parse_config_file
from mypy.find_sources import create_source_list
from mypy.modulefinder import BuildSource
from mypy.nodes import (
    Argument,
    AssignmentStmt,
    CallExpr,
    Expression,
    ForStmt,
    FuncItem,
    ListExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OperatorAssignmentStmt,
    RefExpr,
    Statement,
    TupleExpr,
)
from mypy.options import Options
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    NoneType,
    TupleType,
    Type,
    UnionType,
    get_proper_type,
)

from .tree import child_attrs

__all__ = ["FileShare", "UncheckedCall", "measure", "build_options", "check"]

CARRIER = "spmd_phantom.SpmdTensor"
TENSOR = "torch._tensor.Tensor"
PLUGIN = "spmd_mypy.plugin"
_REWRITES = ("spmd_phantom.returned", "spmd_phantom.assigned", "spmd_phantom.reassigned")
_UNTYPED_WRAPPER = "spmd_phantom.untyped"
_KEYWORD_ITEM = "spmd_phantom.keyword_item"  # `Batch(tokens=keyword_item(xs, Batch))`: counts as xs
_RAW_WRITE = "spmd_phantom.raw_write"  # `x = raw_write(x, <raw collective>)`: counts as the call

TYPED, UNTYPED, OTHER = "typed", "untyped", "other"
_SEQUENCES = ("builtins.tuple", "builtins.list")
# torch declares these `-> Any` although they return no tensor.
_NO_TENSOR_METHODS = frozenset({"backward", "register_hook"})
_NO_TENSOR_MODULES = ("torch.distributed.", "torch.autograd.backward")
# ... but for its autograd-aware collectives, which return tensors (plugin/dist_nn.py).
_TENSOR_COLLECTIVES = "torch.distributed.nn.functional."


@dataclass(frozen=True)
class UncheckedCall:
    line: int
    callee: str
    result: str  # the result type as mypy prints it
    hint: str = ""  # what would type it, where the callee's type says


# A callee typed Callable (a config's activation, a table of functions): no
# definition says what it computes.
CALLABLE_VALUE_HINT = "a Callable value: declare it spmd.Activation if it holds an elementwise activation"


def _hint(call: CallExpr, types: Dict[Expression, Type]) -> str:
    callee = get_proper_type(types.get(call.callee))
    if isinstance(callee, CallableType) and callee.definition is None:
        return CALLABLE_VALUE_HINT
    return ""


@dataclass
class FileShare:
    path: str
    typed: int = 0
    untyped: int = 0
    untyped_lines: List[int] = field(default_factory=list)
    unchecked: List[UncheckedCall] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.typed + self.untyped

    @property
    def share(self) -> Optional[float]:
        return self.typed / self.total if self.total else None


def _tensor_kind(typ: Optional[Type]) -> str:
    """TYPED / UNTYPED for a tensor type, OTHER otherwise (Any included: see _classify)."""
    p = get_proper_type(typ)
    if isinstance(p, Instance):
        if p.type.fullname == CARRIER:
            arg = get_proper_type(p.args[0]) if p.args else None
            return TYPED if isinstance(arg, LiteralType) and isinstance(arg.value, str) else UNTYPED
        return UNTYPED if p.type.has_base(TENSOR) else OTHER
    if isinstance(p, UnionType):
        kinds = {_tensor_kind(item) for item in p.items if not isinstance(get_proper_type(item), NoneType)}
        kinds.discard(OTHER)
        if not kinds:
            return OTHER
        return TYPED if kinds == {TYPED} else UNTYPED
    return OTHER


def _callee_name(node: Expression) -> str:
    if isinstance(node, NameExpr):
        return node.name
    if isinstance(node, MemberExpr):
        return f"{_callee_name(node.expr)}.{node.name}"
    if isinstance(node, CallExpr):
        return f"{_callee_name(node.callee)}(...)"
    return type(node).__name__


def _fullname(node: Expression) -> str:
    return node.fullname if isinstance(node, RefExpr) else ""


def _checked_copy(fn: FuncItem) -> FuncItem:
    """The function whose body mypy typed last: fn, or its last expanded copy."""
    copies = getattr(fn, "expanded", None) or [fn]
    return copies[-1]


class _Collector:
    """Every expression of a file, in source order; assignment targets and rewrites set aside.

    A generic walk over the nodes' attributes: mypy's traverser classes are
    compiled and cannot be subclassed from interpreted code.
    """

    def __init__(self) -> None:
        self.expressions: List[Expression] = []
        self.skip: Set[int] = set()
        self._seen: Set[int] = set()

    def walk(self, node: object) -> None:
        if isinstance(node, (list, tuple)):
            for item in node:
                self.walk(item)
            return
        if not isinstance(node, (Statement, Expression, Argument, MypyFile)) or id(node) in self._seen:
            return
        self._seen.add(id(node))
        if isinstance(node, Expression):
            self._record(node)
        elif isinstance(node, AssignmentStmt):
            self.skip.update(id(lv) for lv in node.lvalues)
        elif isinstance(node, OperatorAssignmentStmt):
            self.skip.add(id(node.lvalue))
        elif isinstance(node, ForStmt):
            self.skip.add(id(node.index))
        elif isinstance(node, FuncItem) and _checked_copy(node) is not node:
            # A function generic in a type variable with values: mypy typed
            # its copies (one per value), not its own body; measure the last.
            self.walk(_checked_copy(node))
            return
        for name in child_attrs(type(node)):
            self.walk(getattr(node, name, None))

    def _record(self, o: Expression) -> None:
        self.expressions.append(o)
        if isinstance(o, CallExpr):
            name = _fullname(o.callee)
            if name in _REWRITES:
                self.skip.add(id(o))
                self.skip.add(id(o.callee))
            elif name == _RAW_WRITE:
                # The wrapper and the name it repeats are the rewrite's; the
                # collective's call and arguments count as written.
                self.skip.update((id(o), id(o.callee), *(id(a) for a in o.args[:1])))
            elif name == _UNTYPED_WRAPPER:
                self.skip.update(id(a) for a in o.args)
                self.skip.add(id(o.callee))
            elif name == _KEYWORD_ITEM:
                self.skip.update((id(o), id(o.callee), *(id(a) for a in o.args[1:])))


def _tensor_args(call: CallExpr, types: Dict[Expression, Type]) -> List[str]:
    """The kinds of the tensor arguments of a call (the receiver of a method call included)."""
    operands = list(call.args)
    if isinstance(call.callee, MemberExpr):
        operands.append(call.callee.expr)
    return [_tensor_kind(types.get(a)) for a in operands]


def _held_kind(typ: Optional[Type]) -> str:
    """_tensor_kind of a tensor, or of the tensors a tuple or list holds."""
    p = get_proper_type(typ)
    if isinstance(p, TupleType) or (isinstance(p, Instance) and p.type.fullname in _SEQUENCES):
        kinds = {_held_kind(t) for t in (p.items if isinstance(p, TupleType) else p.args)} - {OTHER}
        return OTHER if not kinds else TYPED if kinds == {TYPED} else UNTYPED
    return _tensor_kind(typ)


def _operand_kind(expr: Expression, types: Dict[Expression, Type]) -> str:
    """_held_kind of an operand; of a list or tuple display, of its items
    (passed where no type is expected, mypy types `[x, y]` list[Any])."""
    if isinstance(expr, (ListExpr, TupleExpr)):
        kinds = {_operand_kind(item, types) for item in expr.items} - {OTHER}
        return OTHER if not kinds else TYPED if kinds == {TYPED} else UNTYPED
    return _held_kind(types.get(expr))


def _unchecked_call(call: CallExpr, types: Dict[Expression, Type]) -> bool:
    """A call that returns untyped tensors (a tensor, or a tuple or list of
    them) from typed ones (a tensor argument or receiver, or a list of them)."""
    operands = list(call.args) + ([call.callee.expr] if isinstance(call.callee, MemberExpr) else [])
    return _held_kind(types.get(call)) == UNTYPED and any(_operand_kind(a, types) == TYPED for a in operands)


def _classify(node: Expression, types: Dict[Expression, Type]) -> str:
    typ = types.get(node)
    if typ is None:
        return OTHER
    kind = _tensor_kind(typ)
    if kind == OTHER and isinstance(get_proper_type(typ), AnyType) and isinstance(node, CallExpr):
        if _may_return_tensor(node, types) and set(_tensor_args(node, types)) - {OTHER}:
            return UNTYPED
    return kind


def _may_return_tensor(call: CallExpr, types: Dict[Expression, Type]) -> bool:
    """False when the callee's declared return is known and holds no tensor, or is one of
    torch's calls typed `-> Any` that return no tensor (`Tensor.backward`, the raw
    torch.distributed calls)."""
    if isinstance(call.callee, MemberExpr) and call.callee.name in _NO_TENSOR_METHODS:
        return False
    name = _fullname(call.callee)
    if name.startswith(_NO_TENSOR_MODULES) and not name.startswith(_TENSOR_COLLECTIVES):
        return False
    callee = get_proper_type(types.get(call.callee))
    if isinstance(callee, CallableType):
        ret = get_proper_type(callee.ret_type)
        return isinstance(ret, AnyType) or _tensor_kind(ret) != OTHER
    return True


def measure_tree(tree: MypyFile, types: Dict[Expression, Type], path: str) -> FileShare:
    collector = _Collector()
    collector.walk(tree)
    share = FileShare(path)
    for node in collector.expressions:
        if id(node) in collector.skip or node.line < 1:
            continue
        kind = _classify(node, types)
        if kind == TYPED:
            share.typed += 1
        elif kind == UNTYPED:
            share.untyped += 1
            share.untyped_lines.append(node.line)
            if isinstance(node, CallExpr) and (TYPED in _tensor_args(node, types) or _unchecked_call(node, types)):
                share.unchecked.append(_unchecked(node, types))
        elif isinstance(node, CallExpr) and _unchecked_call(node, types):
            share.unchecked.append(_unchecked(node, types))
    return share


def _unchecked(call: CallExpr, types: Dict[Expression, Type]) -> UncheckedCall:
    return UncheckedCall(call.line, _callee_name(call.callee), str(types[call]), _hint(call, types))


def _stubs_dir() -> Optional[str]:
    """stubs/torch-spmd of a checkout (an installed package puts spmd_phantom on the path)."""
    candidate = Path(__file__).resolve().parents[2] / "stubs" / "torch-spmd"
    return str(candidate) if candidate.is_dir() else None


def build_options(config_file: Optional[str] = None) -> Options:
    """The user's mypy config (mypy's own search when config_file is None), with the plugin."""
    options = Options()
    parse_config_file(options, lambda: None, config_file, sys.stdout, sys.stderr)
    if PLUGIN not in options.plugins:
        options.plugins = [*options.plugins, PLUGIN]
    if options.config_file is None:
        options.allow_redefinition = True
    stubs = _stubs_dir()
    if stubs is not None and stubs not in options.mypy_path:
        options.mypy_path = [*options.mypy_path, stubs]
    options.export_types = True
    options.preserve_asts = True
    return options


def _build(paths: Sequence[str], options: Options) -> Tuple[build.BuildResult, List[BuildSource]]:
    """mypy with the plugin on `paths`, passed with their text so they are always checked again."""
    sources = []
    for src in create_source_list(list(paths), options):
        text = Path(src.path).read_text() if src.path else None
        sources.append(BuildSource(src.path, src.module, text, src.base_dir))
    return build.build(sources, options), sources


def check(paths: Sequence[str], config_file: Optional[str] = None) -> List[str]:
    """Check `paths` with the plugin (for the communication report, whose facts the
    plugin records while checking); mypy's messages."""
    options = build_options(config_file)
    options.export_types = options.preserve_asts = False
    return _build(paths, options)[0].errors


def measure(paths: Sequence[str], options: Optional[Options] = None) -> Tuple[List[FileShare], List[str]]:
    """Per checked file (in path order) its share; and mypy's messages."""
    options = build_options() if options is None else options
    result, sources = _build(paths, options)
    wanted = {os.path.abspath(s.path) for s in sources if s.path}
    shares = []
    for state in result.graph.values():
        if state.path and os.path.abspath(state.path) in wanted and state.tree is not None:
            shares.append(measure_tree(state.tree, result.types, state.path))
    shares.sort(key=lambda s: s.path)
    return shares, result.errors
