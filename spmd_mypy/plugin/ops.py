"""Typing torch functions, Tensor methods and operators from the op tables.

One generic hook serves every op: the op's class comes from
vocab/opclasses.py (a table row, never a hook per op), the per-axis result
from `combine`.  Tensor arguments are operands; Python numbers are operands
only for arithmetic (`x + 1`), elsewhere they are dims and sizes.  A plain
(unannotated) tensor operand makes the result unknown: no error, no type.
Also here: in-place ops must not change the receiver's type, and
`loss.backward()` needs a loss that is I or P on every axis.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ..vocab.collectives import fix_call
from ..vocab.contractions import TRANSPOSES, transposed_dim
from ..vocab.localtype import I, P, R, V, AxisType, LocalType, Shard, grad_type, local_kind
from ..vocab.opclasses import (
    ASSIGN,
    DTYPE_CASTS,
    DIVIDE,
    FACTORY,
    LINEAR,
    WITHOUT_OPERANDS,
    AFFINE,
    NO_GRAD_RESULTS,
    NONLINEAR,
    RANDOM,
    REFLECTED,
    SCALAR,
    SCALAR_OPERANDS,
    OpRuleError,
    cast_class,
    combine,
    combine_affine,
    op_class,
    op_class_or_none,
    out_of_place,
    synced_class,
)
from ..vocab.opnames import OPERATOR_SYMBOLS, VIEW_ATTRIBUTES, display_name
from ..vocab.spec import Spmd
from . import _mypy, contraction, partitioned
from .callsite import has_typed_operand, in_function_body, operands, receiver_text, typed_result
from .carrier import carrier, spmd_of
from .errors import SPMD_BACKWARD, SPMD_INPLACE, SPMD_OP
from .guard import default_attr, default_return, guarded

Operand = Tuple[str, Union[Spmd, None, object]]  # (source text, Spmd | None (plain) | SCALAR)

# Axes whose ranks draw the same random numbers (the synced_rng setting).
_SYNCED_RNG: Tuple[str, ...] = ()


def configure(synced_rng: Tuple[str, ...]) -> None:
    global _SYNCED_RNG
    if synced_rng != _SYNCED_RNG:
        _SYNCED_RNG = synced_rng
        _INFERRED.clear()  # inferred under the other setting

def _axis_operand(op: object, axis: str) -> object:
    return op.axis_type(axis) if isinstance(op, Spmd) else op


def _fix(
    err: OpRuleError, axis: str, on_axis: List[Tuple[str, object]], nograd: List[bool], cls: str
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
        calls = [fix_call(I, R, axis, on_axis[k][0]) or "" for k in bad]
        return " and ".join(c for c in calls if c), [R if k in bad else t for k, t in enumerate(types)]
    count = next(
        (k for k, t in enumerate(types) if k > 0 and _kind_of(t) == "V" and nograd[k]), None
    ) if cls == DIVIDE and types and types[0] is P else None
    if count is not None:
        name = on_axis[count][0]
        summed = f"spmd.all_reduce(spmd.reinterpret({name}, {axis!r}, src=V, dst=P), {axis!r}, src=P, dst=R)"
        return summed, [R if k == count else t for k, t in enumerate(types)]
    i = next((k for k, t in enumerate(types) if t is P), None)
    if i is None:
        return "", types
    others = [_kind_of(t) for k, t in enumerate(types) if k != i and isinstance(t, (LocalType, Shard))]
    want = I if others and all(k == "I" for k in others) else R
    fixed = types[:i] + [want] + types[i + 1:]
    if cls == LINEAR and err.code in ("partial-mixed", "partial-scalar"):
        # `out + bias` before the reduction: the code after it reduces `out`
        # as the pending sum it expects, so it goes on as P.
        fixed = [P if isinstance(t, (LocalType, Shard)) else t for t in types if t is not SCALAR]
    return fix_call(P, want, axis, on_axis[i][0]) or "", fixed


def _declared_partial(ctx: Any, axis: str) -> bool:
    """The op's value goes where P is declared on `axis` (a return or an annotated assignment)."""
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
        options: List[Tuple[str, List[object]]] = [(t, [o]) for t, o in single]
        cls, n_product = "affine", len(product)
    else:
        options, n_product = operands(ctx, name, receiver), 0
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


def _too_many_combinations(ctx: Any, name: str, namespace: str, keys: List[str], total: int) -> None:
    _report_op_error(
        ctx,
        name,
        f"{display_name(name, namespace)}: the Union types of {', '.join(keys)} give {total} combinations, "
        f"more than the {MAX_COMBINATIONS} the checker enumerates, so the op is not checked. "
        f"Hint: narrow each with spmd.assert_spmd(x, Spmd(...)) before the op",
    )


