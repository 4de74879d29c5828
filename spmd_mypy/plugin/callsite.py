"""What the call hooks of ops, comms and global mode share: reading a call's
arguments and operands, typing its result, and rebuilding a `Spmd(...)`
written in an argument for the annotation decoder.

Every hook here takes a mypy Function/MethodContext (`ctx`); the mypy side of
it is _mypy's work.
"""

from __future__ import annotations

import ast
import keyword
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple, Union, overload

from ..vocab.opclasses import (
    NONLINEAR, REFLECTED, SCALAR, SCALAR_OPERANDS, SELECTION, SELECTIONS, ZERO_FILL, keeps_class,
)
from ..vocab.localtype import R, V
from ..vocab.spec import Spmd
from . import _mypy
from .annotations import AnnotationError, mentions_spmd
from .answers import depends_on_site
from .carrier import carrier, spmd_of, spmd_of_text
from .nograd_regions import FUNCTION, grad_off_at


def one_arg(ctx: Any, formal: str) -> Optional[Tuple[_mypy.Expression, _mypy.Type]]:
    """The first actual argument bound to the parameter `formal`: (expression, type)."""
    got = _mypy.formal_args(ctx, formal)
    return got[0] if got else None


def holds_tensor(typ: _mypy.Type) -> bool:
    """A tensor argument: one tensor type, or a Union of them (a value from two branches)."""
    return _mypy.is_tensor(typ) or _mypy.union_alternatives(typ) is not None


def candidates(typ: _mypy.Type) -> List[object]:
    """The SPMD types a tensor argument may have: one, or one per Union alternative."""
    alternatives = _mypy.union_alternatives(typ)
    if alternatives is None:
        return [spmd_of(typ)]
    return [spmd_of(t) for t in alternatives]


class SourceText:
    """An operand's text as written, rendered when something first reads it.

    The ops' rules name operands only in messages, and clean code reports
    none: rendering every operand of every op up front cost a tenth of the
    op hook's time.  It stands for a str where messages are formatted (an
    f-string, str(), ==, a dict key by its text)."""

    __slots__ = ("_render", "_arg", "_text")

    def __init__(self, render: Callable[[Any], str], arg: Any) -> None:
        self._render = render
        self._arg = arg
        self._text: Optional[str] = None

    def __str__(self) -> str:
        if self._text is None:
            self._text = self._render(self._arg)
        return self._text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __repr__(self) -> str:
        return repr(str(self))

    def __eq__(self, other: object) -> bool:
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


Text = Union[str, SourceText]


@overload
def operands(
    ctx: Any, name: str, receiver: bool, lazy: Literal[False] = ..., zeros: bool = ...
) -> List[Tuple[str, List[object]]]: ...
@overload
def operands(ctx: Any, name: str, receiver: bool, lazy: bool, zeros: bool = ...) -> List[Tuple[Text, List[object]]]: ...


def operands(
    ctx: Any, name: str, receiver: bool, lazy: bool = False, zeros: bool = False
) -> List[Tuple[Any, List[object]]]:
    """The operands in source order: each its text and its possible types.
    `lazy`: the texts are SourceText, rendered only if a message needs them.
    `zeros` (a linear op): a tensor of zeros is no term and left out while a
    typed operand remains (zero_terms)."""
    scalars = name in SCALAR_OPERANDS
    text_of: Callable[[Any], Text] = _lazy_text if lazy else _mypy.expr_text
    ops: List[Tuple[Text, List[object]]] = []
    dropped = _zero_operands(ctx, name, receiver) if zeros else ()
    if receiver and _RECEIVER not in dropped:
        ops.append((SourceText(receiver_text, ctx) if lazy else receiver_text(ctx), candidates(ctx.type)))
    for arg_name, expr, typ in _mypy.call_args(ctx):
        if arg_name == "out" or any(expr is e for e in dropped):
            continue  # out= receives the result; checked by ops.check_out
        if holds_tensor(typ):
            ops.append((text_of(expr), candidates(typ)))
        elif (rank := rank_operand(typ)) is not None:
            if not _device(ctx, expr):  # x.to(rank): the same values, moved
                ops.append((RankText(_mypy.expr_text(expr)), [rank]))  # x[rank], x.narrow(0, rank * n, n)
        elif scalars and _mypy.is_python_number(typ):
            ops.append((text_of(expr), [SCALAR]))
        else:  # torch.cat([a, b]), torch.stack(parts): every tensor in the sequence
            ops.extend(_sequence_operands(ctx, expr, typ, text_of, dropped))
    if receiver and len(ops) == 2 and not dropped and _mypy.is_operator(ctx.context):
        # An operator: name the operands as written; a reflected dunder runs
        # on the right operand, so its argument is the left one.
        left, right = (ops[1], ops[0]) if name in REFLECTED else (ops[0], ops[1])
        sides: Tuple[Text, Text] = (
            (SourceText(_side, (ctx.context, 0)), SourceText(_side, (ctx.context, 1))) if lazy
            else _mypy.operator_sides(ctx.context)  # type: ignore[assignment]
        )
        ops = [(_as_rank(sides[0], left[0]), left[1]), (_as_rank(sides[1], right[0]), right[1])]
    return ops


