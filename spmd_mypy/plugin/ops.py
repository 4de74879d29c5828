"""The hooks of torch functions, Tensor methods and operators.

One generic hook serves every op (op_hook); op_inference.py has the rules
it asks.  Also here: in-place ops must not change the receiver's type,
`out=` must agree with the result, `loss.backward()` needs a loss that is I
or P on every axis, and the attributes of a carrier (`.T`, `.grad`).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from ..vocab.collectives import fix_call
from ..vocab.contractions import TRANSPOSES
from ..vocab.localtype import I, P, AxisType, grad_type, local_kind
from ..vocab.opclasses import (
    ASSIGN,
    ARGUMENT_CLASSES,
    DTYPE_ARGUMENT_OPS,
    DTYPE_CASTS,
    FACTORY,
    KEEP_INPLACE,
    LINEAR,
    RANDOM,
    NONLINEAR,
    SELECTION,
    cast_class,
    argument_class,
    keeps_class,
    op_class,
    op_class_or_none,
    out_of_place,
)
from ..vocab.opnames import OPERATOR_SYMBOLS, UNTYPED_TENSOR_METHODS, VIEW_ATTRIBUTES, display_name
from ..vocab.spec import Spmd
from . import _mypy, global_mode, item_writes, partitioned
from .answers import remembered, restore_parameters
from .callsite import (
    has_typed_operand, ranked_call, receiver_text, selection_key, typed_result, without_gradient, zero_key, zero_roles,
)
from .carrier import carrier, spmd_of
from .contraction import declared_exempt
from .errors import SPMD_ASSIGN, SPMD_BACKWARD, SPMD_INPLACE
from .guard import default_attr, default_return, guarded
from .op_inference import Alternatives, configure, infer, infer_all
from .op_lane import dtype_written, factory_lane, quick_lane, transposed
from .relation import report_against

__all__ = ["configure", "op_hook", "shared_op_hook", "attribute_hook", "check_out"]

# Global mode (global_mode.refine_op): None leaves the op to the local rules,
# (type,) is the result it typed (None inside: unknown).
Refine = Callable[[Any, str, str, str, bool], Optional[Tuple[Optional[Spmd]]]]


def op_hook(
    name: str, namespace: str, receiver: bool, refine: Optional[Refine] = None
) -> Callable[[Any], _mypy.Type]:
    """The hook for one op name (built once per fullname, cached by the plugin)."""
    if receiver and name == "backward":
        return guarded(_backward, default_return)
    if receiver and name == "__setitem__":
        return guarded(item_writes.setitem, default_return)
    if receiver and name in KEEP_INPLACE:
        return guarded(lambda ctx: _keeps_type(ctx, name), default_return)
    base = out_of_place(name) if receiver else None
    if base is not None:
        # An in-place op keeps its receiver's type; check it would not change
        # (an op in no table is nonlinear, the safe default, as out of place).
        inplace_cls: str = op_class_or_none(name, namespace) or op_class(base, namespace)
        out_of_place_name: str = base
        by_argument = ARGUMENT_CLASSES.get(base)  # p.div_(2, rounding_mode="floor")

        def inplace(ctx: Any) -> _mypy.Type:
            return _inplace(ctx, name, out_of_place_name, _class_at(ctx, inplace_cls, by_argument), namespace)

        return guarded(inplace, default_return)
    cls = op_class(name, namespace)
    casts = (receiver and name in DTYPE_CASTS) or name in DTYPE_ARGUMENT_OPS
    decided = ARGUMENT_CLASSES.get(name)

    def general(ctx: Any) -> _mypy.Type:
        default = ctx.default_return_type
        if not _mypy.has_tensor(default) and not _mypy.is_any(default):
            return default  # size(), item(), dim(): not a tensor op
        restore_parameters(ctx)
        result = typed(ctx)
        if cls in (LINEAR, SELECTION):
            _zeros_rebound(ctx, name, receiver, result)
        return result

    def compute(ctx: Any) -> _mypy.Type:
        op_cls = cast_class(name, dtype_written(ctx), cls) if casts else cls
        rule_cls = _class_at(ctx, cls, decided) if decided is not None else op_cls
        if rule_cls == FACTORY and ranked_call(ctx):
            rule_cls = LINEAR  # torch.arange(r * n, (r + 1) * n): values made from a rank differ by it
        refined = refine(ctx, name, rule_cls, namespace, receiver) if refine is not None else None
        integer = op_cls is NONLINEAR and op_cls is not cls  # an integer result: no gradient
        if refined is not None:
            found = refined[0]
            return typed_result(ctx, without_gradient(found) if integer and found else found, True)
        spmd = infer_all(ctx, name, rule_cls, namespace, receiver)
        if not isinstance(spmd, Alternatives):  # PS(i)/PSA(i) operands (seed 004)
            spmd = partitioned.adjust(ctx, name, namespace, receiver, spmd)
        if integer and isinstance(spmd, Spmd):
            spmd = without_gradient(spmd)
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

    # a product contracting a sharded dim reads the axes declared partial at
    # the call (contraction.Site): its answer is kept per those axes; the
    # argument that decides the class (F.pad's fill, a float, which keys
    # leave out) goes into the key
    keeps = (lambda ctx: argument_keeps(ctx, *decided)) if decided is not None else None
    if cls == SELECTION:
        keeps = lambda ctx: selection_key(ctx, name, receiver)  # noqa: E731  # which values are zeros
    elif cls == LINEAR:  # which operands are zeros, no term (callsite.zero_terms)
        keeps = (lambda ctx: (zero_key(ctx, name, receiver), argument_keeps(ctx, *decided))) if decided is not None \
            else (lambda ctx: zero_key(ctx, name, receiver))
    typed = remembered(compute, restore_parameters, also=keeps, site=declared_exempt)
    # most calls: the op's lane answers from its operands' types, or a
    # factory's from its name (op_lane.py), else the general path
    lane = quick_lane(name, cls, namespace, receiver, general) or factory_lane(name, namespace, general)
    form = UNTYPED_TENSOR_METHODS.get(name) if receiver else None
    if form is not None:
        return guarded(_untyped_method(lane or general, form), default_return)
    return guarded(lane or general, default_return)


_SHARED: Dict[Tuple[str, str], Callable[[Any], _mypy.Type]] = {}


def shared_op_hook(name: str, namespace: str) -> Callable[[Any], _mypy.Type]:
    """The hook of a function op (no receiver, global mode's step included)
    for the hooks that run an op on a call they build (a module's forward,
    checkpoint(F.gelu, h), sum([a, b]), a torch.special call): built once per op."""
    hook = _SHARED.get((name, namespace))
    if hook is None:
        hook = _SHARED[(name, namespace)] = op_hook(name, namespace, False, global_mode.refine_op)
    return hook


def _class_at(ctx: Any, cls: str, decided: Optional[Tuple[str, str]]) -> str:
    """The class of an op of class `cls` at this call: nonlinear where the
    argument ARGUMENT_CLASSES names for it does not keep the class."""
    return cls if decided is None else argument_class(cls, argument_keeps(ctx, *decided))


def argument_keeps(ctx: Any, param: str, test: str) -> bool:
    """Whether the call's argument `param` (absent, or its literal value)
    keeps its op's class (vocab.opclasses.keeps_class)."""
    for expr, _ in _mypy.formal_args(ctx, param):
        return keeps_class(test, _mypy.literal_value(expr))
    return True


def _untyped_method(inner: Callable[[Any], _mypy.Type], form: str) -> Callable[[Any], _mypy.Type]:
    """A method torch leaves unannotated (mypy's result is Any): on a typed
    receiver, typed as a Tensor or a tuple of them (`q, k = qkv.split(n)`);
    elsewhere Any, as mypy types it."""

    def hook(ctx: Any) -> _mypy.Type:
        typed = _mypy.union_alternatives(ctx.type) or spmd_of(ctx.type) is not None
        if typed and _mypy.is_any(ctx.default_return_type):
            ctx = _mypy.with_tensor_default(ctx, form)
        return inner(ctx)

    return hook


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


def _keeps_type(ctx: Any, name: str) -> _mypy.Type:
    """requires_grad_, resize_, ...: the receiver, its SPMD type unchanged
    (requires_grad_ makes a value without gradient carry one)."""
    spmd = spmd_of(ctx.type)
    if spmd is None or not _mypy.has_tensor(ctx.default_return_type):
        return ctx.type if _mypy.is_carrier(ctx.type) else ctx.default_return_type
    if spmd.nograd and name == "requires_grad_":
        return carrier(ctx.api, Spmd.of(spmd.axes, spmd.spec, False, spmd.rest))
    return ctx.type


def _inplace(ctx: Any, name: str, base: str, cls: str, namespace: str) -> _mypy.Type:
    before = spmd_of(ctx.type)
    # a buffer a factory made, which no other name holds (_mypy.fresh_locals)
    bound = _mypy.fresh_binding(ctx.api, ctx.context) if before is not None and before.nograd else None
    after = _added_to_zeros(ctx) if bound is not None and cls == LINEAR and _mypy.makes_zeros(bound) else None
    if after is None:
        after = infer(ctx, base, cls, namespace, True)
    if after is not None and _mypy.makes_fresh(_mypy.call_receiver(ctx.context)):
        # x.new_empty(n).normal_(): no name holds the tensor it changes, so
        # its result is the op's, as out of place
        return typed_result(ctx, after, True)
    if before is not None and after is not None:
        changed = [
            (a, before.axis_type(a), t)
            for a, t in after.axes.items()
            if before.axis_type(a) is not None and local_kind(before.axis_type(a)) != local_kind(t)
        ]
        gains_grad = before.nograd and not after.nograd  # buf = torch.ones(n); buf += h
        if (changed or gains_grad) and bound is not None:
            # out = torch.zeros(n); out.index_add_(0, i, v): the op rebinds the name
            made = typed_result(ctx, after, True)
            if _mypy.rebind_local(ctx.api, ctx.context, made, _mypy.makes_zeros(bound)):
                return ctx.type if _mypy.operator_assigned(ctx.context) else made  # x += y: mypy checks it keeps x's
        if gains_grad and not changed:
            ctx.api.fail(
                f"in-place {display_name(name, namespace)} would give {receiver_text(ctx)} a gradient, but it "
                f"holds none and an in-place op keeps the tensor's type: the gradient flowing back through it "
                f"would go unchecked. Hint: {_rebound(ctx, name, base) or 'use the out-of-place op and rebind the name'}",
                ctx.context,
                code=SPMD_INPLACE,
            )
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
    if (before is not None or _mypy.is_carrier(ctx.type)) and _mypy.has_tensor(ctx.default_return_type):
        return ctx.type  # x += y: the name keeps its type (an unknown one too)
    return ctx.default_return_type


def _zeros_rebound(ctx: Any, name: str, receiver: bool, result: _mypy.Type) -> None:
    """A linear op or selection whose statement rebinds a name that held
    zeros (`total = total + l` after `total = torch.zeros(())`, `out =
    out.index_add(0, i, v)`): the name has the result's type from its
    binding on (_mypy.retype_zeros)."""
    if _mypy.is_carrier(result):
        for _, expr, _ in zero_roles(ctx, name, receiver):
            if expr is not None:
                _mypy.retype_zeros(ctx.api, expr, ctx.context, result)
        _mypy.retype_sum(ctx.api, ctx.context, result)  # total = total + a - b


def _added_to_zeros(ctx: Any) -> Optional[Spmd]:
    """The type of a linear op into a buffer of zeros (`acc = torch.zeros(n);
    acc += p`): zeros fit any type, so the result is its one tensor
    operand's; None where the call has another form."""
    tensors = [typ for _, _, typ in _mypy.call_args(ctx) if _mypy.has_tensor(typ)]
    return spmd_of(tensors[0]) if len(tensors) == 1 else None


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
    if culprit is None and op_class(base, "tensor") == RANDOM and local_kind(was) in ("R", "I"):
        # a draw in place: the ranks draw different numbers unless their generators agree
        return f"seed the ranks' generators alike on {axis!r} and say so: synced_rng = {axis} under [spmd_mypy]"
    if culprit is None:
        return f"use the out-of-place {base} and rebind the name"
    rebound = _rebound(ctx, name, base, culprit)
    if rebound is None:  # x.view(-1).add_(h): no name to rebind (and a view changes its base)
        return f"name the out-of-place {_out_of_place(ctx, base)}, which is {now} on {axis!r}"
    return f"{rebound} ({receiver} is then {now} on {axis!r})"


def _rebound(ctx: Any, name: str, base: str, culprit: Optional[str] = None) -> Optional[str]:
    """The in-place call as its out-of-place op bound to the receiver's name
    (`x = x + y`, `x = x.index_add(0, i, v)`, `x = y` for x.copy_(y)); None
    where the receiver is no name."""
    receiver = receiver_text(ctx)
    args = _mypy.call_args(ctx)
    culprit = culprit or (_mypy.expr_text(args[0][1]) if args else None)
    if op_class_or_none(base, "tensor") == ASSIGN and culprit is not None:
        return f"{receiver} = {culprit}"  # dst.copy_(src): src is the value
    operator = _mypy.operator_sides(ctx.context) is not None and name in OPERATOR_SYMBOLS
    if operator and base in OPERATOR_SYMBOLS and culprit is not None:
        return f"{receiver} = {receiver} {OPERATOR_SYMBOLS[base]} {culprit}"
    if not _mypy.assignable(_mypy.call_receiver(ctx.context)) and not operator:
        return None
    return f"{receiver} = {_out_of_place(ctx, base)}"


def _out_of_place(ctx: Any, base: str) -> str:
    written = [f"{k}={_mypy.expr_text(e)}" if k else _mypy.expr_text(e) for k, e, _ in _mypy.call_args(ctx)]
    return f"{receiver_text(ctx)}.{base}({', '.join(written)})"


# Attributes of a carrier: views keep the type (VIEW_ATTRIBUTES), .grad has the gradient's type.


def attribute_hook(name: str) -> Optional[Callable[[Any], _mypy.Type]]:
    if name in VIEW_ATTRIBUTES:
        return guarded(lambda ctx: _attribute(ctx, name, grad=False), default_attr)
    if name == "grad":
        return guarded(lambda ctx: _attribute(ctx, name, grad=True), default_attr)
    return None


def _attribute(ctx: Any, name: str, grad: bool) -> _mypy.Type:
    if ctx.is_lvalue:
        if name == "data":
            _data_write(ctx)
        return ctx.default_attr_type
    alternatives = _mypy.union_alternatives(ctx.type)
    if alternatives is not None:
        # A value from branches: mypy asks once per alternative but gives the
        # whole Union as the receiver, so each answer is the Union of all of
        # them (mypy joins the answers into that Union); an alternative whose
        # type is not known stays the default.
        return _mypy.union_of([_attribute_of(ctx, t, name, grad) for t in alternatives])
    return _attribute_of(ctx, ctx.type, name, grad)


def _data_write(ctx: Any) -> None:
    """`x.data = value` swaps x's values in place: the value must fit x's
    type per axis, as an annotated assignment's must (`.grad` writes are
    left alone: a synced gradient written back has its post-sync type)."""
    want = spmd_of(ctx.type)
    if want is None:
        return
    value = _mypy.written_value(ctx.api, ctx.context)
    if value is None:
        return
    got = spmd_of(_mypy.quietly_typed(ctx.api, value))
    if got is not None:
        report_against(ctx.api, value, got, (want,), f"Value written to {_mypy.expr_text(ctx.context)}", SPMD_ASSIGN)


def _attribute_of(ctx: Any, receiver: _mypy.Type, name: str, grad: bool) -> _mypy.Type:
    spmd = spmd_of(receiver)
    if spmd is None:
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
