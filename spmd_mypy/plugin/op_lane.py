"""The common op call's way through ops.op_hook, kept short.

Most op calls in annotated code need nothing but their operands' types:
`x * 2.0`, `F.gelu(x)`, `x.sum(1)`, `x.to(torch.float32)`,
`x.transpose(0, 1)`, each operand a carrier or a number.  `quick_lane`
answers such a call from the operands' canonical strings (and the few
literal facts the rules read: a dtype, the dims of a transpose), remembering
the result per question: a codebase asks the same question of the same op
many times.  The answer is op_inference's (the same rules, the same memo),
typed as the general path types it.

It steps aside (None) for everything else, and the general path answers,
naming the operands in its messages: a broken rule, a plain tensor, a
Union, a sequence of tensors, PS/PSA values, `out=`, a product or affine op,
a factory or random op, code in a global or configured scope.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from ..vocab.contractions import TRANSPOSES, transposed_dim
from ..vocab.localtype import V, Shard, local_kind
from ..vocab.opclasses import (
    AFFINE,
    ASSIGN,
    DTYPE_CASTS,
    ARGUMENT_CLASSES,
    DTYPE_ARGUMENT_OPS,
    FACTORY,
    NO_GRAD_RESULTS,
    NONLINEAR,
    RANDOM,
    REFLECTED,
    SCALAR_OPERANDS,
    SELECTION,
    WITHOUT_OPERANDS,
    cast_class,
)
from ..vocab.spec import Spmd
from . import _mypy, contraction
from .answers import plain_local_code, uses_spmd
from .carrier import spmd_of_text
from .op_inference import asks_for_grad, factory_canonical, typed_quietly

_MAX_ANSWERS = 65536  # per op: a long daemon session drops what it no longer asks


def quick_lane(
    name: str, cls: str, namespace: str, receiver: bool, otherwise: Callable[[Any], _mypy.Type]
) -> Optional[Callable[[Any], _mypy.Type]]:
    """The lane of one op, answering `otherwise(ctx)` where it steps aside
    (None when its rule needs more than its operands' types: products,
    affine, factory, random, assigning and selecting ops).  It is the op's hook itself:
    the most frequent call of the plugin goes through no other function."""
    if cls in (FACTORY, RANDOM, ASSIGN, SELECTION) or name in AFFINE or name in ARGUMENT_CLASSES or contraction.is_product(name):
        return None
    scalars = name in SCALAR_OPERANDS
    reflected = name in REFLECTED
    casts = (receiver and name in DTYPE_CASTS) or name in DTYPE_ARGUMENT_OPS
    transposes = name in TRANSPOSES
    # question (the operands' strings; with the swap, dtype and dims where
    # they matter) -> the result's canonical string
    answers: Dict[Tuple[object, ...], str] = {}

    plain_key = not (reflected or casts or transposes)
    no_grad = name in NO_GRAD_RESULTS
    # `total = total + a - b` after `total = torch.zeros(n)`: the sum's type
    # is the name's from its binding on (_mypy.retype_sum)
    sums = receiver and name in _SUM_DUNDERS
    operands, owner_of = _mypy.simple_operands, _mypy.check_owner
    restore, flags = _mypy.restore_parameters, _mypy.FLAG_NAMES

    def lane(ctx: Any) -> _mypy.Type:
        texts = operands(ctx, receiver, scalars)
        if texts is None:
            return otherwise(ctx)
        api = ctx.api
        here = _HERE[0]
        owner = owner_of(api)
        if owner is not here.owner or owner is None:  # another file, or another pass over it
            here = _renewed(api, owner)
        if not here.plain or flags:
            return otherwise(ctx)
        restore(api)  # h = h + r in a function generic in a layout
        if plain_key:
            swap, dtype, dims, key = False, _NO_CAST, None, texts
        else:
            swap = reflected and receiver and len(texts) == 2 and _mypy.is_operator(ctx.context)
            dtype = dtype_written(ctx) if casts else _NO_CAST
            dims = _ints(ctx) if transposes else None
            key = (texts, swap, dtype, dims)
        found = answers.get(key)
        if found is None:
            op_cls = cls if dtype is _NO_CAST else cast_class(name, dtype, cls)
            # ops of one class take the same rules: their answers are shared
            # (the name matters only where a transpose moves dims by it)
            shared = (op_cls, cls, no_grad, texts, swap, dims, name if transposes else None)
            found = _SHARED.get(shared)
            if found is None:
                spmd = _infer(name, cls, op_cls, texts, swap, dims)
                if spmd is None:
                    return otherwise(ctx)  # a rule broken, or no type: the general path reports and types it
                found = _keep(_SHARED, shared, spmd.canonical())
            _keep(answers, key, found)
        made = here.carriers.get(found)
        if made is None:
            made = here.carriers[found] = _mypy.carrier_in_checker(api, found)
        if sums:
            _mypy.retype_sum(api, ctx.context, made)
        return made

    return lane


_SUM_DUNDERS = frozenset({"__add__", "__sub__", "__radd__", "__rsub__"})


class _Here(NamedTuple):
    """What the lanes know of the file being checked, per owner (one check
    pass over one file, _mypy.check_owner): whether its code is plain local
    code, and the carrier types built there, by canonical string."""

    owner: object
    plain: bool
    carriers: Dict[str, _mypy.Type]


_HERE: List[_Here] = [_Here(None, False, {})]


def _renewed(api: Any, owner: object) -> _Here:
    """What the lanes know of the file the checker `api` is on, for its check owner."""
    here = _HERE[0] = _Here(owner, plain_local_code(api), {})
    return here


def factory_lane(
    name: str, namespace: str, otherwise: Callable[[Any], _mypy.Type]
) -> Optional[Callable[[Any], _mypy.Type]]:
    """The lane of torch.zeros / empty / randn and the like (WITHOUT_OPERANDS)
    called with no tensor among their arguments: the result's type follows
    from the name and whether requires_grad= asks for a gradient.  Like the
    quick lane, it is the op's hook and answers `otherwise(ctx)` where it
    steps aside."""
    if namespace != "torch" or name not in WITHOUT_OPERANDS:
        return None

    def lane(ctx: Any) -> _mypy.Type:
        if _mypy.simple_operands(ctx, False, False, carrier_needed=False) != ():
            return otherwise(ctx)  # a tensor among the arguments, or an argument the lane does not read
        api = ctx.api
        if not plain_local_code(api):
            return otherwise(ctx)
        if not uses_spmd(api):
            return ctx.default_return_type  # elsewhere a factory stays a plain Tensor
        return _mypy.carrier_in_checker(api, factory_canonical(name, asks_for_grad(ctx)))

    return lane


_NO_CAST: Any = object()  # the dtype of an op that is no dtype cast

# (class after a cast, class, no-gradient result, operands, swap, dims, name of
# a transpose) -> the result's canonical string, for every op of the lane
_SHARED: Dict[Tuple[object, ...], str] = {}


def _keep(table: Dict[Tuple[object, ...], str], key: Tuple[object, ...], value: str) -> str:
    if len(table) >= _MAX_ANSWERS:
        table.clear()  # a long daemon session: questions no longer asked
    table[key] = value
    return value


def _infer(
    name: str, cls: str, op_cls: str, texts: Tuple[object, ...], swap: bool, dims: Optional[Tuple[int, ...]]
) -> Optional[Spmd]:
    values: List[object] = []
    for text in texts:
        value = spmd_of_text(text) if isinstance(text, str) else text
        if value is None:
            return None  # a carrier's string that does not parse: unknown
        values.append(value)
    if swap:
        values.reverse()  # `2.0 - x` runs x.__rsub__(2.0): the left operand first
    spmd = typed_quietly(op_cls, values, name in NO_GRAD_RESULTS)
    if spmd is None:
        return None
    if op_cls is NONLINEAR and op_cls is not cls:
        spmd = Spmd.of(spmd.axes, spmd.spec, True, spmd.rest)  # an integer result: no gradient
    if dims is not None:
        source = texts[0]  # the receiver, or the function's first operand
        spmd = transposed(spmd_of_text(source) if isinstance(source, str) else None, spmd, name, list(dims))
    return spmd


def _ints(ctx: Any) -> Tuple[int, ...]:
    """The int literals among the arguments, in order (a transpose's dims)."""
    return tuple(d for d in (_mypy.int_value(e) for _, e, _ in _mypy.call_args(ctx)) if d is not None)


def dtype_written(ctx: Any) -> Optional[str]:
    """The name of a torch dtype written as an argument (`torch.int64` ->
    "int64"), or None."""
    for _, expr, _ in _mypy.call_args(ctx):
        full = _mypy.fullname_of(expr)  # torch.int64 is defined as torch._C.int64
        if full is not None and full.startswith(("torch.", "torch._C.")):
            return full.rpartition(".")[2]
    return None


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