def zero_terms(ctx: Any, name: str, receiver: bool) -> Dict[Any, bool]:
    """The tensor operands of a linear op that hold zeros (a call of
    torch.zeros, or a name that still holds the zeros it was bound to,
    _mypy.zeros_operand): expression -> whether the op's statement rebinds
    that name (`total = total + l`).  _RECEIVER stands for a method's
    receiver (`torch.zeros(n) + p`)."""
    found: Dict[Any, bool] = {}
    for key, expr, typ in zero_roles(ctx, name, receiver):
        if expr is None or not holds_tensor(typ) or not _mypy.zeros_candidate(expr):
            continue
        rebound = _mypy.zeros_operand(ctx.api, expr, ctx.context)
        if rebound is not None:
            found[key] = rebound
    return found


def _zero_operands(ctx: Any, name: str, receiver: bool) -> Tuple[Any, ...]:
    """zero_terms, when some other operand is typed (zeros alone are a value)."""
    found = zero_terms(ctx, name, receiver)
    if not found:
        return ()
    rest = [typ for key, _, typ in zero_roles(ctx, name, receiver) if key not in found]
    return tuple(found) if any(holds_tensor(t) and spmd_of(t) is not None or _mypy.union_alternatives(t)
                               for t in rest) else ()


def zero_key(ctx: Any, name: str, receiver: bool) -> Tuple[int, ...]:
    """Which operands of a linear op are zeros (their positions): the key
    beside the call's question, whose types do not tell torch.zeros(n) from
    another R value."""
    dropped = _zero_operands(ctx, name, receiver)
    return tuple(i for i, (key, _, _) in enumerate(zero_roles(ctx, name, receiver)) if any(key is d for d in dropped))


def zero_roles(ctx: Any, name: str, receiver: bool) -> List[Tuple[Any, Any, _mypy.Type]]:
    """(key, expression, type) of a linear op's tensor roles: its receiver
    (key _RECEIVER) and arguments, the items of a list or tuple written as
    one (`torch.cat([torch.zeros(n, d), p])`) each a role of its own."""
    roles: List[Tuple[Any, Any, _mypy.Type]] = [(_RECEIVER, receiver_expr(ctx, name), ctx.type)] if receiver else []
    for arg, expr, typ in _mypy.call_args(ctx):
        items = _mypy.display_items(expr) if arg != "out" else None
        if items is not None:
            roles += [(item, item, _mypy.typed_before(ctx.api, item)) for item in items if _mypy.starred(item) is None]
        elif arg != "out":
            roles.append((expr, expr, typ))
    return roles


def receiver_expr(ctx: Any, name: str) -> Optional[_mypy.Expression]:
    """The receiver of a method call as written: `x` of `x.add(y)`, the left
    side of `x + y` (the right of a reflected `y + x`), `x` of `x += y`."""
    sides = _mypy.operator_operands(ctx.context)
    if sides is not None:
        return sides[1] if name in REFLECTED else sides[0]
    return _mypy.call_receiver(ctx.context)


def selection(ctx: Any, name: str, receiver: bool) -> Tuple[str, Optional[List[Tuple[str, List[object]]]]]:
    """(class, operands) of a selection's call: SELECTION and its operands by
    role (select_operands), or NONLINEAR and None where it selects nothing
    (`torch.where(c)` alone: the indices of its nonzero entries)."""
    selected = select_operands(ctx, name, receiver)
    return (SELECTION, selected) if selected is not None else (NONLINEAR, None)


