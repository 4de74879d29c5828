"""Typing the typed collectives and coercions and spmd.assert_spmd (raw
torch.distributed collectives: raw_collectives.py).

The signature check is the vocabulary's `plan` (the same call the runtime
makes); on top, the claimed src must match what the checker inferred for the
input on each axis, and the result takes dst on those axes.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Union

from ..vocab.axis import axis_names
from ..vocab.collectives import DEFAULT_SRC, PUBLIC_OPS, CollectiveError, fix_call, mismatch_consequence, plan
from ..vocab.localtype import I, V, AxisType, R, Shard, local_kind
from ..vocab.spec import Spmd, mismatches
from . import _mypy, collective_args, comm_sites
from .answers import plain_local_code, quietly, remembered
from .annotations import AnnotationError, Meta
from .decoding import LOCAL_TYPES, SHARD_FULLNAMES, decode
from .callsite import SourceText, Text, one_arg, unknown_in_spmd_file
from .carrier import carrier, spmd_of
from .errors import SPMD_ANNOTATION, SPMD_ARG, SPMD_COLLECTIVE, SPMD_COMMS, SPMD_GROUP
from .groups import axis_of, unnamed_axis_message
from .config import Settings
from .guard import default_return, guarded
from .reading import check_axes
from .spec_argument import spec_argument

API = "spmd_mypy.runtime.api."


def _axis_type(expr: _mypy.Expression) -> Optional[AxisType]:
    full = _mypy.fullname_of(expr)
    if full in LOCAL_TYPES:
        return LOCAL_TYPES[full]
    parts = _mypy.call_parts(expr)
    if parts is not None:
        callee, pos, kws = parts
        if callee in SHARD_FULLNAMES and len(pos) == 1 and not kws:
            dim = _mypy.int_value(pos[0])
            if dim is not None:
                return Shard(dim)
    return None


# Global mode (global_mode.py): `refine` types a collective on a spec
# (None: per-axis rules; (type,) its result, None inside: unknown);
# `spec_form` types redistribute(x, src=Spmd(...), dst=Spmd(...)).
Refine = Callable[..., Optional[Tuple[Optional[Spmd]]]]


def collective_hook(
    op: str, refine: Optional[Refine] = None, spec_form: Optional[Callable[[Any], _mypy.Type]] = None
) -> Callable[[Any], _mypy.Type]:
    """The hook of spmd.<op>.  A call in the plain form (_mypy.collective_question:
    a carrier, an axis name, src/dst written as names) in plain local code
    is answered from the answer to the same question, when that reported
    nothing; others go through answers.remembered."""

    def collective(ctx: Any) -> _mypy.Type:
        return _collective(ctx, op, refine, spec_form)

    # the communication report records the call's site when it is wanted
    general = remembered(collective, sites_matter=True)
    answers: Dict[Tuple[object, ...], str] = {}  # question -> the result's canonical string

    def hook(ctx: Any) -> _mypy.Type:
        question = _mypy.collective_question(ctx)
        api = ctx.api
        if question is None or not plain_local_code(api) or comm_sites.wanted(api):
            return general(ctx)
        found = answers.get(question)
        if found is not None:
            return _mypy.carrier_in_checker(api, found)
        result, clean = quietly(collective, ctx)
        text = _mypy.carried(result) if clean else None
        if text is not None:
            if len(answers) >= _MAX_ANSWERS:
                answers.clear()
            answers[question] = text
        return result

    return guarded(hook, default_return)


_MAX_ANSWERS = 65536  # per collective: a long daemon session drops what it no longer asks


def _collective(
    ctx: Any, op: str, refine: Optional[Refine] = None, spec_form: Optional[Callable[[Any], _mypy.Type]] = None
) -> _mypy.Type:
    default = ctx.default_return_type
    args = _mypy.first_args(ctx)
    x, axis_arg, src_arg, dst_arg = args.get("x"), args.get("axis"), args.get("src"), args.get("dst")
    expert_arg = args.get("expert_mode")
    if spec_form is not None and x is not None and axis_arg is None:
        return spec_form(ctx)
    if x is None or axis_arg is None or dst_arg is None:
        return default
    axis = axis_of(axis_arg[0], axis_arg[1], ctx.api)  # a name, names, or a group declared as an axis
    src = _axis_type(src_arg[0]) if src_arg is not None else DEFAULT_SRC.get(op)
    dst = _axis_type(dst_arg[0])
    if axis is None:  # never silently unchecked: say so, and how to name it
        ctx.api.fail(unnamed_axis_message(f"spmd.{op}", axis_arg[0], axis_arg[1], ctx.api), ctx.context, code=SPMD_GROUP)
        return unknown_in_spmd_file(ctx, default)
    if src is None or dst is None:
        return default  # a computed src/dst: not typed statically
    expert = expert_arg is not None and _mypy.is_true(expert_arg[0])
    written = _mypy.str_value(axis_arg[0]) or _mypy.str_tuple(axis_arg[0])
    group_text = None if written else _mypy.expr_text(axis_arg[0])  # over a group: hints pass it
    return type_collective(ctx, op, x, axis, src, dst, expert, refine, group_text=group_text)


def type_collective(
    ctx: Any,
    op: str,
    x: Tuple[_mypy.Expression, _mypy.Type],
    axis: Union[str, Tuple[str, ...]],
    src: AxisType,
    dst: AxisType,
    expert: bool = False,
    refine: Optional[Refine] = None,
    suffix: str = "",
    group_text: Optional[str] = None,
    exact_shards: bool = False,
) -> _mypy.Type:
    """The collective `op` on `x` over `axis` from src to dst, with its
    arguments read: checked (the vocabulary's plan, then src against x's
    type per axis) and typed (dst on those axes).  `suffix` is added to every
    message (how another API's call maps onto this one); `group_text`: the
    group expression the call names the axis by, which hints pass on;
    `exact_shards`: an S(i) src takes S(i) or V only, not another dim's
    shards (an API whose code splits or concatenates one fixed dim)."""
    default = ctx.default_return_type
    axes = axis_names(axis)
    if not collective_args.axes_known(ctx, op, axes, _SETTINGS[-1] if _SETTINGS else None):
        return default
    if (op, src, dst, axis, expert) not in _PLANNED:  # the vocabulary's check, once per question
        try:
            plan(op, src, dst, axis=axis, expert_mode=expert)
        except CollectiveError as e:
            ctx.api.fail(str(e) + suffix, ctx.context, code=SPMD_COLLECTIVE)
            return default
        _PLANNED.add((op, src, dst, axis, expert))
    comm_sites.record_call(ctx, op, x, axes, src, dst)
    # A max/min takes each rank's own value (V) as well as a P one.
    per_rank_ok = op == "all_reduce" and collective_args.reduce_op(ctx, x, dst, axes) is not None
    refined = refine(ctx, op, x, axis, src, dst, expert) if refine is not None else None
    if refined is not None:
        typed = refined[0]
        new = carrier(ctx.api, typed) if typed is not None else _mypy.unknown_carrier(ctx.api)
        return _mypy.replace_tensors(default, new)
    name = SourceText(_mypy.expr_text, x[0])  # rendered if a message needs it
    # A value from two branches (a Union) is checked and typed per alternative.
    alternatives = _mypy.union_alternatives(x[1]) or [x[1]]
    results = []
    reported: set = set()
    for alternative in alternatives:
        actual = spmd_of(alternative)
        for a in axes:
            have = actual.axis_type(a) if actual is not None else None
            if per_rank_ok and local_kind(have) == "V":
                continue
            other_dim = exact_shards and isinstance(src, Shard) and isinstance(have, Shard) and have != src
            if have is not None and (local_kind(have) != local_kind(src) or other_dim) and (a, str(have)) not in reported:
                if not other_dim and _forward_fits(actual, have, src):
                    continue
                reported.add((a, str(have)))
                ctx.api.fail(
                    f"spmd.{op} on axis {a!r}: src={src}, but {name} is {have} there; "
                    + (f"its shards split dim {have.dim}, not the dim {src.dim} this call works on"  # type: ignore[union-attr]
                       if other_dim else mismatch_consequence(have, src, a))
                    + _over(_src_hint(have, src, dst, a, name, len(axes) == 1, len(alternatives) > 1), a, group_text)
                    + (
                        f", or drop this call if {name} is already what you need"
                        if local_kind(have) in ("R", "I") and op in ("all_reduce", "redistribute")
                        else ""
                    )
                    + suffix,
                    ctx.context,
                    code=SPMD_COLLECTIVE,
                )
        results.append(after(actual, axes, dst))
    if len(results) == 1 and _mypy.is_tensor(default):
        return carrier(ctx.api, results[0])  # most calls: one value, one tensor result
    types = [carrier(ctx.api, r) for r in dict.fromkeys(results)]
    return _mypy.replace_tensors(default, _mypy.union_of(types))


# The (op, src, dst, axis, expert) questions the vocabulary's plan accepted.
_PLANNED: Set[Tuple[object, ...]] = set()


def _forward_fits(actual: Optional[Spmd], have: AxisType, src: AxisType) -> bool:
    """A value without gradient that is the same on every rank (R or I) is a
    valid R, I or V input: only its forward value matters, and a replicated
    value is one the ranks may hold as their own (a V) too.  Never a shard."""
    return actual is not None and actual.nograd and local_kind(have) in ("R", "I") and src in (R, I, V)


def _over(hint: str, axis: str, group_text: Optional[str]) -> str:
    """A hint's calls over the group the call was written with, not the axis name."""
    return hint.replace(f", {axis!r}, src=", f", {group_text}, src=") if group_text else hint


def _src_hint(
    have: AxisType, src: AxisType, dst: AxisType, axis: str, name: Text, one_axis: bool, branch: bool
) -> str:
    """The fix for a collective whose input is not its src: one call from what
    the value is to the dst asked for, in place of this one (reduce_scatter,
    not a convert of an all_reduce), else the call that makes it src first.
    For a value from branches (`branch`), in the branch that gives `have`."""
    whole = fix_call(have, dst, axis, str(name)) if one_axis and not branch else None
    if whole is not None:
        return f". Hint: {whole} in place of this call"
    fix = fix_call(have, src, axis, str(name))
    if fix and branch:
        return f". Hint: in the branch where {name} is {have}, make it {src} with {fix}"
    return f". Hint: make it {src} first with {fix}" if fix else ""


def after(actual: Optional[Spmd], axes: Tuple[str, ...], dst: AxisType) -> Spmd:
    """The value's type after a collective on `axes`: dst there, the rest kept
    (a spec-form value's unnamed axes are R)."""
    if actual is None:
        return Spmd.of({a: dst for a in axes})
    result: Dict[str, AxisType] = dict(actual.axes)
    for a in axes:
        result[a] = dst
    rest = R if actual.spec is not None else actual.rest
    # the axes of a value (checked names) and the dst plan() accepted
    return Spmd.of_sorted(tuple(sorted(result.items())), actual.nograd, rest)


# The [spmd_mypy] settings of the running plugin (configure), for the
# Spmd(...) written inside assert_spmd, checked like an annotation.
_SETTINGS: List[Settings] = []


# The literal shape of an Spmd(...) written in an assert_spmd call
# (_mypy.written_call: names as fullnames) -> the Spmd it decodes to, checked
# against the settings' axes.  Codebases write the same few specs at many
# places; a malformed one is never kept (it is reported at each place).
_WRITTEN: Dict[object, Spmd] = {}


def configure(settings: Settings) -> None:
    _SETTINGS[:] = [settings]
    _WRITTEN.clear()


def _asserted_spec(ctx: Any, expr: _mypy.Expression) -> Optional[Spmd]:
    """The Spmd an assert_spmd call asserts (AnnotationError when malformed)."""
    key = _mypy.written_call(expr)
    hit = _WRITTEN.get(key) if key is not None else None
    if hit is not None:
        return hit
    node, resolve = spec_argument(ctx.api, expr)  # Spmd(...), or SPEC: Final = Spmd(...)
    asserted = decode(Meta((node,), ctx.context.line), resolve)
    if asserted is not None and _SETTINGS:
        check_axes(asserted, _SETTINGS[-1])
    if asserted is not None and key is not None and len(_WRITTEN) < 4096:
        _WRITTEN[key] = asserted
    return asserted


def _assert_spmd(ctx: Any) -> _mypy.Type:
    default = ctx.default_return_type
    x, meta_arg = one_arg(ctx, "x"), one_arg(ctx, "spmd")
    alternatives = _mypy.union_alternatives(x[1]) if x is not None else None
    if x is None or meta_arg is None or not (_mypy.is_tensor(x[1]) or alternatives):
        return default
    try:
        asserted = _asserted_spec(ctx, meta_arg[0])
    except AnnotationError as e:
        ctx.api.fail(f"Malformed SPMD annotation: {e}", ctx.context, code=SPMD_ANNOTATION)
        return default
    if asserted is None:
        return default
    return asserted_type(ctx, x, asserted)


def asserted_type(
    ctx: Any, x: Tuple[_mypy.Expression, _mypy.Type], asserted: Spmd, label: str = "spmd.assert_spmd", suffix: str = ""
) -> _mypy.Type:
    """x's type after an assertion of `asserted`: each axis checked against what
    the checker inferred (reported under `label`, `suffix` appended), then
    the asserted axes replace the inferred ones."""
    alternatives = _mypy.union_alternatives(x[1])
    if alternatives:
        # A value from branches or of a declared Union (a layout that depends on
        # a flag): narrowed to the alternatives the assertion fits, as an
        # isinstance narrows; when none fits, reported against the first.
        found = [spmd_of(t) for t in alternatives]
        fitting = [a for a in found if a is None or not mismatches(a, asserted)]
        if fitting:
            results = list(dict.fromkeys(_asserted(a, asserted) for a in fitting))
            return _mypy.union_of([carrier(ctx.api, r) for r in results])
        actual = found[0]
    else:
        actual = spmd_of(x[1])
        if _other_configuration(ctx, x[0], actual, asserted):
            return _mypy.never()
    if actual is not None:
        for a, got, want in mismatches(actual, asserted):
            fix = fix_call(got, want, a, _mypy.expr_text(x[0]))
            if fix and alternatives:  # one alternative of a value from branches
                fix = f"in the branch where {_mypy.expr_text(x[0])} is {got}, {fix}"
            ctx.api.fail(
                f"{label} on axis {a!r}: {_mypy.expr_text(x[0])} is {got}, not {want}; "
                f"{mismatch_consequence(got, want, a)}" + (f". Hint: {fix}" if fix else "") + suffix,
                ctx.context,
                code=SPMD_ARG,
            )
    return carrier(ctx.api, _asserted(actual, asserted))


def _other_configuration(ctx: Any, expr: Any, actual: Optional[Spmd], asserted: Spmd) -> bool:
    """`spmd.assert_spmd(h, ...)` on a parameter typed by a variable with values
    (layout_vars), asserting another of its values: mypy is checking the
    function for a choice this branch does not run under, so the code after
    it is unreachable there (as after an isinstance that cannot hold)."""
    if actual is None or not mismatches(actual, asserted):
        return False
    values = _mypy.configuration_values(ctx.api, expr)
    found = [spmd_of(v) for v in values or ()]
    return actual in found and any(s is not None and not mismatches(s, asserted) for s in found)


def _asserted(actual: Optional[Spmd], asserted: Spmd) -> Spmd:
    """The type after assert_spmd: the asserted axes over what was known (the
    assertion alone when it names every axis: a spec or a rest)."""
    if asserted.spec is not None or asserted.rest is not None:
        return asserted
    merged: Dict[str, AxisType] = dict(actual.axes) if actual is not None else {}
    merged.update(asserted.axes)
    return Spmd.of(merged, None, asserted.nograd)


def _reveal_comms(ctx: Any) -> _mypy.Type:
    """spmd.reveal_comms(fn): fn's communication report as notes at the call, from
    the collectives recorded while fn was checked (check fn before this call)."""
    fn = one_arg(ctx, "fn")
    named = _mypy.named_function(ctx.api, fn[0]) if fn is not None else None
    text = _mypy.expr_text(fn[0]) if fn is not None else "nothing"
    if named is None:
        ctx.api.fail(
            f"spmd.reveal_comms takes a function or method (f, Class.method), not {text}", ctx.context, code=SPMD_ARG
        )
        return ctx.default_return_type
    file, function = named
    if _mypy.bodies_not_checked_yet(ctx.api):
        lines = [
            f"spmd.reveal_comms({text}) at module level: mypy checks function bodies after the module's top "
            f"level, so no collective of {function} is known here; call it inside a function defined after "
            f"it: def _comms() -> None: spmd.reveal_comms({text})"
        ]
    elif _mypy.from_cache(ctx.api, file):
        lines = [
            f"spmd.reveal_comms({text}): {_short_path(file)} was not checked in this run (mypy took it from its "
            f"cache), so the collectives of {function} are not known here; edit that file or run mypy "
            f"with --no-incremental to see them"
        ]
    else:
        from . import comm_report  # the report's volumes (fractions, decimal): only where asked

        sites = comm_sites.sites_of(file, function)
        lines = []
        for config in comm_report.configurations(function, sites) or [""]:
            report = comm_report.function_report(file, function, sites, config)
            lines += comm_report.report_text(report, "communication of " + _short_path(file))
    for line in lines:
        _mypy.note(ctx.api, line, ctx.context, SPMD_COMMS)
    return ctx.default_return_type


def _short_path(file: str) -> str:
    return file.replace("\\", "/").rsplit("/", 1)[-1]


def hooks(
    refine: Optional[Refine] = None, spec_form: Optional[Callable[[Any], _mypy.Type]] = None
) -> Dict[str, Callable[[Any], _mypy.Type]]:
    """The function hooks of spmd.<collective> and spmd.assert_spmd, by fullname.
    Global mode's refinement comes in here (`refine`, and `spec_form` for
    spmd.redistribute on two specs): the plugin builds the table with them."""
    table: Dict[str, Callable[[Any], _mypy.Type]] = {
        API + op: collective_hook(op, refine, spec_form if op == "redistribute" else None) for op in sorted(PUBLIC_OPS)
    }
    table[API + "assert_spmd"] = guarded(_assert_spmd, default_return)
    table[API + "reveal_comms"] = guarded(_reveal_comms, default_return)
    return table
