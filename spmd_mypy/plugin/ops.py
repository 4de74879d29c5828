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

from typing import Any, Callable, List, Optional, Tuple, Union

from ..vocab.collectives import fix_call
from ..vocab.localtype import I, P, R, AxisType, Shard, grad_type
from ..vocab.opclasses import (
    NO_GRAD_RESULTS,
    SCALAR,
    SCALAR_OPERANDS,
    OpRuleError,
    combine,
    op_class,
    op_class_or_none,
    out_of_place,
)
from ..vocab.spec import Spmd
from . import _mypy
from .carrier import carrier, spmd_of
from .errors import SPMD_BACKWARD, SPMD_INPLACE, SPMD_OP

Operand = Tuple[str, Union[Spmd, None, object]]  # (source text, Spmd | None (plain) | SCALAR)

_SYMBOLS = {
    "__add__": "+", "__radd__": "+", "__iadd__": "+=", "__sub__": "-", "__rsub__": "-",
    "__isub__": "-=", "__mul__": "*", "__rmul__": "*", "__imul__": "*=", "__matmul__": "@",
    "__rmatmul__": "@", "__imatmul__": "@=", "__truediv__": "/", "__rtruediv__": "/",
    "__itruediv__": "/=", "__neg__": "unary -", "__getitem__": "indexing", "__pow__": "**",
}


def _display(name: str, namespace: str) -> str:
    if name in _SYMBOLS:
        return f"'{_SYMBOLS[name]}'"
    prefix = {"torch": "torch.", "functional": "F.", "tensor": "Tensor."}[namespace]
    return f"{prefix}{name}"


def _operands(ctx: Any, name: str, receiver: bool) -> List[Operand]:
    scalars = name in SCALAR_OPERANDS
    ops: List[Operand] = []
    if receiver:
        ops.append((_receiver_text(ctx), spmd_of(ctx.type)))
    for _, expr, typ in _mypy.call_args(ctx):
        if _mypy.is_tensor(typ):
            ops.append((_mypy.expr_text(expr), spmd_of(typ)))
        elif scalars and _mypy.is_python_number(typ):
            ops.append((_mypy.expr_text(expr), SCALAR))
    return ops


def _receiver_text(ctx: Any, fallback: str = "x") -> str:
    callee = getattr(ctx.context, "callee", None)
    base = getattr(callee, "expr", None)
    if base is None:
        base = getattr(ctx.context, "left", None) or getattr(ctx.context, "base", None)
    text = _mypy.expr_text(base) if base is not None else "x"
    return fallback if text == "x" else text


def _axis_operand(op: object, axis: str) -> object:
    return op.axis_type(axis) if isinstance(op, Spmd) else op


def _hint(err: OpRuleError, axis: str, on_axis: List[Tuple[str, object]]) -> str:
    if err.code == "invariant-mixed":
        culprit = next((n for n, t in on_axis if t is I), "x")
        return fix_call(I, R, axis, culprit) or ""
    culprit = next((n for n, t in on_axis if t is P), "x")
    return fix_call(P, R, axis, culprit) or ""


def infer(ctx: Any, name: str, cls: str, namespace: str, receiver: bool) -> Optional[Spmd]:
    """The result's SPMD type (None: unknown), reporting rule violations."""
    ops = _operands(ctx, name, receiver)
    if not any(isinstance(o, Spmd) for _, o in ops):
        return None
    if any(o is None for _, o in ops):
        return None  # a plain tensor operand: gradual typing, result unknown
    axes = sorted({a for _, o in ops if isinstance(o, Spmd) for a in o.axes})
    nograd = [o.nograd if isinstance(o, Spmd) else True for _, o in ops]
    result: dict = {}
    for axis in axes:
        on_axis = [(text, _axis_operand(o, axis)) for text, o in ops]
        try:
            t = combine(cls, [t for _, t in on_axis], nograd)  # type: ignore[misc]
        except OpRuleError as err:
            found = ", ".join(f"{text} is {t}" for text, t in on_axis if t is not None and t is not SCALAR)
            hint = _hint(err, axis, on_axis)
            ctx.api.fail(
                f"{_display(name, namespace)} on axis {axis!r} ({found}): {err}"
                + (f". Hint: {hint}" if hint else ""),
                ctx.context,
                code=SPMD_OP,
            )
            continue
        if t is not None:
            result[axis] = t
    if not result:
        return None
    tensors_nograd = all(o.nograd for _, o in ops if isinstance(o, Spmd))
    return Spmd.of(result, None, tensors_nograd or name in NO_GRAD_RESULTS)


def _typed(ctx: Any, spmd: Optional[Spmd], typed_operand: bool) -> _mypy.Type:
    """The default result with its tensors carrying `spmd`; SpmdTensor[Any] when a
    typed operand went into a result the rules cannot type (it then fits any annotation)."""
    default = ctx.default_return_type
    if not _mypy.has_tensor(default) or (spmd is None and not typed_operand):
        return default
    new = carrier(ctx.api, spmd) if spmd is not None else _mypy.unknown_carrier(ctx.api)
    return _mypy.replace_tensors(default, new)