def select_operands(ctx: Any, name: str, receiver: bool) -> Optional[List[Tuple[str, List[object]]]]:
    """The operands of a selection (vocab.opclasses.SELECTIONS) by role, the
    selector first: a value that is zero (a literal 0, or a tensor of zeros,
    `torch.zeros_like(x).scatter_add(0, i, p)`) is no term and left out, a
    rank number is its operand type (ranks.py), any other number SCALAR.
    None where no selector or no value is written (`torch.where(c)` alone:
    the indices of its nonzero entries)."""
    selector: Optional[Tuple[str, List[object]]] = None
    values: List[Tuple[str, List[object]]] = []
    for param, expr, typ, is_selector in _selection_roles(ctx, name, receiver):
        text = receiver_text(ctx) if param == _RECEIVER else _mypy.expr_text(expr)
        if is_selector:
            selector = (text, candidates(typ)) if holds_tensor(typ) else None
        elif holds_tensor(typ):
            values.append((text, [] if _no_term(expr, typ, ctx, param) else candidates(typ)))  # []: no term
        elif (rank := rank_operand(typ)) is not None:  # where(m, x, rank): differs by rank
            values.append((RankText(text), [rank]))
        else:
            values.append((text, [] if _no_term(expr, typ) else [SCALAR]))
    if selector is None or not values:
        return None
    return [selector] + [v for v in values if v[1]]


def selection_key(ctx: Any, name: str, receiver: bool) -> Tuple[bool, ...]:
    """Which values of a selection are no term (select_operands): the key
    beside the call's question, whose types do not tell a literal 0 from
    1.0, or torch.zeros(n) from another R value."""
    return tuple(_no_term(expr, typ, ctx, param) for param, expr, typ, is_selector
                 in _selection_roles(ctx, name, receiver) if not is_selector)


def _selection_roles(ctx: Any, name: str, receiver: bool) -> List[Tuple[str, Any, _mypy.Type, bool]]:
    """(parameter, expression, type, whether it is the selector) of each
    argument a selection's roles name, the receiver first as a value."""
    selector, values = SELECTIONS[name]
    roles: List[Tuple[str, Any, _mypy.Type, bool]] = []
    if receiver:
        roles.append((_RECEIVER, _mypy.call_receiver(ctx.context), ctx.type, False))
    for formal, exprs, types in _mypy.formal_groups(ctx):
        if exprs and formal is not None and (formal == selector or formal in values):
            roles.append((formal, exprs[0], types[0], formal == selector))
    return roles


_RECEIVER = "<receiver>"  # a method's receiver among a selection's roles


def _no_term(expr: Any, typ: _mypy.Type, ctx: Any = None, param: str = "") -> bool:
    """A value of a selection that adds nothing: a literal 0, a tensor of
    zeros (also a receiver whose one binding made zeros and that nothing has
    read since, `out = torch.zeros(n); out.index_add_(0, i, p)`, or that the
    op's statement rebinds, `out = out.index_add(0, i, p)`: zero_terms)."""
    if holds_tensor(typ):
        if param == _RECEIVER and (spmd := spmd_of(typ)) is not None and spmd.nograd:  # as a factory's value
            if _mypy.holds_zeros(ctx.api, ctx.context):
                return True
        if param == _RECEIVER and expr is not None and _mypy.zeros_candidate(expr):
            return _mypy.zeros_operand(ctx.api, expr, ctx.context) is not None
        return expr is not None and _mypy.makes_zeros(expr)
    return keeps_class(ZERO_FILL, _mypy.literal_value(expr)) if expr is not None else False


class RankText(str):
    """The text of an operand that is a rank number (its messages say so)."""


def rank_operand(typ: _mypy.Type) -> Optional[Spmd]:
    """The operand type of the rank numbers (plugin/ranks.py) an argument
    holds, itself or in a slice or a tuple of indices; None: none."""
    return joined_rank(_mypy.rank_texts(typ))


