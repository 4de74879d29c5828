"""Inferring an op's SPMD type from its operands' (the rules of the op tables).

The op's class comes from vocab/opclasses.py (a table row, never a rule per
op), the per-axis result from `combine`.  Tensor arguments are operands;
Python numbers are operands only for arithmetic (`x + 1`), elsewhere they
are dims and sizes.  A plain (unannotated) tensor operand makes the result
unknown: no error, no type.  A rule broken on an axis is reported with the
call that fixes it, and the result typed as the fix would type it.  The
hooks that ask are in ops.py (and global_mode.py for the axes that stay
local in global code).
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ..vocab.collectives import fix_call
from ..vocab.localtype import I, P, R, V, AxisType, LocalType, Shard, local_kind
from ..vocab.opclasses import (
    DIVIDE,
    FACTORY,
    LINEAR,
    NONLINEAR,
    WITHOUT_OPERANDS,
    AFFINE,
    NO_GRAD_RESULTS,
    RANDOM,
    REFLECTED,
    SCALAR,
    SELECTION,
    OpRuleError,
    combine,
    combine_affine,
    synced_class,
)
from ..vocab.opnames import display_name
from ..vocab.spec import Spmd
from . import _mypy, contraction
from .answers import depends_on_site
from .callsite import RankText, Text, in_function_body, operands, receiver_text, selection
from .carrier import spmd_of
from .errors import SPMD_OP

Operand = Tuple[Text, Union[Spmd, None, object]]  # (source text, Spmd | None (plain) | SCALAR)

# Axes whose ranks draw the same random numbers (the synced_rng setting).
_SYNCED_RNG: Tuple[str, ...] = ()


def configure(synced_rng: Tuple[str, ...]) -> None:
    global _SYNCED_RNG
    if synced_rng != _SYNCED_RNG:
        _SYNCED_RNG = synced_rng
        _INFERRED.clear()  # inferred under the other setting
        _FACTORIES.clear()

def _axis_operand(op: object, axis: str) -> object:
    return op.axis_type(axis) if isinstance(op, Spmd) else op


def _fix(
    err: OpRuleError, axis: str, on_axis: List[Tuple[Text, object]], nograd: Sequence[bool], cls: str
) -> Tuple[str, List[object]]:
    """(the calls that fix the offending operands, the operands' types with
    them applied).  Invariant operands are made R (convert(I -> R),
    Megatron's copy-to-region), every one of them; a Partial one is reduced
    to I when the other operands are Invariant (it then meets them as I),
    else to R; a per-rank count without gradient that divides a Partial
    value is summed instead (the loss normalised by the global count)."""
    types = [t for _, t in on_axis]
    if err.code == "invariant-mixed":
        bad = [k for k, t in enumerate(types) if t is I and not nograd[k]] or [
            k for k, t in enumerate(types) if t is I
        ]
        calls = [fix_call(I, R, axis, str(on_axis[k][0])) or "" for k in bad]
        return " and ".join(c for c in calls if c), [R if k in bad else t for k, t in enumerate(types)]
    count = next(
        (k for k, t in enumerate(types) if k > 0 and _kind_of(t) == "V" and nograd[k]), None
    ) if cls == DIVIDE and types and types[0] is P else None
    if count is not None:
        name = on_axis[count][0]
        summed = f"spmd.all_reduce(spmd.reinterpret({name}, {axis!r}, src=V, dst=P), {axis!r}, src=P, dst=R)"
        return summed, [R if k == count else t for k, t in enumerate(types)]
    partial = [k for k, t in enumerate(types) if t is P]
    if not partial:
        return "", types
    if err.code == "partial-product":
        # a product is linear in one factor: the others reduced suffice (a
        # quotient keeps its numerator)
        partial = [k for k in partial if k != 0] if cls == DIVIDE else partial[:-1]
    others = [_kind_of(t) for k, t in enumerate(types) if k not in partial and isinstance(t, (LocalType, Shard))]
    want = I if others and all(k == "I" for k in others) else R
    fixed = [want if k in partial else t for k, t in enumerate(types)]
    if cls == LINEAR and err.code in ("partial-mixed", "partial-scalar"):
        # `out + bias` before the reduction: the code after it reduces `out`
        # as the pending sum it expects, so it goes on as P.
        fixed = [P if isinstance(t, (LocalType, Shard)) else t for t in types if t is not SCALAR]
    # every Partial operand is reduced (one left P is still mixed, or in the nonlinear op)
    calls = dict.fromkeys(fix_call(P, want, axis, str(on_axis[k][0])) or "" for k in partial)  # p twice: once
    return " and ".join(c for c in calls if c), fixed


def _by_rank(err: OpRuleError, axis: str, on_axis: List[Tuple[Text, object]]) -> str:
    """The rule's consequence, said of a rank number where one is the V operand."""
    rank = next((text for text, t in on_axis if isinstance(text, RankText) and t is V), None)
    if rank is None or err.code not in ("partial-mixed", "invariant-mixed"):
        return str(err)
    if err.code == "partial-mixed":
        return (f"{rank} differs from rank to rank on {axis!r}: each rank would apply its own value to its "
                f"addend of the pending sum, and a piece of each addend is no piece of the sum")
    return (f"{rank} differs from rank to rank on {axis!r}: the result differs by rank while the Invariant "
            f"operand's gradient would not be summed over the axis")


def _declared_partial(ctx: Any, axis: str) -> bool:
    """The op's value goes where P is declared on `axis` (a return or an annotated assignment)."""
    depends_on_site()
    declared = _mypy.type_context(ctx.api)
    spmd = spmd_of(declared) if declared is not None else None
    return spmd is not None and spmd.axis_type(axis) is P


def _kind_of(t: object) -> Optional[str]:
    """local_kind of an operand's type on one axis (None for a scalar or unknown)."""
    return local_kind(t) if isinstance(t, (LocalType, Shard)) else None


def _affine_roles(ctx: Any, name: str, receiver: bool) -> Optional[Tuple[List[Operand], Optional[Operand]]]:
    """(product operands, bias operand) of an affine op, from parameter names."""
    product_names, bias_name = AFFINE[name]
    by_name: dict = {}
    if receiver:
        by_name["input"] = (receiver_text(ctx), spmd_of(ctx.type))
    for formal, exprs, types in _mypy.formal_groups(ctx):
        if formal is not None and exprs and _mypy.is_tensor(types[0]):
            by_name[formal] = (_mypy.expr_text(exprs[0]), spmd_of(types[0]))
    if not all(n in by_name for n in product_names):
        return None
    return [by_name[n] for n in product_names], by_name.get(bias_name)


def infer(
    ctx: Any,
    name: str,
    cls: str,
    namespace: str,
    receiver: bool,
    project: Optional[Callable[[Spmd], Spmd]] = None,
) -> Optional[Spmd]:
    """The result's SPMD type, or None when unknown or typed differently per
    alternative of a Union operand (see infer_all)."""
    result = infer_all(ctx, name, cls, namespace, receiver, project)
    return None if isinstance(result, Alternatives) else result


def infer_all(
    ctx: Any,
    name: str,
    cls: str,
    namespace: str,
    receiver: bool,
    project: Optional[Callable[[Spmd], Spmd]] = None,
) -> Union[None, Spmd, "Alternatives"]:
    """The result's SPMD type (None: unknown), reporting rule violations.

    An operand whose type is a Union (a value from two branches) is checked
    for each alternative; the result is typed only if all alternatives agree.
    `project` maps every operand's type first (global mode: keep the axes
    that stay local).
    """
    roles = _affine_roles(ctx, name, receiver) if name in AFFINE else None
    if roles is not None:
        product, bias = roles
        single = list(product) + ([bias] if bias is not None else [])
        options: List[Tuple[Text, List[object]]] = [(t, [o]) for t, o in single]
        cls, n_product = "affine", len(product)
    else:
        selected = None
        if cls == SELECTION:
            cls, selected = selection(ctx, name, receiver)
        n_product = 0
        options = (operands(ctx, name, receiver, lazy=True, zeros=cls == LINEAR) if selected is None
                   else [(t, c) for t, c in selected])
    if project is not None:
        options = [(t, [project(o) if isinstance(o, Spmd) else o for o in c]) for t, c in options]
    if all(len(c) == 1 for _, c in options):  # no Union operand: one inference
        return _infer_one(ctx, name, cls, namespace, [(t, c[0]) for t, c in options], n_product)
    # The same name written twice (h + h) is one value: it takes one alternative.
    keys = list(dict.fromkeys(text for text, c in options if len(c) > 1))
    choices = {text: c for text, c in options if len(c) > 1}
    total = 1
    for k in keys:
        total *= len(choices[k])
    if total > MAX_COMBINATIONS:
        _too_many_combinations(ctx, name, namespace, keys, total)
        return None
    # Every combination is checked; a broken rule is reported once per axis
    # (the first combination that breaks it), not once per combination.
    first_error: Dict[str, str] = {}
    results = []
    for combo in itertools.product(*[choices[k] for k in keys]):
        pick = dict(zip(keys, combo))
        ops = [(text, pick[text] if text in pick else c[0]) for text, c in options]
        results.append(_infer_one(ctx, name, cls, namespace, ops, n_product, first_error.setdefault))
    for message in first_error.values():
        found, sep, hint = message.partition(". Hint: ")
        where = f" (in one of the {total} combinations of the operands' Union alternatives)" if len(keys) > 1 else ""
        # The fix belongs in the branch that gives these types, not here,
        # where it would break the others.
        hint = f". Hint: in the branch that gives these types, {hint}" if sep else ""
        _report_op_error(ctx, name, found + where + hint)
    if any(r != results[0] for r in results):
        if all(r is not None for r in results):
            # Alternatives typed differently: the result is their Union.
            return Alternatives(dict.fromkeys(r for r in results if r is not None))
        return None
    return results[0]


# Operands from branches (Union types) are checked in every combination of
# their alternatives up to this many; beyond it the op is an error asking the
# user to narrow them.
MAX_COMBINATIONS = 4096


def _too_many_combinations(ctx: Any, name: str, namespace: str, keys: List[Text], total: int) -> None:
    _report_op_error(
        ctx,
        name,
        f"{display_name(name, namespace)}: the Union types of {', '.join(map(str, keys))} give {total} combinations, "
        f"more than the {MAX_COMBINATIONS} the checker enumerates, so the op is not checked. "
        f"Hint: narrow each with spmd.assert_spmd(x, Spmd(...)) before the op",
    )


def _report_op_error(ctx: Any, name: str, message: str) -> None:
    # mypy tries an operator's dunders with errors filtered (`p + 1` runs
    # p.__add__, then int.__radd__ if that reported anything; `1.0 + p` runs
    # p.__radd__): an error seen there makes mypy give up on the dunder, so
    # the result, which the rules typed as the fix would, became Any.
    operator = name in REFLECTED or _mypy.is_operator(ctx.context)
    fail = _mypy.fail_past_filters if operator else _mypy.fail
    fail(ctx.api, message, ctx.context, SPMD_OP)


class Alternatives(Tuple[Spmd, ...]):
    """The result of an op on a value from two branches, one type per branch."""


# (name, class, namespace, operand types, n_product) -> the result of an
# inference that reported no error: the same op on the same types is typed
# again thousands of times in a codebase, and the text of the operands only
# matters for error messages.
_INFERRED: Dict[Tuple[object, ...], Optional[Spmd]] = {}
_MAX_INFERRED = 65536


Report = Callable[[str, str], object]  # (axis, message): collects instead of reporting


def _infer_one(
    ctx: Any, name: str, cls: str, namespace: str, ops: List[Operand], n_product: int,
    report: Optional[Report] = None,
) -> Optional[Spmd]:
    if not ops and name in WITHOUT_OPERANDS and namespace == "torch":
        # torch.zeros(n), torch.randn(n): one type on every axis (a draw is R
        # on the axes whose ranks draw alike: the synced_rng setting).
        return without_operands(name, asks_for_grad(ctx))
    if not any(isinstance(o, Spmd) for _, o in ops):
        return None
    if any(o is None for _, o in ops):
        # A plain tensor operand: gradual typing, the result is unknown.  But a
        # nonlinear or random op is wrong on a P operand whatever the others
        # are (`F.layer_norm(x, shape, weight)` with an unannotated weight), so
        # its typed operands are checked alone.  So is an affine op's product
        # when only the added term is plain (`F.linear(x, w, b)`, b
        # unannotated): no bias makes a broken product right.
        if cls in (NONLINEAR, RANDOM):
            _infer_typed(ctx, name, cls, namespace, [op for op in ops if op[1] is not None], n_product, report)
        elif cls == "affine" and all(o is not None for _, o in ops[:n_product]):
            product = contraction.site(ctx, name) if contraction.is_product(name) else None
            _infer_typed(ctx, name, cls, namespace, ops[:n_product], n_product, report, product)
        return None
    if cls == FACTORY:
        return _infer_typed(ctx, name, cls, namespace, ops, n_product, report)[0]
    product = contraction.site(ctx, name) if contraction.is_product(name) else None
    key = (name, cls, namespace, n_product, tuple(o for _, o in ops), product and product.equation)
    if key in _INFERRED:
        return _INFERRED[key]
    result, failed = _infer_typed(ctx, name, cls, namespace, ops, n_product, report, product)
    # a result that the declared partial axes decided holds for this call only
    if not failed and not (product is not None and product.consulted) and len(_INFERRED) < _MAX_INFERRED:
        _INFERRED[key] = result
    return result


def infer_operands(ctx: Any, name: str, cls: str, namespace: str, ops: List[Operand]) -> Optional[Spmd]:
    """The result of op `name` of class `cls` on operands given as (text,
    type), reporting a broken rule at the call: for hooks that know an op's
    operands where the call does not show them (a tuple's element picked by
    a rank, plugin/ranks.py)."""
    return _infer_one(ctx, name, cls, namespace, ops, 0)


def without_operands(name: str, asks_for_grad: bool) -> Spmd:
    """The result of a torch function of WITHOUT_OPERANDS called without
    tensor operands (torch.zeros(n), torch.randn(n)): one type on every axis,
    a draw R on the axes whose ranks draw alike (the synced_rng setting)."""
    every = WITHOUT_OPERANDS[name]
    synced = {a: R for a in _SYNCED_RNG} if every is V else {}
    return Spmd.of(synced, None, not asks_for_grad, every)


# (name, asks for a gradient) -> without_operands' canonical string
_FACTORIES: Dict[Tuple[str, bool], str] = {}


def factory_canonical(name: str, asks_for_grad: bool) -> str:
    """without_operands(name, asks_for_grad).canonical(), built once per
    question (the factory lane asks it at every torch.empty / zeros call)."""
    found = _FACTORIES.get((name, asks_for_grad))
    if found is None:
        found = _FACTORIES[(name, asks_for_grad)] = without_operands(name, asks_for_grad).canonical()
    return found


def asks_for_grad(ctx: Any) -> bool:
    """requires_grad= passed and not literally False."""
    return any(not _mypy.is_false(expr) for expr, _ in _mypy.formal_args(ctx, "requires_grad"))


def typed_quietly(cls: str, values: Sequence[object], no_grad_result: bool) -> Optional[Spmd]:
    """The result of an op of class `cls` that is no product, factory, random
    or assigning op, on operands all typed (Spmd or SCALAR, in source order;
    `no_grad_result`: the op's result carries no gradient whatever its
    operands), when no rule is broken and the result has a type; None
    otherwise (the caller then takes the general path, infer_all, which
    reports the broken rule with the operands named).

    The quick lane's question (op_lane.py): the same rules and the same
    result as _infer_typed, in the fewest steps; reads nothing of the call,
    so its answer holds for every call that asks it.
    tests/checker/test_op_lane.py holds the two equal."""
    spmds = [v for v in values if isinstance(v, Spmd)]
    first = spmds[0].axes
    if all(s.axes.keys() == first.keys() for s in spmds):
        axes: Iterable[str] = first
    else:
        axes = sorted({a for s in spmds for a in s.axes})
    nograd = tuple(v.nograd if isinstance(v, Spmd) else True for v in values)
    items = []
    try:
        for axis in axes:
            t = _combine(cls, [v.axis_type(axis) if isinstance(v, Spmd) else v for v in values], nograd, 0)  # type: ignore[arg-type]
            if t is not None:
                items.append((axis, t))
    except OpRuleError:
        return None
    rest_types = [(R if v.spec is not None else v.rest) if isinstance(v, Spmd) else v for v in values]
    rest = None if any(t is None for t in rest_types) else _combined_or_none(cls, rest_types, nograd, 0)  # type: ignore[arg-type]
    if not items and rest is None:
        return None
    return Spmd.of_sorted(tuple(items), all(s.nograd for s in spmds) or no_grad_result, rest)


def _infer_typed(
    ctx: Any, name: str, cls: str, namespace: str, ops: List[Operand], n_product: int,
    report: Optional[Report] = None, product: Optional[contraction.Site] = None,
) -> Tuple[Optional[Spmd], bool]:
    """_infer_one on operands that are all typed: (result, whether a rule error was
    found).  Errors go to `report` when given, else to mypy.  `product`: the
    call's site when the op contracts dims (contraction.py)."""
    failed = False
    spmds = [o for _, o in ops if isinstance(o, Spmd)]
    # one operand (most ops), or several over the same axes: its axes, already sorted
    axes = list(spmds[0].axes) if all(s.axes.keys() == spmds[0].axes.keys() for s in spmds) else sorted(
        {a for s in spmds for a in s.axes}
    )
    nograd = [o.nograd if isinstance(o, Spmd) else True for _, o in ops]
    result: dict = {}
    for axis in axes:
        types = [_axis_operand(o, axis) for _, o in ops]
        axis_cls = synced_class(name) if cls == RANDOM and axis in _SYNCED_RNG else cls
        try:
            t = _combine(axis_cls, types, nograd, n_product)
        except OpRuleError as err:
            on_axis = [(text, t) for (text, _), t in zip(ops, types)]
            if err.code == "invariant-mixed" and in_function_body(ctx.api, ctx.context):
                # Nothing records a gradient in an autograd Function's forward
                # and backward: the rule guards none there.
                t = _combined_or_none(axis_cls, [t for _, t in on_axis], [True] * len(nograd), n_product)
                if t is not None:
                    result[axis] = t
                failed = True  # not memoised: the same op elsewhere is an error
                continue
            found = ", ".join(f"{text} is {t}" for text, t in on_axis if t is not None and t is not SCALAR)
            hint, fixed = _fix(err, axis, on_axis, nograd, cls)
            if cls == LINEAR and err.code == "partial-mixed" and _declared_partial(ctx, axis):
                # `return out + bias` where P is declared: the sum is meant to
                # stay pending, so the other terms belong after its reduction.
                others = [str(text) for text, t in on_axis if isinstance(t, (LocalType, Shard)) and t is not P]
                hint = f"add {' and '.join(others)} after the reduction of this sum (the declared result is P on {axis!r})"
            message = f"{display_name(name, namespace)} on axis {axis!r} ({found}): {_by_rank(err, axis, on_axis)}" + (
                f". Hint: {hint}" if hint else ""
            )
            if report is not None:
                report(axis, message)
            else:
                _report_op_error(ctx, name, message)
            failed = True
            t = _combined_or_none(cls, fixed, nograd, n_product)  # typed as the fix would type it
            if t is not None:
                result[axis] = t
            continue
        if product is not None and (t is V or isinstance(t, Shard)):
            message = contraction.violation(ctx, name, namespace, axis, ops[: n_product or len(ops)], product)
            if message is not None:
                if report is not None:
                    report(axis, message)
                else:
                    _report_op_error(ctx, name, message)
                failed, t = True, P  # the pending sum the ranks hold: the type the fix gives
        if t is not None:
            result[axis] = t
    rest = _rest(cls, ops, nograd, n_product)
    if not result and rest is None:
        return None, failed
    tensors_nograd = all(o.nograd for _, o in ops if isinstance(o, Spmd))
    fresh = cls == FACTORY and not asks_for_grad(ctx)  # zeros_like(x), x.new_ones(n)
    # `result` holds the axes in sorted order, the types the rules gave
    return Spmd.of_sorted(tuple(result.items()), tensors_nograd or fresh or name in NO_GRAD_RESULTS, rest), failed


def _combine(cls: str, types: List[object], nograd: Sequence[bool], n_product: int) -> Optional[AxisType]:
    """The result's type on one axis from the operands' types there (OpRuleError
    when a rule is broken); affine ops are the product plus the bias.

    The rules are pure and the axis types few: a result is kept per
    question (per axis, so distinct combinations of axes share them)."""
    key = (cls, tuple(types), tuple(nograd), n_product)
    found = _COMBINED.get(key, _COMBINED)
    if found is not _COMBINED:
        return found  # type: ignore[return-value]
    result = _combine_rule(cls, types, nograd, n_product)  # raises on a broken rule: not kept
    if len(_COMBINED) >= _MAX_INFERRED:
        _COMBINED.clear()
    _COMBINED[key] = result
    return result


_COMBINED: Dict[Tuple[object, ...], Optional[AxisType]] = {}


def _combine_rule(cls: str, types: List[object], nograd: Sequence[bool], n_product: int) -> Optional[AxisType]:
    if cls == "affine":
        bias = types[n_product] if len(types) > n_product else None
        return combine_affine(types[:n_product], bias, nograd)  # type: ignore[arg-type]
    return combine(cls, types, nograd)  # type: ignore[arg-type]


def _combined_or_none(cls: str, types: List[object], nograd: Sequence[bool], n_product: int) -> Optional[AxisType]:
    try:
        return _combine(cls, types, nograd, n_product)
    except OpRuleError:
        return None


def _rest(cls: str, ops: List[Operand], nograd: Sequence[bool], n_product: int) -> Optional[AxisType]:
    """The result's type on axes no operand names, when every operand knows them
    (factory results and spec-form values are R on every other axis); rule
    errors there were reported on the named axes or cannot happen (R and V
    only)."""
    # The spec form makes every axis it does not name R.
    types = [(R if o.spec is not None else o.rest) if isinstance(o, Spmd) else o for _, o in ops]
    if any(t is None for t in types):
        return None
    return _combined_or_none(cls, types, nograd, n_product)



