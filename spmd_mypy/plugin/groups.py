"""Process groups as mesh axes: where the checker learns which axis a group is.

Real code passes ProcessGroups, not axis names (nanotron's `pg`, picotron's
`pgm().tp_group`, Megatron's `get_tensor_model_parallel_group()`).  A group
names an axis in one of two ways, both read here:

  * an annotation, wherever a ProcessGroup type is written (parameter,
    return, attribute, alias): `Annotated[ProcessGroup, spmd.Axis("tp")]`
    becomes `spmd_phantom.AxisGroup[Literal["tp"]]`, a ProcessGroup subclass,
    so the axis travels with the value (`self.pg = pg`) like a tensor's type;
  * the `groups` setting, for code the user does not edit: `[spmd_mypy]
    groups = megatron.core.parallel_state.get_tensor_model_parallel_group: tp`
    makes that function's (method's, attribute's) result such a group.

The public entry points, for every module that meets an axis argument:

  axis_of(expr, typ)        the axis a collective's axis argument names: a
                            name, a tuple of names, or None when unknown
  unnamed_axis_message(...) the spmd-group message for an argument axis_of
                            cannot name (the call is then not checked)
  axis_names_of_type(typ)   the axes a group type stands for (None if none)
  declared_group(...)       a return / annotated assignment of a group
  written_group(ctx)        a write to an attribute declared as a group
  relaxed_group_parameters  a call's signature: declared groups take any group
  check_group_arguments     ... but not the group of another axis
  analyze_group             the type-analyze hook of ProcessGroup
  hooks(settings)           function/method/attribute hooks of the setting
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ..vocab.axis import axis_text, parse_axis_text
from . import _mypy
from .annotations import AnnotationError, Meta, scan, seen_without_spmd
from .answers import depends_on_site
from .config import Settings
from .errors import SPMD_ANNOTATION, SPMD_GROUP
from .guard import default_return, guarded
from .sourcefile import dotted
from .spec_argument import enum_alias_value

__all__ = [
    "AXIS_FULLNAMES",
    "Axes",
    "analyze_group",
    "axis_names_of_type",
    "axis_of",
    "check_group_arguments",
    "declared_group",
    "relaxed_group_parameters",
    "written_group",
    "decode_axis",
    "hooks",
    "unnamed_axis_message",
]

AXIS_FULLNAMES = frozenset({"spmd_mypy.vocab.axis.Axis", "spmd_mypy.Axis"})
Axes = Union[str, Tuple[str, ...]]  # what a collective's axis argument names
_HOW = (
    'declare it where the group is typed, e.g. `group: Annotated[ProcessGroup, spmd.Axis("tp")]` '
    "(a parameter, an attribute, the return of the getter), or map its getter in "
    "[spmd_mypy] groups = <module>.<getter>: tp"
)


# -- reading annotations -------------------------------------------------------------


def decode_axis(meta: Meta, lookup: Callable[[str], Optional[str]]) -> Optional[Tuple[str, ...]]:
    """The axis names of the `Axis(...)` among an Annotated's metadata, None if none."""
    for expr in meta.exprs:
        if not isinstance(expr, ast.Call):
            continue
        name = dotted(expr.func) or ""
        try:
            full = lookup(name) if name else None
        except Exception:
            full = None
        if full not in AXIS_FULLNAMES:
            continue
        names = [a.value for a in expr.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if expr.keywords or not names or len(names) != len(expr.args) or len(set(names)) != len(names):
            raise AnnotationError('Axis takes the axis names as string literals: Axis("tp")', meta.line)
        return tuple(names)
    return None


def analyze_group(ctx: _mypy.AnalyzeTypeContext, settings: Settings) -> _mypy.Type:
    """The type of a `ProcessGroup` in an annotation: AxisGroup[Literal[axes]]
    if an Axis(...) sits with it, else mypy's own ProcessGroup."""
    tree = _mypy.analysis_owner(ctx)
    if seen_without_spmd(tree):
        return _mypy.plain_group_in_analyzer(ctx)
    index, uses_spmd = scan(_mypy.analyzer_path(ctx), tree, lambda marked: _mypy.annotation_spans(tree, marked))
    meta = index.get(_mypy.type_position(ctx)) if uses_spmd else None
    if meta is None:
        return _mypy.plain_group_in_analyzer(ctx)
    try:
        names = decode_axis(meta, _mypy.analyzer_lookup(ctx))
        unknown = [a for a in names or () if settings.axes and a not in settings.axes]
        if unknown:
            raise AnnotationError(
                f"unknown mesh axis {unknown[0]!r} (the configured axes are {', '.join(settings.axes)})", 0
            )
    except AnnotationError as e:
        ctx.api.fail(f"Malformed SPMD annotation: {e}", ctx.context, code=SPMD_ANNOTATION)
        return _mypy.plain_group_in_analyzer(ctx)
    if names is None:
        return _mypy.plain_group_in_analyzer(ctx)
    _mypy.mark_alias_target(ctx)  # TpGroup = Annotated[...]: an alias of this very type
    return _mypy.group_in_analyzer(ctx, axis_text(names))


# -- resolving an axis argument --------------------------------------------------------


def axis_names_of_type(typ: Optional[_mypy.Type]) -> Optional[Tuple[str, ...]]:
    """The axes a group type stands for (Optional and unions of one axis
    included), or a `Literal["tp"]` string type; None if it names none."""
    text = _mypy.group_text(typ)
    if text is not None:
        return parse_axis_text(text)
    literal = _mypy.literal_str(typ)
    return (literal,) if literal is not None else None


def axis_of(expr: _mypy.Expression, typ: Optional[_mypy.Type], api: Any = None) -> Optional[Axes]:
    """What a collective's axis argument names: "tp", ("dp", "tp"), or None.
    With the checker's `api`, a DeviceMesh's group asked by dim name
    (`mesh.get_group("tp")`) names that dim, and a conditional (or an `or`) whose values all
    name the same axes names them: `g if g is not None else "tp"`, a group
    that may be None standing for the axis's default group, as the codemod
    writes Megatron's optional groups."""
    written = _mypy.str_value(expr) or _mypy.str_tuple(expr)
    if written is not None:
        return written
    alias = enum_alias_value(api, expr) if api is not None else None
    if alias is not None:
        return alias  # DP after `DP = MeshAxisName.DP`
    names = axis_names_of_type(typ)
    if names is not None:
        return names[0] if len(names) == 1 else names
    dim = _mypy.mesh_group_axis(api, expr) if api is not None else None
    if dim is not None:
        depends_on_site()  # read from the receiver's type, which no call key holds
        return dim  # mesh.get_group("tp")
    found = {axes for _, _, axes in _branch_axes(expr, api)}
    return found.pop() if len(found) == 1 else None


def _branch_axes(expr: _mypy.Expression, api: Any) -> List[Tuple[_mypy.Expression, Optional[_mypy.Type], Optional[Axes]]]:
    """Each value of a conditional axis argument, its type and the axes it
    names (empty for an argument of one value, or without the checker's api)."""
    branches = _mypy.branches(expr, with_or=True) if api is not None else []
    if len(branches) < 2:
        return []
    out: List[Tuple[_mypy.Expression, Optional[_mypy.Type], Optional[Axes]]] = []
    for branch in branches:
        typ = _mypy.typed_before(api, branch)
        out.append((branch, typ, axis_of(branch, typ)))
    return out


def unnamed_axis_message(callee: str, expr: _mypy.Expression, typ: Optional[_mypy.Type], api: Any = None) -> str:
    """Why a call over an axis argument axis_of cannot name is not checked,
    and the fix (for a conditional argument, the fix of the value that
    names no axis, when the checker's `api` is given)."""
    subject = f"{callee} over {_mypy.expr_text(expr)}"
    branches = _branch_axes(expr, api)
    unnamed = [(b, t) for b, t, axes in branches if axes is None]
    if branches and not unnamed:
        named = ", ".join(dict.fromkeys(repr(axes) for _, _, axes in branches))
        return (
            f"{subject}: its values name different axes ({named}), so this call is not checked. "
            f"Hint: pass the group of one axis in every branch"
        )
    value, typ = unnamed[0] if unnamed else (expr, typ)
    text = _mypy.expr_text(value)
    if _mypy.is_process_group(typ):
        what = f"its value {text} is a ProcessGroup" if value is not expr else "a ProcessGroup"
        return f"{subject}: {what} whose mesh axis is not declared, so this call is not checked. Hint: {_HOW}"
    what = f"its value {text}" if value is not expr else "this axis argument"
    return (
        f"{subject}: the checker cannot read {what} (a string literal, a tuple of them, a "
        f"Literal-typed name or a declared ProcessGroup), so this call is not checked. "
        f'Hint: write the axis name, e.g. "tp", or type {text} as Literal["tp"]'
    )


def declared_group(api: Any, expr: _mypy.Expression, got: _mypy.Type, declared: _mypy.Type) -> Optional[_mypy.Type]:
    """A ProcessGroup returned or assigned where a group of an axis is declared:
    the declared type (the declaration is how a plain group gets its axis),
    after checking that a group already declared names the same axes.  None
    when `declared` is no such group."""
    want = _mypy.group_text(declared)
    if want is None or not (_mypy.is_process_group(got) or _mypy.group_text(got) is not None):
        return None
    have = _mypy.group_text(got)
    if have is not None and have != want:
        _mypy.fail(
            api,
            f"{_mypy.expr_text(expr)} is the group of axis {have!r}, declared here as the group of "
            f"axis {want!r}; collectives over it would be typed on the wrong axis",
            expr,
            SPMD_GROUP,
        )
    return declared


def written_group(ctx: Any) -> Optional[_mypy.Type]:
    """A write to an attribute declared as the group of an axis (an attribute
    hook's context): it accepts a plain ProcessGroup, which holds no axis yet
    (`self.tp_group = dist.new_group(...)`); a group of another axis is an
    error.  None when the attribute is no such group."""
    declared = ctx.default_attr_type
    if _mypy.group_text(declared) is None:
        return None
    value = _mypy.written_value(ctx.api, ctx.context)
    if value is not None:
        declared_group(ctx.api, value, _mypy.quietly_typed(ctx.api, value), declared)
    return _mypy.relax_group(declared)


def relaxed_group_parameters(params: List[_mypy.Type]) -> Optional[List[_mypy.Type]]:
    """A signature's parameter types with ProcessGroup in place of each group of
    an axis (a call's signature hook): a plain group fits, as an unknown
    tensor fits an annotated parameter; check_group_arguments then rejects a
    group of another axis.  None when no parameter is such a group."""
    if not any(_mypy.group_text(t) is not None for t in params):
        return None
    return [_mypy.relax_group(t) if _mypy.group_text(t) is not None else t for t in params]


def check_group_arguments(ctx: Any, sig: _mypy.CallableType, callee: str) -> None:
    """Each argument that is the group of an axis, against a parameter declared
    as the group of an axis (the unrelaxed signature `sig`)."""
    for i, formal in enumerate(sig.arg_types):
        want = _mypy.group_text(formal)
        if want is None or i >= len(ctx.args):
            continue
        for expr, typ in zip(ctx.args[i], ctx.arg_types[i]):
            have = _mypy.group_text(typ)
            if have is not None and have != want:
                name = sig.arg_names[i] if i < len(sig.arg_names) else None
                _mypy.fail(
                    ctx.api,
                    f'{_mypy.expr_text(expr)} is the group of axis {have!r}, but parameter "{name}" of '
                    f'"{callee}" is the group of axis {want!r}; collectives over it would be typed on '
                    f"the wrong axis",
                    expr,
                    SPMD_GROUP,
                )


# -- the `groups` setting ----------------------------------------------------------------


def _call_hook(text: str) -> Callable[[Any], _mypy.Type]:
    def hook(ctx: Any) -> _mypy.Type:
        default = ctx.default_return_type
        if not _mypy.is_process_group(default):
            return default
        return _mypy.group_in_checker(ctx.api, text)

    return guarded(hook, default_return)


def _attribute_hook(text: str) -> Callable[[Any], _mypy.Type]:
    def hook(ctx: Any) -> _mypy.Type:
        default = ctx.default_attr_type
        if ctx.is_lvalue or not _mypy.is_process_group(default):
            return default
        return _mypy.group_in_checker(ctx.api, text)

    return guarded(hook, lambda ctx: ctx.default_attr_type)


def hooks(settings: Settings) -> Tuple[Dict[str, Callable[[Any], _mypy.Type]], Dict[str, Callable[[Any], _mypy.Type]]]:
    """(call hooks, attribute hooks) by fullname for the configured group getters:
    a function or method named there gives the group of its axis, and so does
    an attribute (read, not written)."""
    calls = {name: _call_hook(text) for name, text in settings.groups}
    attributes = {name: _attribute_hook(text) for name, text in settings.groups}
    return calls, attributes