def joined_rank(texts: List[str]) -> Optional[Spmd]:
    """The operand type of rank numbers taken together (their canonical
    strings): V on every axis one of them differs on; None: none."""
    found = [s for s in map(spmd_of_text, texts) if s is not None]
    if len(found) < 2:
        return found[0] if found else None
    rest = V if any(s.rest is V for s in found) else R
    return Spmd.of({a: V for s in found for a, t in s.axes.items() if t is V}, None, True, rest)


def _as_rank(side: Text, was: Text) -> Text:
    return RankText(str(side)) if isinstance(was, RankText) else side


def _device(ctx: Any, expr: _mypy.Expression) -> bool:
    """Whether `expr` is bound to the callee's parameter `device` (written by name or not)."""
    return any(e is expr for e, _ in _mypy.formal_args(ctx, "device"))


def ranked_call(ctx: Any) -> bool:
    """Whether a rank number is among the call's arguments (a device aside)."""
    return any(
        rank_operand(typ) is not None and not _device(ctx, e) for _, e, typ in _mypy.call_args(ctx)
    )


def _sequence_operands(
    ctx: Any, expr: _mypy.Expression, typ: _mypy.Type, text_of: Callable[[Any], Text], dropped: Tuple[Any, ...] = ()
) -> List[Tuple[Text, List[object]]]:
    """The tensors of a sequence argument, each an operand: a display's items
    (a starred item's elements too; none of `dropped`, zeros that are no
    term: zero_terms), a comprehension's element, a copy's (`list(parts)`),
    else the elements of the argument's type."""
    items = _mypy.display_items(expr)
    if items is not None:
        out: List[Tuple[Text, List[object]]] = []
        for item in items:
            inner = _mypy.starred(item)
            if inner is not None:  # [p, *rest]
                out.extend(_sequence_operands(ctx, inner, _mypy.typed_before(ctx.api, inner), text_of))
                continue
            t = _mypy.typed_before(ctx.api, item)
            if holds_tensor(t) and not any(item is d for d in dropped):
                out.append((text_of(item), candidates(t)))
        return out
    copied = _mypy.copied_sequence(expr)
    if copied is not None:  # torch.cat(list(parts)): the elements of parts
        depends_on_site()  # a type the call's key does not hold
        expr, typ = copied, _mypy.typed_before(ctx.api, copied)
    element = _mypy.comprehension_element(expr)
    if element is not None:
        # torch.cat([t.view(1) for t in ts]): the element's own type, as the
        # checker gave it inside the comprehension (not yet given: plain);
        # each alternative of a Union an operand of its own, as the elements
        # may take them all (`[x for x in (p, r)]`)
        depends_on_site()
        t = _mypy.typed_already(ctx.api, element)
        if t is None or not holds_tensor(t):
            return []
        return [(text_of(element), [c]) for c in candidates(t)]
    return [(text_of(expr), [spmd_of(t)]) for t in _mypy.element_types(typ)]


def _lazy_text(expr: _mypy.Expression) -> SourceText:
    return SourceText(_mypy.expr_text, expr)


def _side(where: Tuple[Any, int]) -> str:
    sides = _mypy.operator_sides(where[0])
    return sides[where[1]] if sides is not None else _mypy.UNRENDERED


def receiver_text(ctx: Any, fallback: str = _mypy.UNRENDERED) -> str:
    callee = getattr(ctx.context, "callee", None)
    base = getattr(callee, "expr", None)
    if base is None:
        sides = _mypy.operator_sides(ctx.context)
        if sides is not None:
            return sides[0]
        base = getattr(ctx.context, "base", None)
    text = _mypy.expr_text(base) if base is not None else _mypy.UNRENDERED
    return fallback if text == _mypy.UNRENDERED else text


def in_spmd_file(ctx: Any) -> bool:
    """Whether the file a hook's call stands in mentions spmd."""
    return mentions_spmd(_mypy.checker_path(ctx.api), _mypy.check_owner(ctx.api))


def plain_outside_spmd(ctx: Any, result: _mypy.Type) -> _mypy.Type:
    """`result`, or mypy's own answer where it holds no carrier and the call
    stands in a file that never mentions spmd: there plain mypy's result
    (Any from Module.__call__, say) is the one its user sees without us."""
    if not _mypy.holds_carrier(result) and not in_spmd_file(ctx):
        return ctx.default_return_type
    return result


