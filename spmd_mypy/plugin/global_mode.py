"""Global SPMD in the checker: partition specs propagated through global code.

Code is global inside a function (or class) decorated `@spmd.global_spmd`
(every mesh axis) or `@spmd.global_spmd(axes=("tp",))` (those axes; the
others keep the local rules), nested functions included, except a function
handed to `spmd.local_map` (local code again).  global_scopes.global_axes_at
finds the scope of a call from its line.

In global code:
  * an op with a row in vocab/factors.py is typed by `factors.propagate` from
    the operands' GlobalTypes (their spec-form carriers) and the call's literal
    arguments; each FactorError is an spmd-global error with its fix.  The
    factor rules include the local per-axis rules (global refines local).
    Axes outside `axes=` are typed by the local rules (op_inference.infer on those axes
    only) and join the result as keywords (an S(i) there reads as V).
  * an operand whose type has no spec (per-axis form: its rank is unknown),
    or a Union, leaves the whole op to the local rules, which are exact when
    the operand has no layout on a global axis; a per-axis S(i) or V there is
    an spmd-global error (a spec is needed).
  * an op without a factor row: if an operand is sharded on a global axis,
    spmd-global (the op may touch that dim and no rule says how); otherwise
    the local rules check it and the result is unknown (SpmdTensor[Any]).
    Non-literal arguments that a rule needs (view(b, s, h)) are treated the
    same way: an error on a sharded operand, else an unknown result.
  * typed collectives on global axes act on the spec (vocab/spec_collectives).
  * arguments of annotated functions, local_map'd callables, returns and
    annotated assignments whose declared type is in the spec form must match
    the spec exactly (per axis, S(i) and V are alike; here the dim counts);
    with a side in per-axis form, each global axis's S dim must match, and a
    collective on a per-axis operand is typed by the local rules only where
    they are exact (global_per_axis.py).

In both modes: spmd.matmul/einsum/linear/sum/mean(..., out_partial_axes=...)
and the spec-level spmd.redistribute(x, src=Spmd(...), dst=Spmd(...));
spmd.local_map(fn, in_types=..., out_types=...) is local_map.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from ..vocab.collectives import CollectiveError, plan
from ..vocab.localtype import P, Shard, V, AxisType
from ..vocab.opclasses import FACTORY_RANKS, NONLINEAR, REFLECTED, SCALAR, SELECTION, op_class
from ..vocab.spec import PartitionSpec, SpecError, Spmd, mismatches
from ..vocab.opnames import OPERATOR_FUNCTIONS, PARTIAL_OPS, STAR_PARAMETERS, TRANSPOSED_ATTRIBUTES, display_name
from . import _mypy, callsite, op_inference
from .callsite import RankText, has_typed_operand, holds_tensor, one_arg, spmd_expr_ast, typed_result
from .annotations import AnnotationError, Meta
from .decoding import decode
from .global_per_axis import collective_problem, shard_mismatch
from .global_scopes import global_axes_at, scopes_for
from .carrier import carrier, spmd_of
from .errors import SPMD_ANNOTATION, SPMD_COLLECTIVE, SPMD_GLOBAL, SPMD_OP
from .guard import default_return, guarded

GLOBAL_OPS = "spmd_mypy.runtime.global_ops."

Typed = Optional[Tuple[Optional[Spmd]]]  # None: not handled here; (type or None,)


if TYPE_CHECKING:
    from ..vocab.factors import FactorError, has_rule, propagate, reads_indices
    from ..vocab.globaltype import GlobalType
    from ..vocab.spec_collectives import apply_collective


def _global_rules() -> None:
    """The factor rules, global types and spec-level collectives (about a
    tenth of the plugin's import), imported where a global type is first
    built: most projects have no global code."""
    global FactorError, GlobalType, apply_collective, has_rule, propagate, reads_indices
    if "propagate" not in globals():
        from ..vocab.factors import FactorError, has_rule, propagate, reads_indices
        from ..vocab.globaltype import GlobalType
        from ..vocab.spec_collectives import apply_collective


# The mesh axis sizes of the `mesh` setting (empty: not fixed), for reshapes
# that split an axis into sub-axes and for divisibility.
_MESH: Dict[str, int] = {}


def configure(settings: Any) -> None:
    _MESH.clear()
    _MESH.update(dict(settings.mesh))


class Scope(NamedTuple):
    axes: Tuple[str, ...]  # () = every mesh axis

    def has(self, axis: str) -> bool:
        return not self.axes or axis in self.axes


def scope_of(ctx: Any) -> Optional[Scope]:
    """The global scope of the call being checked; None in local code."""
    owner = _mypy.check_owner(ctx.api)
    if owner is _WITHOUT_SCOPES[0] and owner is not None:
        return None  # asked per op: most files have no global scope at all
    path = _mypy.checker_path(ctx.api)
    tree = _mypy.checked_tree(ctx.api)  # the facts of the bytes mypy checks: no stat
    if not scopes_for(path, tree):
        _WITHOUT_SCOPES[0] = owner  # one pass over one file: the answer stands while it lasts
        return None
    axes = global_axes_at(path, getattr(ctx.context, "line", -1), tree)
    return None if axes is None else Scope(axes)


_WITHOUT_SCOPES: List[object] = [None]  # the last check owner whose file has no global scope


# -- types ----------------------------------------------------------------------


def to_global(spmd: Spmd, scope: Scope) -> Optional[GlobalType]:
    """The global type of a spec-form value on the scope's axes (None: no spec)."""
    if spmd.spec is None:
        return None
    _global_rules()
    entries = [tuple(a for a in d if scope.has(a)) or None for d in spmd.spec.dims]
    partial = [a for a, t in spmd.axes.items() if t is P and scope.has(a)]
    local = {a: t for a, t in spmd.axes.items() if not isinstance(t, Shard) and t is not P and scope.has(a)}
    return GlobalType(entries, partial, local=local, nograd=spmd.nograd, sizes=spmd.shape)


def _local_only(scope: Scope, names: Sequence[str] = ()) -> Callable[[Spmd], Spmd]:
    """Project a type on the axes that stay local (`names`: every such axis an operand
    names; a spec-form operand is R on those it does not name)."""

    def project(s: Spmd) -> Spmd:
        axes: Dict[str, AxisType] = {}
        for a in set(names) | {a for a in s.axes if not scope.has(a)}:
            t = s.axis_type(a)
            if t is not None:
                axes[a] = V if isinstance(t, Shard) else t
        return Spmd.of(axes, None, s.nograd)

    return project


def _has_local_axes(spmds: Sequence[Spmd], scope: Scope) -> bool:
    return bool(scope.axes) and any(not scope.has(a) for s in spmds for a in s.axes)


def merge(
    g: GlobalType, local: Optional[Spmd], scope: Scope, out_partial: Sequence[str] = (), sized: bool = True
) -> Spmd:
    """The Spmd of a global result plus the types of the axes that stay local.
    sized=False drops the result's sizes (sizes flow from annotations that state
    them: an op on operands without sizes gives a type without them)."""
    gs = g.to_spmd()
    spec = gs.spec
    axes: Dict[str, AxisType] = {a: t for a, t in gs.axes.items() if spec is None or a not in spec.axes}
    nograd = gs.nograd
    if local is not None:
        for a, t in local.axes.items():
            if not scope.has(a):
                axes[a] = V if isinstance(t, Shard) else t
        nograd = nograd and local.nograd
    for a in out_partial:
        if not scope.has(a):
            axes[a] = P
    return Spmd.of(axes, spec, nograd, shape=gs.shape if sized else None)


def _fail(ctx: Any, err: FactorError, code: _mypy.ErrorCode = SPMD_GLOBAL) -> None:
    msg = err.message + (f". Hint: {err.fix}" if err.fix else "")
    _mypy.fail(ctx.api, msg, ctx.context, code)


# -- ops --------------------------------------------------------------------------

def _params(ctx: Any, name: str) -> Tuple[Dict[str, object], bool]:
    """(literal arguments by parameter name, whether some non-tensor argument is not literal)."""
    params: Dict[str, object] = {}
    missing = False
    if name == "__getitem__":
        args = _mypy.call_args(ctx)
        if args:
            index = _mypy.literal_value(args[0][1], ctx.api)
            if index is _mypy.NOT_LITERAL:
                return params, True
            params["index"] = index
        return params, False
    for formal, exprs, types in _mypy.formal_groups(ctx):
        if formal is None or not exprs or formal in ("out", "out_partial_axes", "dtype"):
            continue
        if any(holds_tensor(t) for t in types):
            continue
        values = [_mypy.literal_value(e) for e in exprs]
        if any(v is _mypy.NOT_LITERAL for v in values):
            if not all(_mypy.element_types(t) for t in types):  # a list of tensors is an operand
                missing = True
            continue
        value: object = values[0] if len(values) == 1 else tuple(values)
        if formal in STAR_PARAMETERS and len(values) == 1 and not isinstance(value, tuple):
            value = (value,)
        params[formal] = value
    if name == "einsum" and "equation" not in params:
        for _, expr, _t in _mypy.call_args(ctx):
            eq = _mypy.str_value(expr)
            if eq is not None:
                params["equation"] = eq
                break
    return params, missing


def _factor_name(name: str) -> str:
    if name.startswith("__") and name.endswith("__"):
        core = name[2:-2]
        if name in REFLECTED and core.startswith("r"):
            core = core[1:]
        plain = OPERATOR_FUNCTIONS.get(core)
        if plain is not None and has_rule(plain):
            return plain
    return name


def refine_op(ctx: Any, name: str, cls: str, namespace: str, receiver: bool) -> Typed:
    """ops.op_hook's global step: None leaves the op to the local rules."""
    scope = scope_of(ctx)
    if scope is None:
        return None
    return _global_op(ctx, name, cls, namespace, receiver, scope, ())


def _global_op(
    ctx: Any,
    name: str,
    cls: str,
    namespace: str,
    receiver: bool,
    scope: Scope,
    out_partial: Sequence[str],
    factor_name: Optional[str] = None,
) -> Typed:
    _global_rules()
    fname = factor_name or _factor_name(name)
    selected = None
    if cls == SELECTION and not reads_indices(fname):  # else its factor row reads them by position (gather)
        cls, selected = callsite.selection(ctx, name, receiver)
    options = selected or callsite.operands(ctx, name, receiver)
    # an argument made the op nonlinear at this call (a fill, an integer dtype)
    decided = cls is NONLINEAR and op_class(name, namespace) is not NONLINEAR
    if not options and namespace == "torch" and name in FACTORY_RANKS:
        return _replicated_factory(ctx, name, cls, namespace, receiver)
    if not options or any(len(c) != 1 or c[0] is None for _, c in options):
        return None  # a Union or a plain tensor: the local rules (unknown result)
    spmds = [c[0] for _, c in options if isinstance(c[0], Spmd)]
    if not spmds:
        return None
    operands: List[object] = []
    for _, c in options:
        o = c[0]
        if isinstance(o, Spmd):
            g = to_global(o, scope)
            if g is None:
                return _per_axis_operand(ctx, name, namespace, text_of(options, o), o, scope, options)
            operands.append(g)
        else:
            operands.append(SCALAR if o is SCALAR else o)
    names = [text for text, _ in options]
    sharded = [(n, g) for n, g in zip(names, operands) if isinstance(g, GlobalType) and g.spec.axes]
    params, missing = _params(ctx, fname)
    if not has_rule(fname) or (missing and sharded):
        if sharded:
            n, g = sharded[0]
            why = (
                "has no global shard-propagation rule"
                if not has_rule(fname)
                else "has arguments that are not literals, so its rule cannot be checked"
            )
            _mypy.fail(
                ctx.api,
                f"{display_name(name, namespace)} {why}, and {n}: {g} is sharded on "
                f"{', '.join(repr(a) for a in g.spec.axes)}; no rule says whether the op mixes "
                f"elements across shards. Hint: gather it first, or run the op in local code "
                f"(spmd.local_map)",
                ctx.context,
                SPMD_GLOBAL,
            )
            return (None,)
        op_inference.infer(ctx, name, cls, namespace, receiver)  # the local rules still hold
        return (None,)
    global_partial = [a for a in out_partial if scope.has(a)]
    try:
        g = propagate(fname, operands, params, global_partial, names=names, mesh=_MESH, nonlinear=decided)
    except FactorError as err:
        if err.code == "bad-param" and missing:
            return (None,)
        _fail(ctx, err)
        return (None,)
    except SpecError:
        return (None,)
    local: Optional[Spmd] = None
    if _has_local_axes(spmds, scope) or any(not scope.has(a) for a in out_partial):
        names_local = sorted({a for o in spmds for a in o.axes if not scope.has(a)})
        local = op_inference.infer(ctx, name, cls, namespace, receiver, project=_local_only(scope, names_local))
        _check_local_partial(ctx, name, local, [a for a in out_partial if not scope.has(a)])
    return (merge(g, local, scope, out_partial, sized=any(o.shape is not None for o in spmds)),)


# torch.zeros(3, 4), torch.arange(n) and the like: the same value on every
# rank, of the rank their sizes give, so in spec form (an op beside a sharded
# operand then follows the factor rules; a per-axis `*=R` would have no rank).


def _replicated_factory(ctx: Any, name: str, cls: str, namespace: str, receiver: bool) -> Typed:
    rank = FACTORY_RANKS[name] or _mypy.size_rank(ctx)
    if rank is None:
        return None
    local = op_inference.infer(ctx, name, cls, namespace, receiver)
    if local is None:
        return None
    return (Spmd.of({}, PartitionSpec(*([None] * rank)), local.nograd),)


# -- spmd.matmul / einsum / linear / sum / mean with out_partial_axes -------------------

def text_of(options: List[Tuple[str, List[object]]], operand: object) -> str:
    return next(text for text, c in options if c[0] is operand)


def _per_axis_operand(
    ctx: Any, name: str, namespace: str, text: str, o: Spmd, scope: Scope, options: List[Tuple[str, List[object]]]
) -> Typed:
    """An operand in per-axis form: no rank, so no factor rule applies.  With
    only R/I/P on the global axes, and no other operand sharded on one, the
    local rules are exact; a layout there (S(i) or V), or a spec-form operand
    sharded on a global axis beside it (its dims' fate through the op
    depends on the ranks), is an error, never a silent fall back to the
    local rules.  A factory's value (`torch.zeros(shape)`: every axis given
    by its `*=` type) gets a hint that gives it a rank."""
    laid = [(a, t) for a, t in o.axes.items() if scope.has(a) and (isinstance(t, Shard) or t is V)]
    why = ""
    if laid:
        why = f"is {laid[0][1]} on axis {laid[0][0]!r} in the per-axis form, which gives no rank"
    elif isinstance(o.rest, Shard) or o.rest is V:  # a draw: `*=V`
        laid, why = [("*", o.rest)], f"is {o.rest} on every axis it does not name ({o}), so of no rank"
    else:
        for other, c in options:
            sharded = _global_spec_axes(c[0], scope)
            if sharded:
                why = f"is in the per-axis form, which gives no rank, beside {other} sharded on " + ", ".join(
                    repr(a) for a in sharded
                )
                break
    if not why:
        return None
    if isinstance(text, RankText):  # x[rank]: a number that differs by rank, which global code has not
        why, hint = (
            "differs from rank to rank (a rank number), which global code, written for the whole tensor, "
            "cannot place",
            "take the rank's piece in local code (a function under spmd.local_map), or say it as a layout "
            "(spmd.redistribute to a spec sharded on the axis)",
        )
    elif o.rest is None:
        hint = f"annotate {text} in spec form, Spmd(spec=PartitionSpec(...))"
    else:
        hint = (
            f"give {text} a rank: write its sizes as literals (torch.zeros(4, 8)), or make it with a *_like "
            f"op of a spec-form tensor"
        )
    _mypy.fail(
        ctx.api,
        f"{display_name(name, namespace)} in global code: {text} {why}, so {'its' if laid else 'the'} layout "
        f"cannot be propagated through the op. Hint: {hint}",
        ctx.context,
        SPMD_GLOBAL,
    )
    return (None,)


def _global_spec_axes(o: object, scope: Scope) -> List[str]:
    """The global axes a spec-form operand's spec shards (none for any other operand)."""
    spec = o.spec if isinstance(o, Spmd) else None
    return [a for a in spec.axes if scope.has(a)] if spec is not None else []


def _out_partial(ctx: Any) -> Optional[Tuple[str, ...]]:
    got = one_arg(ctx, "out_partial_axes")
    if got is None:
        return ()
    one = _mypy.str_value(got[0])
    if one is not None:
        return (one,)
    value = _mypy.literal_value(got[0])
    if isinstance(value, tuple) and all(isinstance(a, str) for a in value):
        return value
    return None


def _check_local_partial(ctx: Any, op: str, result: Optional[Spmd], axes: Sequence[str]) -> None:
    for a in axes:
        t = result.axis_type(a) if result is not None else None
        if t is not None and not (t is V or isinstance(t, Shard)):
            _mypy.fail(
                ctx.api,
                f"spmd.{op}(..., out_partial_axes) names {a!r}, where the local result is {t}: "
                f"only a Varying result is a rank's share of a pending sum (a {t} value summed "
                f"over {a!r} counts it once per rank). Hint: drop {a!r} from out_partial_axes",
                ctx.context,
                SPMD_OP,
            )


def _partial_op(ctx: Any, op: str) -> _mypy.Type:
    namespace = PARTIAL_OPS[op]
    cls = op_class(op, namespace)
    axes = _out_partial(ctx)
    if axes is None:
        return typed_result(ctx, None, True)  # a computed out_partial_axes: unknown
    scope = scope_of(ctx)
    if scope is not None:
        # spmd.mean with out_partial_axes divides by the axes' sizes: its factors are a sum's.
        factor = "sum" if op == "mean" and axes else op
        got = _global_op(ctx, op, cls, namespace, False, scope, axes, factor_name=factor)
        if got is not None:
            return typed_result(ctx, got[0], True)
    result = op_inference.infer(ctx, op, cls, namespace, False)
    if result is None:
        return typed_result(ctx, None, has_typed_operand(ctx, False))
    _check_local_partial(ctx, op, result, axes)
    merged = {a: t for a, t in result.axes.items()}
    for a in axes:
        merged[a] = P
    return typed_result(ctx, Spmd.of(merged, None, result.nograd, result.rest), True)


# -- typed collectives on a spec ----------------------------------------------------------


def refine_collective(
    ctx: Any, op: str, x: Tuple[Any, Any], axis: Union[str, Tuple[str, ...]], src: AxisType, dst: AxisType, expert: bool
) -> Typed:
    scope = scope_of(ctx)
    if scope is None:
        return None
    axes = (axis,) if isinstance(axis, str) else axis
    if not all(scope.has(a) for a in axes):
        return None
    _global_rules()
    actual = spmd_of(x[1])
    if actual is None:
        return None
    g = to_global(actual, scope)
    if g is None:  # per-axis form: the local rules, when they are exact
        problem = collective_problem(actual, axes, src, dst, scope.has)
        if problem is None:
            return None
        name = _mypy.expr_text(x[0])
        _mypy.fail(
            ctx.api,
            f"spmd.{op} on {', '.join(repr(a) for a in axes)} in global code: {name} is in per-axis form "
            f"({actual!r}) and {problem[0]}. Hint: {problem[1].format(name=name)}",
            ctx.context,
            SPMD_GLOBAL,
        )
        return (None,)
    try:
        out = apply_collective(g, op, axis, src, dst, name=_mypy.expr_text(x[0]), expert_mode=expert,
                               mesh=_MESH)
    except FactorError as err:
        _fail(ctx, err)
        return (None,)
    except SpecError:
        return (None,)
    keep = _local_only(scope)(actual)
    return (merge(out, keep, scope),)


# -- spmd.redistribute(x, src=Spmd(...), dst=Spmd(...)) -----------------------------------


def decode_spmd(ctx: Any, expr: Any) -> Optional[Spmd]:
    """The Spmd written as `Spmd(...)` in a call's argument (AnnotationError if malformed)."""
    names: Dict[str, str] = {}
    node = spmd_expr_ast(expr, names)
    return decode(Meta((node,), ctx.context.line), names.get)


def spec_mismatch(got: Spmd, want: Spmd, scope: Optional[Scope]) -> Optional[Tuple[object, object]]:
    """(got, want) as global types when both are spec-form and differ on the compared
    axes (every axis in local code, the scope's in global code); in global code
    with a side in per-axis form, written out when a global axis shards
    another dim on each side (global_per_axis.shard_mismatch); else None."""
    if got.spec is None or want.spec is None:
        return None if scope is None else shard_mismatch(got, want, scope.has)
    sc = scope or Scope(())
    try:
        g, w = to_global(got, sc), to_global(want, sc)
    except SpecError:
        return None
    if g is None or w is None:
        return None
    if (g.spec, g.partial, dict(g.local)) == (w.spec, w.partial, dict(w.local)):
        return None
    return g, w


def _spec_redistribute(ctx: Any) -> _mypy.Type:
    default = ctx.default_return_type
    x, src_arg, dst_arg = one_arg(ctx, "x"), one_arg(ctx, "src"), one_arg(ctx, "dst")
    if x is None or src_arg is None or dst_arg is None:
        return default
    try:
        src, dst = decode_spmd(ctx, src_arg[0]), decode_spmd(ctx, dst_arg[0])
    except AnnotationError as e:
        ctx.api.fail(f"Malformed SPMD annotation: {e}", ctx.context, code=SPMD_ANNOTATION)
        return default
    if src is None or dst is None:
        return default
    scope = scope_of(ctx)
    code = SPMD_GLOBAL if scope is not None else SPMD_COLLECTIVE
    name = _mypy.expr_text(x[0])
    actual = spmd_of(x[1])
    if actual is not None:
        exact = spec_mismatch(actual, src, scope)
        if exact is not None:
            _mypy.fail(
                ctx.api,
                f"spmd.redistribute: src={exact[1]} does not match {name}: {exact[0]} (the spec "
                f"says which dim each axis shards; the planner would cut the wrong dim). Hint: "
                f"src={actual!r}",
                ctx.context,
                code,
            )
        else:
            for a, got, want in mismatches(actual, src):
                _mypy.fail(
                    ctx.api,
                    f"spmd.redistribute: src is {want} on axis {a!r}, but {name} is {got} there. "
                    f"Hint: src={actual!r}",
                    ctx.context,
                    code,
                )
    for a in sorted(set(src.axes) | set(dst.axes)):
        s_t, d_t = src.axis_type(a), dst.axis_type(a)
        if s_t is None or d_t is None:
            continue
        try:
            plan("redistribute", s_t, d_t, axis=a)
        except CollectiveError as e:
            _mypy.fail(
                ctx.api,
                f"spmd.redistribute: axis {a!r} goes from {s_t} to {d_t}, which no "
                f"redistribution does (the value would change): {e}",
                ctx.context,
                code,
            )
    if actual is not None and actual.shape is not None and dst.spec is not None and dst.shape is None:
        if len(actual.shape) == len(dst.spec):  # the value keeps its global sizes
            keep = {a: t for a, t in dst.axes.items() if a not in dst.spec.axes}
            dst = Spmd.of(keep, dst.spec, dst.nograd, shape=actual.shape)
    return _mypy.replace_tensors(default, carrier(ctx.api, dst))


# -- x.T and x.mT ---------------------------------------------------------------------------

def transposed_attribute(name: str, inner: Callable[[Any], _mypy.Type]) -> Callable[[Any], _mypy.Type]:
    """x.T / x.mT in global code move the spec's dims (locally they keep the type)."""
    op, params = TRANSPOSED_ATTRIBUTES[name]

    def hook(ctx: Any) -> _mypy.Type:
        scope = scope_of(ctx)
        spmd = spmd_of(ctx.type)
        if scope is None or spmd is None or ctx.is_lvalue:
            return inner(ctx)
        _global_rules()
        g = to_global(spmd, scope)
        if g is None:
            return inner(ctx)
        base = getattr(ctx.context, "expr", None)
        try:
            out = propagate(op, [g], params, names=[_mypy.expr_text(base) if base is not None else "x"])
        except FactorError as err:
            _fail(ctx, err)
            return _mypy.replace_tensors(ctx.default_attr_type, _mypy.unknown_carrier(ctx.api))
        keep = _local_only(scope)(spmd)
        return _mypy.replace_tensors(ctx.default_attr_type, carrier(ctx.api, merge(out, keep, scope)))

    return guarded(hook, inner)


# -- hooks by fullname ---------------------------------------------------------------------

def _partial_op_hook(op: str) -> Callable[[Any], _mypy.Type]:
    return guarded(lambda ctx: _partial_op(ctx, op), default_return)


# spmd.redistribute(x, src=Spmd(...), dst=Spmd(...)): comms.hooks' spec_form
spec_redistribute = guarded(_spec_redistribute, default_return)

HOOKS: Dict[str, Callable[[Any], _mypy.Type]] = {GLOBAL_OPS + op: _partial_op_hook(op) for op in PARTIAL_OPS}