def _report_op_error(ctx: Any, name: str, message: str) -> None:
    # mypy tries a reflected dunder (`1.0 + p` runs p.__radd__) with errors
    # filtered, and any error there becomes its own [operator].
    fail = _mypy.fail_past_filters if name in REFLECTED else _mypy.fail
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
        every = WITHOUT_OPERANDS[name]
        synced = {a: R for a in _SYNCED_RNG} if every is V else {}
        return Spmd.of(synced, None, not _asks_for_grad(ctx), every)
    if not any(isinstance(o, Spmd) for _, o in ops):
        return None
    if any(o is None for _, o in ops):
        return None  # a plain tensor operand: gradual typing, result unknown
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


def _infer_typed(
    ctx: Any, name: str, cls: str, namespace: str, ops: List[Operand], n_product: int,
    report: Optional[Report] = None, product: Optional[contraction.Site] = None,
) -> Tuple[Optional[Spmd], bool]:
    """_infer_one on operands that are all typed: (result, whether a rule error was
    found).  Errors go to `report` when given, else to mypy.  `product`: the
    call's site when the op contracts dims (contraction.py)."""
    failed = False
    axes = sorted({a for _, o in ops if isinstance(o, Spmd) for a in o.axes})
    nograd = [o.nograd if isinstance(o, Spmd) else True for _, o in ops]
    result: dict = {}
    for axis in axes:
        on_axis = [(text, _axis_operand(o, axis)) for text, o in ops]
        try:
            axis_cls = synced_class(name) if cls == RANDOM and axis in _SYNCED_RNG else cls
            t = _combine(axis_cls, [t for _, t in on_axis], nograd, n_product)
        except OpRuleError as err:
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
                others = [text for text, t in on_axis if isinstance(t, (LocalType, Shard)) and t is not P]
                hint = f"add {' and '.join(others)} after the reduction of this sum (the declared result is P on {axis!r})"
            message = f"{display_name(name, namespace)} on axis {axis!r} ({found}): {err}" + (
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
    fresh = cls == FACTORY and not _asks_for_grad(ctx)  # zeros_like(x), x.new_ones(n)
    return Spmd.of(result, None, tensors_nograd or fresh or name in NO_GRAD_RESULTS, rest), failed


def _combine(cls: str, types: List[object], nograd: List[bool], n_product: int) -> Optional[AxisType]:
    """The result's type on one axis from the operands' types there (OpRuleError
    when a rule is broken); affine ops are the product plus the bias."""
    if cls == "affine":
        bias = types[n_product] if len(types) > n_product else None
        return combine_affine(types[:n_product], bias, nograd)  # type: ignore[arg-type]
    return combine(cls, types, nograd)  # type: ignore[arg-type]


def _combined_or_none(cls: str, types: List[object], nograd: List[bool], n_product: int) -> Optional[AxisType]:
    try:
        return _combine(cls, types, nograd, n_product)
    except OpRuleError:
        return None


def _rest(cls: str, ops: List[Operand], nograd: List[bool], n_product: int) -> Optional[AxisType]:
    """The result's type on axes no operand names, when every operand knows them
    (factory results and spec-form values are R on every other axis); rule
    errors there were reported on the named axes or cannot happen (R and V
    only)."""
    # The spec form makes every axis it does not name R.
    types = [(R if o.spec is not None else o.rest) if isinstance(o, Spmd) else o for _, o in ops]
    if any(t is None for t in types):
        return None
    return _combined_or_none(cls, types, nograd, n_product)


def _asks_for_grad(ctx: Any) -> bool:
    """requires_grad= passed and not literally False."""
    return any(not _mypy.is_false(expr) for expr, _ in _mypy.formal_args(ctx, "requires_grad"))


def _dtype_written(ctx: Any) -> Optional[str]:
    """The name of a torch dtype written as an argument (`torch.int64` ->
    "int64"), or None."""
    for _, expr, _ in _mypy.call_args(ctx):
        full = _mypy.fullname_of(expr)  # torch.int64 is defined as torch._C.int64
        if full is not None and full.startswith(("torch.", "torch._C.")):
            return full.rpartition(".")[2]
    return None


# Global mode (global_mode.refine_op): None leaves the op to the local rules,
# (type,) is the result it typed (None inside: unknown).
Refine = Callable[[Any, str, str, str, bool], Optional[Tuple[Optional[Spmd]]]]


def op_hook(
    name: str, namespace: str, receiver: bool, refine: Optional[Refine] = None
) -> Callable[[Any], _mypy.Type]:
    """The hook for one op name (built once per fullname, cached by the plugin)."""
    if receiver and name == "backward":
        return guarded(_backward, default_return)
    base = out_of_place(name) if receiver else None
    if base is not None:
        # An in-place op keeps its receiver's type; check it would not change.
        found = op_class_or_none(name, namespace) or op_class_or_none(base, namespace)
        if found is None:
            return default_return  # an unknown in-place op: no rule
        inplace_cls: str = found
        out_of_place_name: str = base
        return guarded(
            lambda ctx: _inplace(ctx, name, out_of_place_name, inplace_cls, namespace),
            default_return,
        )
    cls = op_class(name, namespace)

    def hook(ctx: Any) -> _mypy.Type:
        default = ctx.default_return_type
        if not _mypy.has_tensor(default) and not _mypy.is_any(default):
            return default  # size(), item(), dim(): not a tensor op
        _mypy.restore_parameters(ctx.api)  # h = h + r in a function generic in a layout
        refined = refine(ctx, name, cls, namespace, receiver) if refine is not None else None
        if refined is not None:
            return typed_result(ctx, refined[0], True)
        op_cls = cast_class(name, _dtype_written(ctx), cls) if receiver and name in DTYPE_CASTS else cls
        spmd = infer_all(ctx, name, op_cls, namespace, receiver)
        if not isinstance(spmd, Alternatives):  # PS(i)/PSA(i) operands (seed 004)
            spmd = partitioned.adjust(ctx, name, namespace, receiver, spmd)
        if op_cls is NONLINEAR and op_cls is not cls and isinstance(spmd, Spmd):
            spmd = Spmd.of(spmd.axes, spmd.spec, True, spmd.rest)  # an integer result: no gradient
        if isinstance(spmd, Alternatives):
            union = _mypy.union_of([carrier(ctx.api, r) for r in spmd])
            return _mypy.replace_tensors(ctx.default_return_type, union)
        if name in TRANSPOSES and isinstance(spmd, Spmd):
            args = _mypy.call_args(ctx)
            source = ctx.type if receiver else (args[0][2] if args else None)
            dims = [d for d in (_mypy.int_value(e) for _, e, _ in args) if d is not None]
            spmd = transposed(spmd_of(source) if source is not None else None, spmd, name, dims)
        check_out(ctx, name, namespace, spmd)
        return typed_result(ctx, spmd, has_typed_operand(ctx, receiver))

    return guarded(hook, default_return)


def transposed(source: Optional[Spmd], result: Spmd, name: str, dims: List[int]) -> Spmd:
    """The result of a transposing view of `source` with its shards' dims
    moved (vocab.contractions.transposed_dim); V where the rank would decide."""
    if source is None or source.spec is not None:
        return result
    axes = dict(result.axes)
    for a, t in source.axes.items():
        if isinstance(t, Shard) and local_kind(axes.get(a)) == "V":
            moved = transposed_dim(name, t.dim, dims)
            axes[a] = Shard(moved) if moved is not None else V
    return Spmd.of(axes, None, result.nograd, result.rest)


def check_out(ctx: Any, name: str, namespace: str, result: Optional[Spmd]) -> None:
    """out=t writes the result into t, which keeps its type: they must agree."""
    for arg_name, expr, typ in _mypy.call_args(ctx):
        target = spmd_of(typ) if arg_name == "out" else None
        if target is None or result is None:
            continue
        for a, t in result.axes.items():
            was = target.axis_type(a)
            if was is not None and local_kind(was) != local_kind(t):
                ctx.api.fail(
                    f"{display_name(name, namespace)}(..., out={_mypy.expr_text(expr)}) writes a "
                    f"{t} result on axis {a!r} into {_mypy.expr_text(expr)}, which is {was} and "
                    f"keeps that type; drop out= and rebind the name",
                    ctx.context,
                    code=SPMD_INPLACE,
                )
                return


def _inplace(ctx: Any, name: str, base: str, cls: str, namespace: str) -> _mypy.Type:
    before = spmd_of(ctx.type)
    after = infer(ctx, base, cls, namespace, True)
    if before is not None and after is not None:
        changed = [
            (a, before.axis_type(a), t)
            for a, t in after.axes.items()
            if before.axis_type(a) is not None and local_kind(before.axis_type(a)) != local_kind(t)
        ]
        if changed:
            a, was, now = changed[0]
            assert was is not None  # filtered above
            ctx.api.fail(
                f"in-place {display_name(name, namespace)} would change {receiver_text(ctx)} "
                f"from {was} to {now} on axis {a!r}, but an in-place op keeps the tensor's "
                f"type. Hint: {_inplace_fix(ctx, name, base, a, was, now)}",
                ctx.context,
                code=SPMD_INPLACE,
            )
    if before is not None and _mypy.has_tensor(ctx.default_return_type):
        return ctx.type  # x += y: the name keeps its type
    return ctx.default_return_type


def _inplace_fix(ctx: Any, name: str, base: str, axis: str, was: AxisType, now: AxisType) -> str:
    """Make the operand that changes the receiver's type fit it (the receiver
    keeps its type, so the fix type-checks where it stands); where no call
    does that (gathering a per-rank operand would change its shape), the
    out-of-place op rebound to the name, which then has the result's type."""
    receiver = receiver_text(ctx)
    operator = _mypy.operator_sides(ctx.context) is not None and name in OPERATOR_SYMBOLS
    culprit = None
    for _, expr, typ in _mypy.call_args(ctx):
        arg = spmd_of(typ)
        have = arg.axis_type(axis) if arg is not None else None
        if have is None or local_kind(have) == local_kind(was):
            continue
        culprit = _mypy.expr_text(expr)
        # Only a reduction (P) or Megatron's copy (I -> R) makes an operand
        # fit; anything else would change its value or shape: rebind instead.
        fix = fix_call(have, was, axis, culprit) if local_kind(have) in ("P", "I") else None
        if fix is not None:
            return f"{receiver} {OPERATOR_SYMBOLS[name]} {fix}" if operator else f"{receiver}.{name}({fix})"
        break
    if culprit is None:
        return f"use the out-of-place {base} and rebind the name"
    if op_class_or_none(base, "tensor") == ASSIGN:
        rebound = f"{receiver} = {culprit}"  # dst.copy_(src): src is the value
    elif operator and base in OPERATOR_SYMBOLS:
        rebound = f"{receiver} = {receiver} {OPERATOR_SYMBOLS[base]} {culprit}"
    else:
        rebound = f"{receiver} = {receiver}.{base}({culprit})"
    return f"{rebound} ({receiver} is then {now} on {axis!r})"


# Attributes of a carrier: views keep the type (VIEW_ATTRIBUTES), .grad has the gradient's type.


def attribute_hook(name: str) -> Optional[Callable[[Any], _mypy.Type]]:
    if name in VIEW_ATTRIBUTES:
        return guarded(lambda ctx: _attribute(ctx, name, grad=False), default_attr)
    if name == "grad":
        return guarded(lambda ctx: _attribute(ctx, name, grad=True), default_attr)
    return None


def _attribute(ctx: Any, name: str, grad: bool) -> _mypy.Type:
    spmd = spmd_of(ctx.type)
    if spmd is None or ctx.is_lvalue:
        return ctx.default_attr_type
    if grad:  # a gradient read after backward carries no gradient of its own
        spmd = Spmd.of({a: grad_type(t) for a, t in spmd.axes.items()}, None, True)
    elif name in TRANSPOSES:
        spmd = transposed(spmd, spmd, name, [])
    return _mypy.replace_tensors(ctx.default_attr_type, carrier(ctx.api, spmd))


def _backward(ctx: Any) -> _mypy.Type:
    loss = spmd_of(ctx.type)
    explicit = any(_mypy.is_tensor(t) for _, _, t in _mypy.call_args(ctx))
    if loss is None or explicit:
        return ctx.default_return_type
    name = receiver_text(ctx, "loss")
    for axis, t in loss.axes.items():
        if t in (I, P):
            continue
        fix = (
            f"spmd.convert({name}, {axis!r}, src=R, dst=P)"
            if local_kind(t) == "R"
            else f"spmd.reinterpret({name}, {axis!r}, src=V, dst=P) "
            f"to sum the ranks' losses"
        )
        ctx.api.fail(
            f"backward() on a loss that is {t} on axis {axis!r}: backward seeds a gradient "
            f"of 1.0 on every rank, which is right only for an I or P loss; "
            + (
                "the R loss's gradient is Partial, so the parameters' gradients come out "
                f"scaled by the size of {axis!r}"
                if local_kind(t) == "R"
                else "each rank's loss is a different value, so the loss being minimised is undefined"
            )
            + f". Hint: {fix}",
            ctx.context,
            code=SPMD_BACKWARD,
        )
    return ctx.default_return_type