def unknown_in_spmd_file(ctx: Any, default: _mypy.Type) -> _mypy.Type:
    """A tensor result of unknown SPMD type: SpmdTensor[Any] in files that use spmd,
    so that returning it from an annotated function is no error (gradual typing)."""
    if _mypy.has_tensor(default) and in_spmd_file(ctx):
        return _mypy.replace_tensors(default, _mypy.unknown_carrier(ctx.api))
    return default


def typed_result(ctx: Any, spmd: Optional[Spmd], typed_operand: bool) -> _mypy.Type:
    """The default result with its tensors carrying `spmd`; SpmdTensor[Any] when the
    rules cannot type it from a typed operand (it then fits any annotation).
    Without a typed operand, only files that use spmd get carriers (a
    factory's R): elsewhere, torch's own sources among them, the carrier's
    module may not even be analysed yet.  An op on unannotated tensors alone
    keeps torch's plain Tensor, as its operands have: untyped code is typed as
    plain mypy types it (a list or dict built from such values holds plain
    Tensors, so a plain Tensor added later fits)."""
    default = ctx.default_return_type
    if not _mypy.has_tensor(default):
        return default
    if not typed_operand and (spmd is None or not in_spmd_file(ctx)):
        return default
    new = carrier(ctx.api, spmd) if spmd is not None else _mypy.unknown_carrier(ctx.api)
    return _mypy.replace_tensors(default, new)


def has_typed_operand(ctx: Any, receiver: bool) -> bool:
    if receiver and _mypy.carried(ctx.type) is not None:
        return True
    return any(_mypy.carried(t) is not None for _, _, t in _mypy.call_args(ctx))


def _dotted_ast(text: str) -> ast.expr:
    """`a.b.c` as ast.parse would give it (without parsing: hooks run per call)."""
    first, *rest = parts = text.split(".")
    if not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        return ast.parse(text, mode="eval").body  # None, True, f(...).x
    node: ast.expr = ast.Name(first, ast.Load())
    for part in rest:
        node = ast.Attribute(node, part, ast.Load())
    return node


def spmd_expr_ast(expr: _mypy.Expression, names: Dict[str, str]) -> ast.expr:
    """Rebuild the small expression language of Spmd(...) as stdlib ast for the decoder."""
    full = _mypy.fullname_of(expr)
    if full is not None:  # rendered only here: a call's text costs a walk of it
        text = _mypy.expr_text(expr)
        if text != _mypy.UNRENDERED:
            names[text] = full
            return _dotted_ast(text)
    value = _mypy.str_value(expr)
    if value is not None:
        return ast.Constant(value)
    number = _mypy.int_value(expr)
    if number is not None:  # as ast writes -1: unary minus on 1
        return ast.Constant(number) if number >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-number))
    if getattr(expr, "fullname", None) == "builtins.None":
        return ast.Constant(None)
    items = getattr(expr, "items", None)
    if items is not None and expr.__class__.__name__ == "TupleExpr":
        return ast.Tuple([spmd_expr_ast(e, names) for e in items], ast.Load())
    parts = _mypy.call_parts(expr)
    if parts is not None:
        callee_expr = getattr(expr, "callee")
        return ast.Call(
            spmd_expr_ast(callee_expr, names),
            [spmd_expr_ast(a, names) for a in parts[1]],
            [ast.keyword(k, spmd_expr_ast(v, names)) for k, v in parts[2]],
        )
    raise AnnotationError(f"cannot read {_mypy.expr_text(expr)!r} statically", 0)


def grad_off(api: Any, context: Any) -> Optional[str]:
    """Whether the code being checked at `context` runs with gradients off:
    nograd_regions.FUNCTION (an autograd Function's forward or backward),
    NO_GRAD, or None."""
    depends_on_site()
    return grad_off_at(_mypy.checker_path(api), getattr(context, "line", -1), _mypy.check_owner(api))


def in_function_body(api: Any, context: Any) -> bool:
    return grad_off(api, context) == FUNCTION


def without_gradient(spmd: Spmd) -> Spmd:
    """The same type, carrying no gradient."""
    if spmd.nograd:
        return spmd
    if spmd.spec is None:
        return Spmd.of(spmd.axes, None, True, spmd.rest)
    named = set(spmd.spec.axes)
    return Spmd.of({a: t for a, t in spmd.axes.items() if a not in named}, spmd.spec, True)
