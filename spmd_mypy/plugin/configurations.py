"""Every configuration in one pass: `@spmd.configurations(flag=(values...))`.

A module (class) or function whose layouts depend on configuration flags
declares the values each flag takes; the checker checks each function body
once per combination (_mypy/configurations.py has the mechanism: mypy's own
per-value copies of a function generic in a variable whose values are the
configurations).  In the copy for one configuration each flag reads as its
value there, as a Literal, wherever the body reads it:

  - an attribute of that name on any object (`self.sequence_parallel`,
    `config.sequence_parallel`, `parallel_dims.ep_enabled`);
  - a call of a function of that name (`get_tensor_model_parallel_world_size()`,
    and a name bound to its result, `world_size = ...()`);
  - a parameter of that name.

So mypy's own narrowing decides `if self.sequence_parallel:`, `if not
config.sequence_parallel`, `if world_size == 1:` per configuration: the branch
that cannot run there is unreachable and not checked, the live one is
checked with the ordinary rules.  Every spmd error found in a configuration
names it ("in configuration sequence_parallel=True: ..."); an error on an axis
the configuration gives one rank (`spmd.axis_size`) is not an error
(vocab/configurations.py).  A declaration the checker cannot read is an error
at the function's first line, and nothing is checked per configuration there.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ..vocab.spec import Spmd
from . import _mypy
from .annotations import AnnotationError, Meta
from .carrier import spmd_of
from .decoding import decode
from .errors import SPMD_ANNOTATION, SPMD_ARG
from .guard import default_return, guarded
from .spec_argument import spec_argument

Hook = Callable[[Any], Any]


def _marker(ctx: Any) -> Any:
    """The first statement of each copy: flag parameters typed by the
    configuration; a declaration that cannot be read, reported."""
    declared = _mypy.configuration_declared(ctx.api)
    if declared is None or not declared.ours():
        return ctx.default_return_type
    if declared.error is not None:
        _mypy.fail(
            ctx.api,
            f"spmd.configurations: {declared.error}; the function is checked once, without configurations",
            ctx.context,
            SPMD_ARG,
        )
        return ctx.default_return_type
    found = _mypy.current_configuration(ctx.api)
    if found is None:  # no copy per configuration: a function without annotations
        _mypy.fail(
            ctx.api,
            "spmd.configurations: the function has no annotations, so mypy does not check it per configuration; "
            "annotate its parameters and return",
            ctx.context,
            SPMD_ARG,
        )
        return ctx.default_return_type
    config, copy = found
    _mypy.restore_parameters(ctx.api)
    _mypy.set_parameter_types(copy, {name: _mypy.literal_of(ctx.api, v) for name, v in config.settings})
    ties = [t for t in (_tie(ctx, e) for e in declared.ties_of(config)) if t is not None]
    _TIES[0] = (copy, ties)
    if ties and not _narrow(ctx, declared, copy, ties):
        return _mypy.never()  # layouts of another configuration: nothing here runs
    return ctx.default_return_type


_TIES: List[Any] = [None]  # (the copy being checked, its configuration's tied layouts)


def _current_ties(api: Any) -> List[Spmd]:
    found = _mypy.current_configuration(api) if _mypy.FLAG_NAMES else None
    held = _TIES[0]
    return held[1] if found is not None and held is not None and held[0] is found[1] else []


def narrow_result(hook: Hook) -> Hook:
    """A call hook whose result, in a configuration with tied layouts, is
    narrowed to them (a module or function returning a Union that follows
    the flag: `self.down(h)` is S(0) where sequence_parallel=True)."""

    def narrowed(ctx: Any) -> Any:
        result = hook(ctx)
        ties = _current_ties(ctx.api)
        found = _narrowed(result, ties) if ties else None
        return result if found is None else found

    return narrowed


def _tie(ctx: Any, expr: Any) -> Optional[Spmd]:
    try:
        node, resolve = spec_argument(ctx.api, expr)
        return decode(Meta((node,), ctx.context.line), resolve)
    except AnnotationError as e:
        _mypy.fail(ctx.api, f"Malformed SPMD annotation in spmd.configurations: {e}", ctx.context, SPMD_ANNOTATION)
        return None


def _fits(typ: Any, ties: List[Spmd]) -> bool:
    """A tensor type that has the tied layout on every axis a tie names."""
    got = spmd_of(typ)
    return got is None or all(got.axis_type(a) == tie.axis_type(a) for tie in ties for a in tie.axes)


def _narrowed(typ: Any, ties: List[Spmd]) -> Optional[Any]:
    """A Union of layouts narrowed to the tied alternatives (None: unchanged,
    or no alternative follows the flag)."""
    alternatives = _mypy.union_alternatives(typ) if typ is not None else None
    if not alternatives:
        return None
    keep = [t for t in alternatives if _fits(t, ties)]
    return _mypy.union_of(keep) if keep and len(keep) < len(alternatives) else None


def _other_choice(typ: Any, declared: Any, ties: List[Spmd]) -> bool:
    """A tensor whose declared type is a variable with values (layout_vars)
    that some value fitting the ties could take, here one that does not:
    mypy's copy for a choice this configuration never makes."""
    variable = _mypy.value_variable(declared) if declared is not None else None
    if typ is None or variable is None or not _mypy.is_tensor(typ) or _fits(typ, ties):
        return False
    return any(_fits(v, ties) for v in variable[1])


