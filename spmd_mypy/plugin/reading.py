"""Reading `Annotated[Tensor, Spmd(...)]` wherever users write it.

Two hooks read it, both through the file's annotation index (positions ->
the metadata written there).  The hook of `Annotated` (annotated_hook) runs
for each Annotated in an annotation: beside Tensor or nn.Parameter an
`Spmd(...)` gives the carrier at once; beside an alias of either it is read
too, and beside any other type it is an error, never dropped.  The hook of
`Tensor` (and of Parameter; analyze_tensor) runs where mypy analyses a
Tensor itself: an alias's value (`Act = Annotated[Tensor, Spmd(tp=V)]`,
whose Annotated mypy drops), string annotations, jaxtyping and anything
nested (Optional, list/tuple/dict of tensors), since each inner Tensor is
analyzed in place.  (Writes to an attribute annotated in a class body, an
nn.Module parameter, accept any Tensor: parameters.py.)
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..vocab.localtype import R, V, grad_type
from ..vocab.spec import Spmd
from ..vocab.subaxis import base_axis, indivisible_dim
from . import _mypy
from .annotations import AnnotationError, FileFacts, Meta, last_facts, look, mentions_untyped_torch
from .decoding import decode, decode_annotation
from .global_scopes import global_axes_at
from .config import Settings
from .errors import SPMD_ANNOTATION
from ..vocab.opclasses import untyped_function
from .callsite import without_gradient
from .guard import guarded, nothing
from .positions import Pos
from .trusted_bodies import declared_at
from .global_per_axis import shared_dim
from .spec_argument import named_spec



def _route_values(ctx: _mypy.AnalyzeTypeContext) -> None:
    """Returns, annotated assignments and untyped torch calls of a module mypy
    re-parsed without get_additional_deps are rewritten here (_mypy.route_in_analyzer)."""
    if _mypy.routed_in_analyzer(ctx):
        return
    untyped = mentions_untyped_torch(_mypy.analyzer_path(ctx), _mypy.analysis_owner(ctx))
    _mypy.route_in_analyzer(ctx, untyped_function if untyped else None)


route_values = guarded(_route_values, nothing)


def check_axes(spmd: Spmd, settings: Settings) -> None:
    """Configured axes, strict mode and, with the mesh sizes and a shape, divisible dims (AnnotationError)."""
    if settings.mesh and spmd.spec is not None and spmd.shape is not None:
        bad = indivisible_dim(spmd.spec.dims, spmd.shape, dict(settings.mesh))
        if bad is not None:
            raise AnnotationError(bad, 0)
    if not settings.axes:
        return
    unknown = [a for a in spmd.axes if base_axis(a) not in settings.axes]
    if unknown:
        raise AnnotationError(
            f"unknown mesh axis {unknown[0]!r} (the configured axes are {', '.join(settings.axes)})",
            0,
        )
    if settings.strict and spmd.spec is None:
        missing = [a for a in settings.axes if a not in spmd.axes]
        if missing:
            raise AnnotationError(
                f"strict mode: name every mesh axis; missing {', '.join(missing)}", 0
            )


def check_global(spmd: Spmd, path: object, line: int, owner: object) -> None:
    """In a @global_spmd function every global axis of an annotation needs a
    layout: a bare V says the ranks hold different values but not which dim
    holds the pieces, and two global axes on one dim in per-axis form do not
    say which is the major one (AnnotationError)."""
    axes = global_axes_at(path if isinstance(path, str) else None, line, owner)
    if axes is None:
        return
    for axis, t in spmd.axes.items():
        if t is V and (not axes or axis in axes):
            raise AnnotationError(
                f"V on axis {axis!r} in global code has no global layout (which dim do the ranks' "
                f"pieces make up?). Hint: shard a dim in spec form, Spmd(spec=PartitionSpec(...)), "
                f"or move this code into a spmd.local_map region",
                0,
            )
    shared = shared_dim(spmd, lambda axis: not axes or axis in axes)
    if shared is not None:
        dim, names = shared
        raise AnnotationError(
            f"{' and '.join(repr(a) for a in names)} {'both' if len(names) == 2 else 'all'} shard dim {dim} "
            f"in per-axis form, which does not "
            f"say their order on it (which axis is the major one) in global code. Hint: write the spec form, "
            f"Spmd(spec=PartitionSpec(...)) with the entry ({', '.join(repr(a) for a in names)}) at dim {dim}",
            0,
        )


Plain = Callable[[_mypy.AnalyzeTypeContext, object], _mypy.Type]


def tensor_hook(
    settings: Settings, plain: Plain = _mypy.plain_tensor_in_analyzer
) -> Callable[[_mypy.AnalyzeTypeContext], _mypy.Type]:
    """The type-analyze hook of `Tensor` (analyze_tensor) under `settings`:
    a closure, as mypy calls it for every Tensor of every annotation.  With
    `plain` = _mypy.plain_parameter_in_analyzer it is nn.Parameter's: an
    Spmd(...) beside a Parameter gives the same carrier as beside a Tensor."""
    checks = bool(settings.mesh or settings.axes)  # else check_axes finds nothing

    def hook(ctx: _mypy.AnalyzeTypeContext) -> _mypy.Type:
        return analyze_tensor(ctx, settings, checks, plain)

    return hook


# [tree, its facts, its index]: the tree the last Tensor was analysed in,
# once it is routed whole (a file's Tensors come one after another).
_READY: list = [None, None, None]


def analyze_tensor(
    ctx: _mypy.AnalyzeTypeContext,
    settings: Settings,
    checks: bool = True,
    plain: Plain = _mypy.plain_tensor_in_analyzer,
) -> _mypy.Type:
    """The type of a `Tensor` in an annotation: its carrier if an Spmd(...) sits with it.
    `checks`: whether the settings configure axes or mesh sizes (check_axes);
    `plain`: the type without Spmd(...) (a Tensor, or a Parameter).

    Runs behind guard.guarded: an unreadable annotation is a plain Tensor.
    """
    tree = _mypy.analysis_owner(ctx)
    ready = _READY
    if tree is ready[0] and tree is not None:
        facts, index = ready[1], ready[2]  # the tree of the last call, routed whole
    else:
        found = _first_look(ctx, tree)
        if found is None:
            return plain(ctx, tree)  # torch, typeshed, code without spmd
        facts, index = found
    pos = _mypy.type_position(ctx)
    meta = index.get(pos)
    if meta is None:
        return _trusted_parameter(ctx, tree, pos, plain(ctx, tree))
    carrier = _carrier_of(ctx, meta, tree, facts.global_code, settings, checks, plain)
    if _mypy.is_carrier(carrier):
        _mypy.mark_alias_target(ctx)
    return carrier


def _first_look(ctx: _mypy.AnalyzeTypeContext, tree: object) -> Optional[Tuple[FileFacts, Dict[Pos, Meta]]]:
    """The file's facts and annotation index (None: the file does not use
    spmd); routes its values on the first look (route_values)."""
    facts = last_facts(tree)  # a look at this tree made already: the common case, kept short
    if facts is None:
        facts = look(getattr(tree, "path", None), tree)  # _mypy.analyzer_path(ctx), the owner at hand
    if not facts.uses:
        return None
    index = facts.built  # built on the first look at this version
    if index is None:
        index = facts.index(lambda marked: _mypy.annotation_spans(tree, marked))
    if not _mypy.routed_whole(tree):
        route_values(ctx)
    if _mypy.routed_whole(tree):  # stays so for this tree: its next Tensors skip the steps above
        _READY[:] = [tree, facts, index]
    return facts, index


def _carrier_of(
    ctx: _mypy.AnalyzeTypeContext,
    meta: Meta,
    tree: object,
    global_code: bool,
    settings: Settings,
    checks: bool,
    plain: Plain,
    lookup: Optional[Callable[[str], Optional[str]]] = None,
) -> _mypy.Type:
    """The carrier of the Spmd(...) in `meta`, checked against the settings
    (plain, with an spmd-annotation error, when malformed; plain when the
    metadata is no Spmd).  `lookup`: _mypy.analyzer_lookup(ctx), if at hand."""
    try:
        _NAMED_AT[0] = ctx  # read only where metadata is a name (_named_spec_at)
        spmd = decode_annotation(meta, lookup or _mypy.analyzer_lookup(ctx), _named_spec_at)
        if spmd is None:
            return plain(ctx, tree)
        if checks:
            check_axes(spmd, settings)
        if global_code:  # else the file has no global code (global_scopes.py)
            check_global(spmd, getattr(tree, "path", None), ctx.context.line, tree)
    except AnnotationError as e:
        ctx.api.fail(f"Malformed SPMD annotation: {e}", ctx.context, code=SPMD_ANNOTATION)
        return plain(ctx, tree)
    return _mypy.carrier_in_analyzer(ctx, spmd.canonical(), tree)


def _named_spec_at(fullname: str) -> Optional[Tuple[ast.expr, Callable[[str], Optional[str]]]]:
    """Metadata written as a name, read in the annotation _carrier_of is on:
    a module-level Final spec (spec_argument.named_spec), through the
    semantic analyzer's modules.  (One function, not a closure per
    annotation: most annotations never ask.)"""
    return named_spec(getattr(_NAMED_AT[0].api, "api", None), fullname)


_NAMED_AT: List[Any] = [None]  # the context of the annotation being read


_PLAIN: Dict[str, Plain] = {
    _mypy.TENSOR: _mypy.plain_tensor_in_analyzer,
    _mypy.PARAMETER: _mypy.plain_parameter_in_analyzer,
}


def annotated_hook(
    settings: Settings, mypys_own: Callable[[_mypy.AnalyzeTypeContext], _mypy.Type]
) -> Callable[[_mypy.AnalyzeTypeContext], _mypy.Type]:
    """The type-analyze hook of `Annotated` itself, in annotations (mypy drops
    Annotated from an alias's value, whose Tensor the Tensor hook reads).
    `Annotated[Tensor, Spmd(...)]` is read here at once, without analysing the
    Tensor; any other `Annotated[X, ...]` is X analysed as mypy would, and an
    Spmd(...) beside an X that is not Tensor or nn.Parameter is read when X is
    an alias of either, else reported (_beside_other), never dropped.
    `mypys_own`: mypy's analysis with this hook out of the way."""
    checks = bool(settings.mesh or settings.axes)

    def hook(ctx: _mypy.AnalyzeTypeContext) -> _mypy.Type:
        first = _mypy.bare_first(ctx)
        if first is None:
            return _mypy.annotated_inner(ctx) or mypys_own(ctx)  # none: Annotated[X], mypy's error
        tree = _mypy.analysis_owner(ctx)
        ready = _READY
        if tree is ready[0] and tree is not None:
            facts, index = ready[1], ready[2]
        else:
            found = _first_look(ctx, tree)
            if found is None:
                return _mypy.annotated_inner(ctx) or mypys_own(ctx)  # a file without spmd
            facts, index = found
        meta = index.get(first[1])
        if meta is None:
            return _mypy.annotated_inner(ctx) or mypys_own(ctx)
        lookup = _mypy.analyzer_lookup(ctx)
        plain = _PLAIN.get(lookup(first[0]) or "")
        if plain is not None:  # Tensor or Parameter itself: the common case
            return _carrier_of(ctx, meta, tree, facts.global_code, settings, checks, plain, lookup)
        inner = _mypy.annotated_inner(ctx)
        if inner is None:
            return mypys_own(ctx)
        return _beside_other(ctx, inner, first[0], meta, tree, facts.global_code, settings, checks)

    return hook


def alias_value_hook(settings: Settings) -> Callable[[_mypy.AnalyzeTypeContext], _mypy.Type]:
    """The type-analyze hook of `AliasValue[X]`, the wrapper the rewrite puts
    around the first argument of an `Annotated[X, Spmd(...)]` in an alias's
    value when X is not written Tensor or Parameter (_mypy/alias_values.py):
    the metadata at X's position read as annotated_hook reads it (an alias
    of Tensor or Parameter gives the carrier, anything else an error)."""
    checks = bool(settings.mesh or settings.axes)

    def hook(ctx: _mypy.AnalyzeTypeContext) -> _mypy.Type:
        inner, first = _mypy.alias_value_argument(ctx)
        tree = _mypy.analysis_owner(ctx)
        found = _first_look(ctx, tree) if first is not None else None
        meta = found[1].get(first[1]) if found is not None and first is not None else None
        if found is None or first is None or meta is None:
            return inner
        return _beside_other(ctx, inner, first[0], meta, tree, found[0].global_code, settings, checks)

    return hook


def _beside_other(
    ctx: _mypy.AnalyzeTypeContext,
    inner: _mypy.Type,
    name: str,
    meta: Meta,
    tree: object,
    global_code: bool,
    settings: Settings,
    checks: bool,
) -> _mypy.Type:
    """`Annotated[name, <meta>]` with `name` neither Tensor nor Parameter, and
    `inner` its analysis: an alias of either is read; an Spmd(...) beside
    anything else is an spmd-annotation error (it would be dropped); beside
    an int it makes a rank number (_rank_number)."""
    if _mypy.is_carrier(inner):
        return inner  # an alias of a carrier (the outer Spmd(...) is its own)
    plain = _PLAIN.get(_mypy.read_class(inner) or "")
    if plain is not None:
        return _carrier_of(ctx, meta, tree, global_code, settings, checks, plain)
    if _mypy.is_plain_int(inner):
        return _rank_number(ctx, inner, meta)
    try:
        is_spmd = decode_annotation(meta, _mypy.analyzer_lookup(ctx)) is not None
    except AnnotationError:
        is_spmd = True  # an Spmd(...), malformed as well
    if is_spmd:
        ctx.api.fail(
            f"Malformed SPMD annotation: Spmd(...) annotates {name}, which is not a Tensor or "
            f"nn.Parameter; it is not read, so nothing of this value is checked. "
            f"Hint: Annotated[Tensor, Spmd(...)]",
            ctx.context,
            code=SPMD_ANNOTATION,
        )
    return inner


def _rank_number(ctx: _mypy.AnalyzeTypeContext, inner: _mypy.Type, meta: Meta) -> _mypy.Type:
    """`Annotated[int, Spmd(tp=V)]`: an int that differs by rank on tp (a
    parameter given a rank number, ranks.py), one value on the axes given R;
    no other axis type fits an int."""
    try:
        spmd = decode_annotation(meta, _mypy.analyzer_lookup(ctx))
        if spmd is None:
            return inner
        wrong = [f"{a}={t}" for a, t in spmd.axes.items() if t not in (R, V)]
        if spmd.spec is not None or wrong or spmd.rest not in (None, R, V):
            raise AnnotationError(
                f"an int differs by rank (V) or is one value on every rank (R) on each axis, not "
                f"{', '.join(wrong) or 'a partition spec'}. Hint: Annotated[int, Spmd("
                f"{', '.join(f'{a}=V' for a in spmd.axes) or 'tp=V'})]",
                meta.line,
            )
    except AnnotationError as e:
        ctx.api.fail(f"Malformed SPMD annotation: {e}", ctx.context, code=SPMD_ANNOTATION)
        return inner
    varying = {a: V for a, t in spmd.axes.items() if t is V}
    if not varying and spmd.rest is not V:
        return inner  # one value on every rank: a plain int
    return _mypy.rank_in_analyzer(ctx, Spmd.of(varying, None, True, spmd.rest if spmd.rest is V else R).canonical())


def _trusted_parameter(ctx: _mypy.AnalyzeTypeContext, tree: object, pos: Pos, plain: _mypy.Type) -> _mypy.Type:
    """A plain `Tensor` parameter of an autograd Function declared trusted:
    the declaration's type for it, without gradient (trusted_bodies.py)."""
    found = declared_at(_mypy.analyzer_path(ctx), pos, tree)
    if found is None:
        return plain
    entry, gradient = found
    try:
        spmd = decode(Meta((entry,), ctx.context.line), _mypy.analyzer_lookup(ctx))
    except AnnotationError:
        return plain  # reported where the declaration is checked (spmd.trusted's hook)
    if spmd is None:
        return plain
    if gradient:  # a spec form's unnamed axes are left unknown here
        rest = grad_type(spmd.rest) if spmd.rest is not None else None
        spmd = Spmd.of({a: grad_type(t) for a, t in spmd.axes.items()}, None, True, rest)
    return _mypy.carrier_in_analyzer(ctx, without_gradient(spmd).canonical())