def _has_typed_operand(ctx: Any, receiver: bool) -> bool:
    if receiver and _mypy.carried(ctx.type) is not None:
        return True
    return any(_mypy.carried(t) is not None for _, _, t in _mypy.call_args(ctx))


def op_hook(name: str, namespace: str, receiver: bool) -> Callable[[Any], _mypy.Type]:
    """The hook for one op name (built once per fullname, cached by the plugin)."""
    if receiver and name == "backward":
        return _guard(_backward)
    base = out_of_place(name) if receiver else None
    if base is not None:
        # An in-place op keeps its receiver's type; check it would not change.
        found = op_class_or_none(name, namespace) or op_class_or_none(base, namespace)
        if found is None:
            return _guard(lambda ctx: ctx.default_return_type)  # unknown in-place op: no rule
        inplace_cls: str = found
        out_of_place_name: str = base
        return _guard(lambda ctx: _inplace(ctx, name, out_of_place_name, inplace_cls, namespace))
    cls = op_class(name, namespace)

    def hook(ctx: Any) -> _mypy.Type:
        if not _mypy.has_tensor(ctx.default_return_type):
            return ctx.default_return_type  # size(), item(), dim(): not a tensor op
        spmd = infer(ctx, name, cls, namespace, receiver)
        return _typed(ctx, spmd, _has_typed_operand(ctx, receiver))

    return _guard(hook)


def _inplace(ctx: Any, name: str, base: str, cls: str, namespace: str) -> _mypy.Type:
    before = spmd_of(ctx.type)
    after = infer(ctx, base, cls, namespace, True)
    if before is not None and after is not None:
        changed = [
            (a, before.axis_type(a), t)
            for a, t in after.axes.items()
            if _kind(before.axis_type(a)) != _kind(t)
        ]
        if changed:
            a, was, now = changed[0]
            ctx.api.fail(
                f"in-place {_display(name, namespace)} would change {_receiver_text(ctx)} "
                f"from {was} to {now} on axis {a!r}, but an in-place op keeps the tensor's "
                f"type; use the out-of-place {_display(base, namespace)} and rebind the name",
                ctx.context,
                code=SPMD_INPLACE,
            )
    return ctx.default_return_type


# Attributes of a carrier: views keep the type, .grad has the gradient's type.
_VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})


def attribute_hook(name: str) -> Optional[Callable[[Any], _mypy.Type]]:
    if name in _VIEW_ATTRIBUTES:
        return _guard_attr(lambda ctx: _attribute(ctx, grad=False))
    if name == "grad":
        return _guard_attr(lambda ctx: _attribute(ctx, grad=True))
    return None


def _attribute(ctx: Any, grad: bool) -> _mypy.Type:
    spmd = spmd_of(ctx.type)
    if spmd is None or ctx.is_lvalue:
        return ctx.default_attr_type
    if grad:
        spmd = Spmd.of({a: grad_type(t) for a, t in spmd.axes.items()})
    return _mypy.replace_tensors(ctx.default_attr_type, carrier(ctx.api, spmd))


def _guard_attr(fn: Callable[[Any], _mypy.Type]) -> Callable[[Any], _mypy.Type]:
    def hook(ctx: Any) -> _mypy.Type:
        try:
            return fn(ctx)
        except Exception:
            return ctx.default_attr_type

    return hook


def _kind(t: Optional[AxisType]) -> Optional[str]:
    if t is None:
        return None
    return "V" if isinstance(t, Shard) else t.letter


def _backward(ctx: Any) -> _mypy.Type:
    loss = spmd_of(ctx.type)
    explicit = any(_mypy.is_tensor(t) for _, _, t in _mypy.call_args(ctx))
    if loss is None or explicit:
        return ctx.default_return_type
    name = _receiver_text(ctx, "loss")
    for axis, t in loss.axes.items():
        if t in (I, P):
            continue
        fix = (
            f"spmd.convert({name}, {axis!r}, src=R, dst=P)"
            if _kind(t) == "R"
            else f"spmd.reinterpret({name}, {axis!r}, src=V, dst=P) "
            f"to sum the ranks' losses"
        )
        ctx.api.fail(
            f"backward() on a loss that is {t} on axis {axis!r}: backward seeds a gradient "
            f"of 1.0 on every rank, which is right only for an I or P loss; "
            + (
                "the R loss's gradient is Partial, so the parameters' gradients come out "
                f"scaled by the size of {axis!r}"
                if _kind(t) == "R"
                else "each rank's loss is a different value, so the loss being minimised is undefined"
            )
            + f". Hint: {fix}",
            ctx.context,
            code=SPMD_BACKWARD,
        )
    return ctx.default_return_type


def _guard(fn: Callable[[Any], _mypy.Type]) -> Callable[[Any], _mypy.Type]:
    def hook(ctx: Any) -> _mypy.Type:
        try:
            return fn(ctx)
        except Exception:  # never take mypy down
            return ctx.default_return_type

    return hook