def _narrow(ctx: Any, declared: Any, copy: Any, ties: List[Spmd]) -> bool:
    """Parameters and the return type narrowed to the tied layouts; False when
    this copy is a choice of layout variables the configuration excludes."""
    types = {}
    for index, name, typ in _mypy.parameter_types(copy):
        if _other_choice(typ, _mypy.declared_parameter(declared.func, index), ties):
            return False
        narrowed = _narrowed(typ, ties)
        if narrowed is not None:
            types[name] = narrowed
    _mypy.set_parameter_types(copy, types)
    returned = _mypy.return_type(ctx.api)
    narrowed = _narrowed(returned, ties)
    if narrowed is not None:
        _mypy.set_return_type(ctx.api, narrowed)
    return True


def _flag_value(ctx: Any, name: str) -> Optional[Any]:
    """The flag's Literal type in the configuration being checked, or None."""
    if getattr(ctx, "is_lvalue", False):
        return None
    found = _mypy.current_configuration(ctx.api)
    if found is None:
        return None
    is_flag, value = found[0].value(name)
    return _mypy.literal_of(ctx.api, value) if is_flag else None


def flag_attribute(name: str, inner: Optional[Hook]) -> Hook:
    """The attribute hook of a flag name: its value in a configuration, else
    `inner`'s answer (or mypy's)."""

    def hook(ctx: Any) -> Any:
        value = _flag_value(ctx, name)
        if value is not None:
            return value
        return inner(ctx) if inner is not None else ctx.default_attr_type

    return guarded(hook, lambda ctx: ctx.default_attr_type)


def flag_function(name: str, inner: Optional[Hook]) -> Hook:
    """The function (or method) hook of a flag name, likewise."""

    def hook(ctx: Any) -> Any:
        value = _flag_value(ctx, name)
        if value is not None:
            return value
        return inner(ctx) if inner is not None else ctx.default_return_type

    return guarded(hook, default_return)


def with_flags(tables: Dict[str, Any], wrap: Callable[[str, Optional[Hook]], Hook]) -> Callable[[str], None]:
    """A listener for a newly declared flag name: the hooks `tables` already
    hold for names ending in it are wrapped (later builds wrap their own)."""

    def listener(flag: str) -> None:
        suffix = "." + flag
        for fullname in [k for k in tables if k.endswith(suffix)]:
            tables[fullname] = wrap(flag, tables[fullname])

    return listener


def with_flag(build: Callable[[str], Any], wrap: Callable[[str, Optional[Hook]], Hook]) -> Callable[[str], Any]:
    """A hook table's builder whose hook for a declared flag's name is wrapped."""

    def built(fullname: str) -> Any:
        hook = build(fullname)
        name = fullname.rpartition(".")[2]
        if name not in _mypy.FLAG_NAMES or not (hook is None or callable(hook)):
            return hook  # not a flag, or the builder's "ask again"
        return wrap(name, hook)

    return built


HOOKS: Dict[str, Hook] = {_mypy.CONFIGURATION_MARKER_CALL: guarded(_marker, default_return)}


def type_hook(ctx: Any) -> Any:
    """The marker's annotation (analyzer side)."""
    return _mypy.configuration_variable(ctx.api.api)
