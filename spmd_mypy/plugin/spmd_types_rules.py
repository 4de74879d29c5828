"""The keyword form of spmd_types' `spmd_typecheck`, evaluated with our rules.

    @staticmethod
    def spmd_typecheck(*, x, w, group):
        y = rules.einsum("mk,nk->mn", x, w)
        return rules.all_reduce(y, group, src=P, dst=I)

is a type-level forward: spmd_types runs it on the argument types after
`apply` and stamps what it returns on the outputs.  The checker does the same
statically, at each `Fn.apply(...)` call: the hook's parameters (forward's
names) are bound to the call's arguments, and its steps (the body as
_mypy.rule_steps reads it) are evaluated:

  rules.einsum(eq, *ops, linear_in=)  vocab.rules_einsum (S(i) labels, a
                                      sharded contraction is P: declared)
  rules.all_reduce/all_gather/reduce_scatter/all_to_all/reinterpret/convert
                                      our collective's check and result
                                      (comms.type_collective), spmd_types'
                                      defaults filled in (all_reduce src=P,
                                      all_gather src=V, reduce_scatter
                                      src=P dst=V, all_to_all V -> V)
  assert_type(p, {...})               checked, then p has that type
  rules.ignore(...)                   nothing
  `if b is None:` / `a if b is None else c`
                                      decided by the argument (None or not)

Errors are reported at the call, naming the hook's step.  The result is the
returned type (a tuple display: one type per output; None: a non-tensor
output).  A step the checker cannot read makes the result unknown (None).

In forward (rewritten by _mypy.spmd_types_regions), each returned value is
checked against the hook evaluated on forward's own parameters: typed where
the hook asserts them or forward annotates them, so forward is checked
against the types the hook gives whenever its inputs are known.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

from ..vocab.localtype import BY_LETTER, V, AxisType, LocalType, Shard
from ..vocab.opclasses import OpRuleError
from ..vocab.rules_einsum import rules_einsum
from ..vocab.spec import Spmd
from . import _mypy
from .carrier import carrier, spmd_of
from .comms import asserted_type, type_collective
from .errors import SPMD_ARG
from .spmd_types import QUIET, Env, asserted_of, axis_key, axis_type_of, without_gradient

_mypy.load("spmd_types_rules", "spmd_types_regions")  # the mypy side of this feature (_mypy/__init__.py)

_P = BY_LETTER["P"]
# op -> (src default, dst default)
_DEFAULTS: Dict[str, Tuple[Optional[AxisType], Optional[AxisType]]] = {
    "all_reduce": (_P, None), "all_gather": (V, None), "reduce_scatter": (_P, V),
    "all_to_all": (V, V), "reinterpret": (None, None), "convert": (None, None),
}


class NoneValue:
    """The Python None (an absent optional argument)."""


NONE = NoneValue()
UNREAD = "unread"  # a step the checker cannot read: the result is unknown
_ON = "on"  # the steps ran to their end without a return
Value = Union[Optional[Spmd], NoneValue, Tuple[Any, ...]]


class _At:
    """A call context for comms' checks: the `.apply` call's api and place,
    no arguments of its own (the hook's step supplies them)."""

    def __init__(self, ctx: Any, default: _mypy.Type) -> None:
        self.api = ctx.api
        self.context = ctx.context
        self.default_return_type = default
        self.args: List[Any] = []
        self.arg_names: List[Any] = []
        self.arg_types: List[Any] = []
        self.arg_kinds: List[Any] = []
        self.callee_arg_names: List[Any] = []


class Evaluation:
    """One evaluation of a hook's steps at a call."""

    def __init__(self, ctx: Any, label: str, env: Env, forward: bool = False) -> None:
        self.ctx = ctx
        self.label = label  # "Fn.apply: Fn.spmd_typecheck"
        self.env = env  # the hook's parameters -> the call's (expression, type)
        self.forward = forward  # values of a forward: no gradient
        self.values: Dict[str, Value] = {name: self._argument(typ) for name, (_, typ) in env.items()}
        self.exprs: Dict[str, _mypy.Expression] = {}

    def _argument(self, typ: _mypy.Type) -> Value:
        if _mypy.is_none_type(typ):
            return NONE
        found = spmd_of(typ)
        if found is not None and self.forward:
            found = Spmd.of(found.axes, found.spec, True, found.rest)
        return found

    # -- statements ------------------------------------------------------------------
    def run(self, steps: List[Any]) -> Any:
        """The returned value (None: a tensor of unknown type), or UNREAD."""
        found = self._steps(steps)
        return UNREAD if found is _ON else found

    def _steps(self, steps: List[Any]) -> Any:
        for kind, name, payload in steps:
            if kind == "assign":
                self.values[name] = self.expr(payload)
                self.exprs[name] = payload
            elif kind == "skip":
                self.expr(payload)
            elif kind == "return":
                return self.expr(payload)
            elif kind == "if":
                branch = payload[0] if self._is_none(*name) else payload[1]
                found = self._steps(branch)
                if found is not _ON:
                    return found
        return _ON

    def _is_none(self, name: str, is_none: bool) -> bool:
        return (self.values.get(name, NONE) is NONE) == is_none

    # -- expressions -----------------------------------------------------------------
    def expr(self, expr: _mypy.Expression) -> Any:
        name = _mypy.name_of(expr)
        if name is not None:
            return self.values.get(name, UNREAD) if name != "None" else NONE
        items = _mypy.tuple_display(expr)
        if items is not None:
            found = tuple(self.expr(i) for i in items)
            return UNREAD if UNREAD in found else found
        branch = _mypy.conditional(expr)
        if branch is not None:
            return self.expr(branch[1] if self._is_none(*branch[0]) else branch[2])
        call = _mypy.rule_call(expr)
        if call is not None:
            return self._rule(expr, *call)
        parts = _mypy.call_parts(expr)
        if parts is not None and (parts[0] or "").rpartition(".")[2] == "assert_type" and parts[1]:
            return self._assert(parts[1])
        return UNREAD

    def _rule(self, expr: _mypy.Expression, op: str, args: List[Any], kws: Dict[str, Any]) -> Any:
        if op == "ignore":
            return NONE
        if op == "einsum":
            return self._einsum(args, kws)
        if len(args) < 2:
            return UNREAD
        return self._collective(op, args[0], args[1], kws)

    def _einsum(self, args: List[Any], kws: Dict[str, Any]) -> Any:
        equation = _mypy.str_value(args[0]) if args else None
        operands = [self.expr(a) for a in args[1:]]
        linear = _mypy.int_tuple(kws["linear_in"]) if "linear_in" in kws else ()
        if equation is None or linear is None or any(o is UNREAD or o is NONE for o in operands):
            return UNREAD
        try:
            return rules_einsum(equation, operands, linear)
        except OpRuleError as e:
            self._fail(f"rules.einsum({equation!r}, ...): {e}")
            return None

    def _collective(self, op: str, x_expr: Any, axis_expr: Any, kws: Dict[str, Any]) -> Any:
        actual = self.expr(x_expr)
        if actual is UNREAD or actual is NONE:
            return UNREAD
        src_default, dst_default = _DEFAULTS[op]
        src = axis_type_of(kws["src"]) if "src" in kws else src_default
        dst = axis_type_of(kws["dst"]) if "dst" in kws else dst_default
        axis = axis_key(self.ctx, axis_expr, self.env)
        if isinstance(axis, str) and axis.startswith("!"):
            _mypy.note(self.ctx.api, f"unchecked: {self.label}'s rules.{op}: axis {_mypy.expr_text(axis_expr)} "
                       f"({axis[1:]}) is not checked statically; the result is of unknown type",
                       self.ctx.context, SPMD_ARG)
            return None
        if not isinstance(src, (LocalType, Shard)) or not isinstance(dst, (LocalType, Shard)) or axis is None:
            return UNREAD
        typ = carrier(self.ctx.api, actual) if actual is not None else _mypy.unknown_carrier(self.ctx.api)
        at = _At(self.ctx, _mypy.unknown_carrier(self.ctx.api))
        result = type_collective(at, op, (x_expr, typ), axis, src, dst, suffix=f" (rules.{op} in {self.label})")
        return spmd_of(result)

    def _assert(self, args: List[Any]) -> Any:
        """`assert_type(p, {...})`: p checked against it (named by the call's
        argument when p is a parameter), then of that type."""
        name = _mypy.name_of(args[0])
        have = self.values.get(name, UNREAD) if name is not None else UNREAD
        QUIET[0] = True
        try:
            want = asserted_of(self.ctx, list(args[1:]), self.label, self.env)
        finally:
            QUIET[0] = False
        if want is None or not (have is None or isinstance(have, Spmd)):
            return UNREAD
        bound = self.env.get(name) if name is not None else None
        expr = bound[0] if bound is not None else args[0]
        nograd = self.forward or (have is not None and have.nograd) or (
            bound is not None and without_gradient(bound[1], have))
        if nograd:
            want = Spmd.of(want.axes, want.spec, True, want.rest)
        typ = carrier(self.ctx.api, have) if have is not None else _mypy.unknown_carrier(self.ctx.api)
        return spmd_of(asserted_type(self.ctx, (expr, typ), want, label=f"{self.label} asserts on {name}"))

    def _fail(self, message: str) -> None:
        _mypy.fail(self.ctx.api, f"{self.label}: {message}", self.ctx.context, SPMD_ARG)


def output_type(ctx: Any, value: Any, default: _mypy.Type) -> Optional[_mypy.Type]:
    """The call's result type for the hook's returned value (None: not read)."""
    if value is UNREAD:
        return None
    if isinstance(value, tuple):
        items = _mypy.tuple_items(default)
        if items is None or len(items) != len(value):
            return None
        return _mypy.with_tuple_items(default, [
            _one(ctx, v, it) for v, it in zip(value, items)
        ])
    return _one(ctx, value, default)


def _one(ctx: Any, value: Any, default: _mypy.Type) -> _mypy.Type:
    if value is NONE:
        return default
    new = carrier(ctx.api, value) if isinstance(value, Spmd) else _mypy.unknown_carrier(ctx.api)
    return new if _mypy.is_any(default) else _mypy.replace_tensors(default, new)
