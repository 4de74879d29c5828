"""Where SPMD types meet parameters: calls of annotated functions, methods and modules.

mypy compares carriers by their Literal strings, which is too strict for
arguments: a value that knows more axes than a parameter names still fits it,
and an unannotated tensor is unknown (gradual typing lets it through).  So at
every call site a signature hook hands mypy the signature with those
parameters relaxed to plain Tensor, and the function (or method) hook, which
sees the arguments as mypy typed them, checks each per axis with
`vocab.mismatches` and reports spmd-arg with the fix.

Returns and annotated assignments are checked with the same relation in
declared.py; rank numbers given to int parameters in rank_arguments.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, TypeVar

from ..vocab.collectives import fix_call, mismatch_consequence
from ..vocab.localtype import AxisType, I, P, PartitionedShard, R, V
from ..vocab.spec import Spmd, hidden_obligations, mismatches
from . import _mypy
from .carrier import carrier, spmd_of
from .answers import remembered, restore_parameters
from .callsite import in_function_body, plain_outside_spmd, unknown_in_spmd_file, without_gradient
from .errors import SPMD_ARG
from .groups import check_group_arguments, relaxed_group_parameters
from .guard import default_return, default_signature, guarded
from .rank_arguments import check_rank_argument

if TYPE_CHECKING:
    from .layout_vars import Argument

# layout_vars (type variables with values) is imported where a signature
# has one, or a declared Union is compared: most projects have neither.


def report_arg(
    api: Any, expr: Any, got: Spmd, want: Spmd, what: str, code: _mypy.ErrorCode = SPMD_ARG,
    branch: bool = False, inside: Optional[str] = None,
) -> None:
    """`branch`: `got` is one alternative of a value from branches, whose fix
    belongs in the branch that gives it (said in words, not as a call here).
    `inside`: the tensor is an item of `expr` ("list": the fix is a
    comprehension over it; any other container: no call is offered)."""
    if got is want or got == want:
        return  # the common case, and never an error
    if want.shape is None and _mypy.makes_zeros(expr):
        # torch.zeros(n) is every type: zeros on every rank are the value
        # (R, I), each rank's own (V, S(i)) and a pending sum of zeros (P)
        return
    if not got.nograd and in_function_body(api, expr):
        # Autograd records nothing in an autograd Function's forward and
        # backward (its backward is the gradient): only forward values count.
        got = without_gradient(got)
    hidden, wrong = hidden_obligations(got, want), mismatches(got, want)
    if not (hidden or wrong or (want.nograd and not got.nograd)):
        return  # a value that knows more axes than declared: it fits
    name = _mypy.expr_text(expr)  # for the messages only
    if want.nograd and not got.nograd:
        # The callee was checked assuming no gradient flows through this tensor.
        api.fail(
            f"{what} carries a gradient where a tensor without one (nograd) is expected: "
            f"the callee's Invariant rules were relaxed for it, so its gradient would not be "
            f"reduced correctly. Hint: pass {name}.detach()",
            expr,
            code=code,
        )
    for axis, g in hidden:
        fix = _fix(g, R, axis, name, inside) if g is P else None
        api.fail(
            f"{what} is {g} on axis {axis!r}, which the annotation does not name: "
            + (
                "the code behind it would treat each rank's addend as the value"
                if g is P
                else "the code behind it could reshape, cut or join its partitioned dim"
                if isinstance(g, PartitionedShard)
                else "the code behind it could mix it with per-rank values, and its gradient would not be summed"
            )
            + f". Hint: name {axis!r} in the annotation"
            + (f", or reduce first: {fix}" if fix else ""),
            expr,
            code=code,
        )
    for axis, g, w in wrong:
        fix = _fix(g, w, axis, name, inside)
        if fix and branch:
            fix = f"in the branch where {name} is {g}, {fix}"
        api.fail(
            f"{what} is {g} on axis {axis!r} where {w} is expected: "
            f"{mismatch_consequence(g, w, axis, got.nograd)}" + (f". Hint: {fix}" if fix else ""),
            expr,
            code=code,
        )


def _fix(got: Any, want: Any, axis: str, name: str, inside: Optional[str]) -> Optional[str]:
    if inside is None:
        return fix_call(got, want, axis, name)
    each = fix_call(got, want, axis, "t") if inside == "list" else None
    return f"[{each} for t in {name}]" if each else None


# What a declared place (parameter, return, assignment) accepts: one SPMD
# type, or each alternative of a declared Union of tensors.
Wants = Tuple[Spmd, ...]


def report_against(
    api: Any, expr: Any, got: Spmd, wants: Wants, what: str, code: _mypy.ErrorCode = SPMD_ARG,
    branch: bool = False, inside: Optional[str] = None,
) -> None:
    """report_arg against a declared Union: a value fits when it fits one
    alternative (each alternative of a value from branches is checked on its
    own by the caller); otherwise it is reported against the closest."""
    if len(wants) > 1:
        from .layout_vars import problems

        counts = [problems(got, w) for w in wants]
        if 0 in counts:
            return
        wants = (wants[counts.index(min(counts))],)
    if wants:
        report_arg(api, expr, got, wants[0], what, code, branch, inside)


def wants_of(declared: _mypy.Type) -> Optional[Wants]:
    """What a declared tensor type accepts: its SPMD type, or, for a Union of
    tensors (a layout that depends on a flag), each alternative's; None when
    no alternative carries one."""
    alternatives = _mypy.union_alternatives(declared)
    items = alternatives if alternatives is not None else [declared]
    found = tuple(s for s in map(spmd_of, items) if s is not None)
    return found or None


def _expected(formal: _mypy.Type) -> Optional[Wants]:
    """The SPMD types a parameter accepts for each tensor it holds (itself,
    Optional, list...): one, or every alternative of a Union of tensors."""
    tensors = [t for t in _mypy.union_items(formal) if _mypy.is_tensor(t)]
    if len(tensors) > 1:
        return wants_of(_mypy.union_of(tensors))
    for t in _mypy.element_types(formal):
        spmd = spmd_of(t)
        if spmd is not None:
            return (spmd,)
    return None


def _check_argument(api: Any, expr: Any, typ: _mypy.Type, want: Wants, label: str) -> List[Optional[Spmd]]:
    """Check one argument of type `typ`; return the types it holds (None: an
    unknown tensor).  The items of a list display are checked one by one, by
    the types mypy gave them (the list's own type is joined in the context of
    the relaxed parameter and has lost them)."""
    held: List[Optional[Spmd]] = []
    items = _mypy.display_items(expr)
    pairs = [(item, _mypy.typed_before(api, item)) for item in items] if items is not None else [(expr, typ)]
    for item, item_type in pairs:
        branch = _mypy.union_alternatives(item_type) is not None  # a value from branches
        inside = _mypy.container_kind(item_type)  # a list of tensors: the fix is per item
        for t in _mypy.element_types(item_type):
            got = spmd_of(t)
            held.append(got)
            if got is not None:
                report_against(api, item, got, want, label, branch=branch, inside=inside)
    return held


class _Passthrough(NamedTuple):
    axes: Dict[str, AxisType]  # axes some argument names and no parameter does
    rest: Optional[AxisType]  # every axis no argument names (spec form: R there)


def _passthrough(held: List[Optional[Spmd]], named: set) -> _Passthrough:
    """Types of the result on axes no parameter of the callee names.

    The callee sees those axes as unknown, so it applies no collective there
    and the arguments' types pass through: R if every argument is R there, V
    if one is V or S(i).  (P and I there are errors already:
    hidden_obligations.)  Without this, the result would be unknown on those
    axes and fit any declared type, e.g. a dp=S(0) batch through a tp-only
    helper returned as dp=R.  An argument in the spec form is R on every
    axis it does not name (likewise a factory result's `*=R`), so when every
    argument knows every axis the result does too (`rest`).  An unknown
    argument makes every such axis unknown."""
    if not held or any(h is None for h in held):
        return _Passthrough({}, None)
    out: Dict[str, AxisType] = {}
    axes = {a for h in held if h is not None for a in h.axes} - named
    for axis in sorted(axes):
        types = [h.axis_type(axis) for h in held if h is not None]
        if any(t is None or t is P or t is I for t in types):
            continue
        out[axis] = _join(types)
    others = [(R if h.spec is not None else h.rest) for h in held if h is not None]
    rest = None if any(t is None or t is P or t is I for t in others) else _join(others)
    return _Passthrough(out, rest)


def _join(types: List[Optional[AxisType]]) -> AxisType:
    return R if all(t is R for t in types) else V


def _with_passthrough(api: Any, ret: _mypy.Type, extra: _Passthrough, named: set) -> _mypy.Type:
    declared = spmd_of(ret)
    if declared is None or declared.spec is not None or (not extra.axes and extra.rest is None):
        return ret
    merged = {**extra.axes, **declared.axes}
    rest = declared.rest
    if rest is None and named <= set(declared.axes):
        # `rest` covers every axis the result does not name; an axis a
        # parameter names and the return does not stays unknown, so only
        # when there is none.
        rest = extra.rest
    return carrier(api, Spmd.of(merged, None, declared.nograd, rest))


T = TypeVar("T")
# A signature's parameter types -> something computed from them.  Keyed by the
# identities of the type objects, which the entry keeps alive: a bound
# method's signature is new on every call but shares them, torch's are the
# same objects on every call, and an edited function (daemon) gets new ones;
# those are looked up by value too (_mypy.types_by_value).
ByParameters = Dict[Tuple[object, ...], Tuple[List[_mypy.Type], Any]]
_MAX_BY_PARAMETERS = 65536


def _by_parameters(table: ByParameters, sig: _mypy.CallableType, compute: Callable[[List[_mypy.Type]], T]) -> T:
    key = tuple(map(id, sig.arg_types))
    hit = table.get(key)
    if hit is None:
        if len(table) >= _MAX_BY_PARAMETERS:
            table.clear()  # a long daemon session: drop what edits left behind
        # new objects equal to known ones (a function the daemon analysed
        # again): the answer of those, kept under the new identities too
        same = _mypy.types_by_value(sig.arg_types)
        hit = table.get(same) if same is not None else None
        if hit is None:
            hit = (list(sig.arg_types), compute(sig.arg_types))
            if same is not None:
                table[same] = hit
        table[key] = hit
    return hit[1]


_EXPECTED: ByParameters = {}  # -> what each parameter asks (see _expected)
_GROUPS: ByParameters = {}  # -> the parameters with groups relaxed (None: no group of an axis)
_RELAXED_SPMD: ByParameters = {}  # -> the parameter types the signature hook gives mypy
_LISTS: ByParameters = {}  # -> per parameter, whether it holds a list or dict of tensors
_RANKED: ByParameters = {}  # -> per parameter, its rank type if declared one (_mypy.declared_rank_text)


def _expected_of(sig: _mypy.CallableType) -> List[Optional[Wants]]:
    return _by_parameters(_EXPECTED, sig, lambda params: [_expected(t) for t in params])


def _lists_of(sig: _mypy.CallableType) -> List[bool]:
    return _by_parameters(_LISTS, sig, lambda params: [_mypy.relaxes_plain(t) for t in params])


def _given_lists(ctx: Any, sig: _mypy.CallableType) -> List[bool]:
    """Per parameter declaring a list or dict of plain tensors: whether it is
    given only names already typed as holding carriers that fit it as plain
    mypy sees them (`views = [a.view(1) for ...]`, a list of carriers: lists
    are invariant, so it is no list[Tensor] until relaxed).  A display or
    comprehension written at the call is typed in the parameter's context
    and needs nothing; a name of another list, or of a tuple, keeps plain
    mypy's verdict."""
    lists = _lists_of(sig)
    if not any(lists):
        return lists
    api = ctx.api
    return [
        is_list and i < len(ctx.args) and bool(ctx.args[i])
        and all(_mypy.fits_plain_name(api, a, sig.arg_types[i]) for a in ctx.args[i])
        for i, is_list in enumerate(lists)
    ]


_TYPEDDICTS: ByParameters = {}  # -> per parameter, a TypedDict with a list or dict of plain tensors


def _relax_displays(ctx: Any, sig: _mypy.CallableType, params: List[_mypy.Type]) -> List[_mypy.Type]:
    """A TypedDict parameter given a dict display (`take({"tokens": views})`):
    its items given names holding carriers relaxed as a list parameter is
    (_mypy.relaxed_typeddict_display); `params` when nothing changes."""
    marks = _by_parameters(_TYPEDDICTS, sig, lambda ps: [_mypy.typeddict_with_plain_lists(t) for t in ps])
    if not any(marks):
        return params
    out = list(params)
    for i, mark in enumerate(marks):
        found = None
        if mark and i < len(ctx.args) and len(ctx.args[i]) == 1:
            found = _mypy.relaxed_typeddict_display(ctx.api, ctx.args[i][0], sig.arg_types[i])
        if found is not None:
            out[i] = found
    return out if any(o is not p for o, p in zip(out, params)) else params


def _relax_given(api: Any, params: List[_mypy.Type], given: List[bool]) -> List[_mypy.Type]:
    return [_mypy.relax_tensors(api, t) if g else t for t, g in zip(params, given)] if any(given) else params


def _keep_displays(ctx: Any, sig: _mypy.CallableType, expected: List[Optional[Wants]], relaxed: List[_mypy.Type]) -> List[_mypy.Type]:
    """A list or dict parameter declaring an SPMD type, given only displays
    or comprehensions (`take([a, b])`): its list stays a list, carriers made
    plain, so mypy types the display in that context and holds its shape
    (items are checked per axis all the same).  Any other argument gets the
    Sequence / Mapping, and its shape is held against the declared list by
    the function hook (_fits_declared)."""
    lists = _lists_of(sig)
    keep = [
        want is not None and is_list and i < len(ctx.args) and bool(ctx.args[i])
        and all(_mypy.typed_in_context(a) for a in ctx.args[i])
        for i, (want, is_list) in enumerate(zip(expected, lists))
    ]
    if not any(keep):
        return relaxed
    return [_mypy.erase_carriers(ctx.api, t) if k else r for t, r, k in zip(sig.arg_types, relaxed, keep)]


# Between the signature hook and the function hook of one call: the call,
# and per overload item tried (one for a plain function) the signature mypy
# had before relaxing, what each parameter asks and the relaxed signature
# (its result type object is the key).  mypy tries an overload's items in
# turn with errors filtered and passes the item's result type object to the
# function hook, so each item's arguments are checked against that item's
# parameters (an item whose arguments do not fit is not taken).  Keyed by
# the call expression, which the entry keeps alive; mypy may type a call
# more than once, so an item's entry stays until the next signature hook of
# that item.
Pending = Tuple[_mypy.CallableType, List[Optional[Wants]], _mypy.CallableType]
_PENDING: Dict[int, Tuple[Any, Dict[int, Pending]]] = {}
_MAX_PENDING = 65536


def _relax(ctx: Any) -> _mypy.CallableType:
    """The signature hook: parameters holding carriers become plain Tensor, and declared rank numbers
    int, so mypy's exact comparison of Literal strings never runs (the function hook checks them per
    axis, once mypy has typed the arguments; a rank argument: ranks.through_call)."""
    sig = ctx.default_signature
    expected = _expected_of(sig)
    # ProcessGroup parameters declared as an axis take any group (checked below)
    group_params = _by_parameters(_GROUPS, sig, relaxed_group_parameters)
    ranked = _by_parameters(_RANKED, sig, lambda params: [_mypy.declared_rank_text(t) for t in params])
    given = _given_lists(ctx, sig)
    api = ctx.api
    if group_params is None and not any(e is not None for e in expected) and not any(ranked):
        # no SPMD type: only its lists of tensors, given lists of carriers
        relaxed_plain = _relax_displays(ctx, sig, _relax_given(api, sig.arg_types, given))
        return sig if relaxed_plain is sig.arg_types else _mypy.with_arg_types(sig, relaxed_plain)
    relaxed = _by_parameters(_RELAXED_SPMD, sig, lambda params: [
        _mypy.relax_tensors(api, formal) if want is not None else _mypy.relax_rank(api, formal) if rank else formal
        for want, formal, rank in zip(expected, group_params or params, ranked)
    ])
    relaxed = _relax_displays(ctx, sig, _relax_given(api, _keep_displays(ctx, sig, expected, relaxed), given))
    if len(_PENDING) >= _MAX_PENDING:
        _PENDING.clear()
    entry = _PENDING.get(id(ctx.context))
    if entry is None or entry[0] is not ctx.context:
        entry = _PENDING[id(ctx.context)] = (ctx.context, {})
    items = entry[1]
    for key in [k for k, item in items.items() if item[0] is sig]:
        del items[key]  # this item typed again: one entry per item
    out = _mypy.with_arg_types(sig, relaxed, own_result=True)
    items[id(out.ret_type)] = (sig, expected, out)
    return out


def _pending(ctx: Any) -> Optional[Pending]:
    """The item of the call the function hook is typing (the last one tried
    when the result type was rebuilt, as for a generic callee)."""
    entry = _PENDING.get(id(ctx.context))
    if entry is None or entry[0] is not ctx.context or not entry[1]:
        return None
    hit = entry[1].get(id(ctx.default_return_type))
    if hit is not None and hit[2].ret_type is ctx.default_return_type:
        return hit
    return next(reversed(entry[1].values()))


def pending_signature(ctx: Any) -> Optional[_mypy.CallableType]:
    """The unrelaxed signature of the call a function hook is typing, if relaxed."""
    entry = _pending(ctx)
    return entry[0] if entry is not None else None


def _fits_declared(ctx: Any, entry: Pending, i: int, expr: Any, typ: _mypy.Type, kind: Any) -> bool:
    """Whether an argument of a parameter relaxed to Sequence / Mapping has
    the shape its declared list or dict asks (a tuple does not); if not,
    plain mypy's error for it.  An argument that does not fit the relaxed
    parameter either has mypy's error already."""
    sig, _, relaxed = entry
    if not _lists_of(sig)[i] or _mypy.fits_as_plain(ctx.api, typ, sig.arg_types[i]):
        return True
    if _mypy.fits_as_plain(ctx.api, typ, relaxed.arg_types[i]):
        _mypy.report_as_plain(ctx, sig, i, expr, typ, kind)
    return False


def _check_arguments(ctx: Any, callee: str) -> _mypy.Type:
    """The function hook: each argument per axis against its parameter; the
    result keeps the arguments' types on axes no parameter names."""
    entry = _pending(ctx)
    if entry is None:
        return ctx.default_return_type
    sig, expected, _ = entry
    check_group_arguments(ctx, sig, callee)
    if not any(e is not None for e in expected):
        return ctx.default_return_type
    held: List[Optional[Spmd]] = []
    for i, want in enumerate(expected):
        if want is None or i >= len(ctx.args):
            continue
        name = sig.arg_names[i] if i < len(sig.arg_names) else None
        label = f'Argument "{name}" to "{callee}"' if name else f'Argument {i + 1} to "{callee}"'
        for expr, typ, kind in zip(ctx.args[i], ctx.arg_types[i], ctx.arg_kinds[i]):
            if _fits_declared(ctx, entry, i, expr, typ, kind):
                held += _check_argument(ctx.api, expr, typ, want, label)
    named = {a for e in expected if e is not None for w in e for a in w.axes}
    return _with_passthrough(ctx.api, ctx.default_return_type, _passthrough(held, named), named)


signature_hook = guarded(_relax, default_signature)


def argument_hook(callee: str) -> Any:
    return guarded(lambda ctx: _check_arguments(ctx, callee), default_return)


_RELAXED: ByParameters = {}  # torch signatures -> relaxed types (None: unchanged)
# A torch function's signature is the same object at every call: id -> the
# signature, held, when it has nothing to relax (most of them).
_UNCHANGED: Dict[int, _mypy.CallableType] = {}


def relaxes_torch_parameters(params: List[_mypy.Type]) -> bool:
    """Whether torch_signature_hook changes a signature with these parameter
    types: one holds a list or dict of tensors (torch.cat's)."""
    return any(_mypy.relaxes_plain(t) for t in params)


def _relax_plain_signature(ctx: Any) -> _mypy.CallableType:
    """torch.cat(parts) with parts a list of carriers: lists are invariant, so
    list[Tensor] parameters become Sequence[Tensor] (dict: Mapping).  The
    same for a function declaring no SPMD type (`def f(xs: List[Tensor])`,
    signature_hook) when an argument is a name holding carriers: once a file
    uses spmd its factories' results are carriers, and a list of them is no
    list[Tensor]; such a function's tensors are not checked anyway.
    Relaxed per call, only for the parameters whose arguments need it
    (_mypy.needs_relaxing): elsewhere mypy's own verdict and message stand."""
    sig: _mypy.CallableType = ctx.default_signature
    if _UNCHANGED.get(id(sig)) is sig:
        return sig
    api = ctx.api

    def relax(params: List[_mypy.Type]) -> Optional[List[_mypy.Type]]:
        if not relaxes_torch_parameters(params):
            return None  # most torch signatures: no list of tensors
        relaxed = [_mypy.relax_tensors(api, t) for t in params]
        return None if relaxed == params else relaxed

    relaxed = _by_parameters(_RELAXED, sig, relax)
    if relaxed is None:
        if len(_UNCHANGED) >= _MAX_BY_PARAMETERS:
            _UNCHANGED.clear()
        _UNCHANGED[id(sig)] = sig
        return sig
    args = ctx.args
    chosen = [
        new if new is not old and i < len(args) and any(_mypy.needs_relaxing(api, a, old) for a in args[i]) else old
        for i, (old, new) in enumerate(zip(sig.arg_types, relaxed))
    ]
    return sig if all(c is o for c, o in zip(chosen, sig.arg_types)) else _mypy.with_arg_types(sig, chosen)


torch_signature_hook = guarded(_relax_plain_signature, default_signature)


def _relax_stored_value(ctx: Any) -> _mypy.CallableType:
    """`groups.append(views)`, `by_key[k] = views` on a container of lists of
    plain tensors: the value's list relaxed as a parameter's is (_given_lists).
    A bound method's signature is new at each call, so nothing is memoised."""
    sig = ctx.default_signature
    api = ctx.api
    given = [  # most calls: the value is no name holding carriers, the first test
        i < len(ctx.args) and bool(ctx.args[i]) and all(_mypy.fits_plain_name(api, a, formal) for a in ctx.args[i])
        and _mypy.plain_tensor_container(formal)  # an SPMD-typed list stays invariant
        for i, formal in enumerate(sig.arg_types)
    ]
    relaxed = _relax_given(api, sig.arg_types, given)
    return sig if relaxed is sig.arg_types else _mypy.with_arg_types(sig, relaxed)


storing_signature_hook = guarded(_relax_stored_value, default_signature)


def _bound_parameters(fwd: _mypy.CallableType) -> Dict[int, Any]:
    """layout_vars.bound_parameters, imported only for a signature with a
    parameter typed by a variable with values (else it is empty)."""
    if all(_mypy.value_variable(formal) is None for formal in fwd.arg_types):
        return {}
    from .layout_vars import bound_parameters

    return bound_parameters(fwd)


def call_through(
    ctx: Any, fwd: Optional[_mypy.CallableType], callee: str, args: Optional[Sequence[Tuple[Any, Any, Any]]] = None
) -> _mypy.Type:
    """A call that runs `fwd`: check the arguments against it (`args`, as
    _mypy.call_args gives them: the call's own by default), give its result."""
    if fwd is None:
        return ctx.default_return_type
    _mypy.restore_parameters(ctx.api)
    names = list(fwd.arg_names)
    bound = _bound_parameters(fwd)
    position = 0
    held: List[Optional[Spmd]] = []
    chosen: List[Argument] = []  # arguments of parameters typed by a variable with values
    for name, expr, typ in _mypy.call_args(ctx) if args is None else args:
        if name is None:
            i: Optional[int] = position
            position += 1
        else:
            i = names.index(name) if name in names else None
        if i is None or i >= len(fwd.arg_types):
            continue
        alternatives = [spmd_of(t) for t in _mypy.union_alternatives(typ) or [typ]]  # each branch of a Union
        if i in bound:
            from .layout_vars import Argument

            chosen.append(Argument(bound[i], expr, tuple(alternatives)))
            held += alternatives
            continue
        want = wants_of(fwd.arg_types[i])
        label = f'Argument "{names[i]}" to "{callee}"' if names[i] else f"Argument to {callee}"
        if want is None:  # an int given a rank number, of a forward declaring SPMD types
            if _mypy.rank_texts(typ) and any(wants_of(t) or _mypy.declared_rank_text(t) for t in [*fwd.arg_types, fwd.ret_type]):
                check_rank_argument(ctx.api, label, names[i], expr, typ, fwd.arg_types[i])
            continue
        for got in alternatives:
            held.append(got)
            if got is not None:
                report_against(ctx.api, expr, got, want, label, branch=len(alternatives) > 1)
    returns = _chosen_returns(ctx, fwd, chosen, callee) if fwd.variables else [fwd.ret_type]
    if any(_mypy.has_type_vars(r) for r in returns):
        return ctx.default_return_type  # generic in forward's own variables (megatron's checkpoint): mypy's answer
    if not returns or not any(spmd_of(t) is not None for r in returns for t in _mypy.element_types(r)):
        # an unannotated forward (nn.Linear): of unknown type, or mypy's answer
        return plain_outside_spmd(ctx, unknown_in_spmd_file(ctx, fwd.ret_type))
    named = {a for t in fwd.arg_types for e in [wants_of(t)] if e is not None for w in e for a in w.axes}
    named |= {a for b in bound.values() for s in b.spmds if s is not None for a in s.axes}
    extra = _passthrough(held, named)
    return _mypy.union_of([_with_passthrough(ctx.api, r, extra, named) for r in returns])


def _chosen_returns(ctx: Any, fwd: _mypy.CallableType, args: List[Argument], callee: str) -> List[_mypy.Type]:
    """The results of `fwd` for every choice of its variables' values the
    arguments allow (layout_vars.solve); reports an argument that fits none."""
    free = {}
    for v in fwd.variables:
        values = _mypy.value_variable(v)
        if values is not None and all(a.bound.var != values[0] for a in args):
            free[values[0]] = tuple(values[1])
    from .layout_vars import solve

    solution = solve(args, free)
    if solution.misfit is not None:
        arg, got, wants = solution.misfit
        name = fwd.arg_names[arg.bound.param]
        label = f'Argument "{name}" to "{callee}"' if name else f"Argument to {callee}"
        report_against(ctx.api, arg.expr, got, wants, label)
    returns: List[_mypy.Type] = []
    for choice in solution.choices:
        ret = _mypy.choose(fwd, choice).ret_type
        if ret not in returns:
            returns.append(ret)
    return returns


def _module_call(ctx: Any) -> _mypy.Type:
    """`module(x)` is `module.forward(x)`."""
    return call_through(ctx, _mypy.forward_signature(ctx), "forward")


def _function_apply(ctx: Any) -> _mypy.Type:
    """`Fn.apply(x)` of a custom autograd Function runs its declared `forward(ctx, x)`."""
    return call_through(ctx, _mypy.autograd_function_forward(ctx), "forward")


function_apply_hook = guarded(_function_apply, default_return)

# A module's calls ask the same question over and over (`self.up(h)` in
# every block): answered from the first answer, keyed also by the forward's
# definition, which a daemon edit of the class replaces (answers.py).
module_call_hook = guarded(
    remembered(_module_call, restore_parameters, also=_mypy.forward_definition), default_return
)
