"""The mypy plugin: `plugins = spmd_mypy.plugin` in the mypy configuration.

Hooks, each a dictionary lookup by fullname (mypy asks hundreds of thousands
of times per run):

  Tensor in a type        reading.tensor_hook     (Annotated[Tensor, Spmd(...)])
  Parameter in a type     reading.tensor_hook     (Annotated[nn.Parameter, Spmd(...)]: the same carrier)
  Annotated in a type     reading.annotated_hook  (an Spmd(...) beside an alias of Tensor, or beside no tensor)
  ProcessGroup in a type  groups.analyze_group    (Annotated[ProcessGroup, Axis("tp")])
  configured group getters groups.hooks(settings) ([spmd_mypy] groups = ...)
  torch functions, F.*    ops.op_hook             (table-driven per-axis rules)
  methods of a carrier    ops.op_hook             (operators, in-place, backward)
  spmd.* collectives      comms.hooks(...)        (src/dst from vocab.collectives;
                                                  global mode's refinement passed in)
  checkpoint(fn, *args)   checkpointing.HOOKS     (fn(*args): its arguments checked, its result)
  custom_fwd, autocast    decorators.*            (torch's untyped decorators give back their function)
  Module.__call__         modules.module_call_hook: a table op's forward (nn.Linear ->
                          F.linear), else relation.module_call_hook (routed to forward)
  nn.Linear & co.         modules.*: redeclared weight/bias, super().forward,
                          ModuleList(...), named-tuple fields, carrier-only overrides
  Function.apply          relation.function_apply_hook (routed to forward)
  user function calls     relation.signature_hook (parameters relaxed), then
                          relation.argument_hook (arguments checked per axis)
  carrier attributes      ops.attribute_hook      (.T keeps the type, .grad is its gradient)
  user class attributes   parameters.write_hook   (writes to a module parameter: a plain Tensor,
                                                  or a value of the declared SPMD type)
  spmd.local_map(fn, ...) local_map.HOOKS         (fn checked against in_types/out_types)
  spmd_types.*            spmd_types.HOOKS        (the runtime checker's API, read with our rules)
  no_typecheck, local_map spmd_types_regions.*    (its regions and boundaries; Fn.apply of a
                                                  Function with a typecheck hook)
  torch.distributed.nn.functional.*  dist_nn.HOOKS  (autograd collectives, read as typed ones)
  DTensor from/to_local   dtensor.*_HOOKS         (placements and gradient placements against SPMD types)
  spmd.trusted(fn, ...)   local_map.HOOKS         (fn retyped, unchecked; decorators: local_map.METHOD_HOOKS)
  report_untyped = true   untyped_regions.watch_* (typed tensors entering unannotated code)
  spmd.partitioned.*      partitioned.HOOKS       (PS/PSA conversions; ops and collectives ask it of PS/PSA operands)
  dist.get_rank(g), seq[r] ranks.*_HOOKS          (ints that differ by rank; operands of ops: callsite)
  spmd.sync_grads & co.   gradsync.HOOKS          (the gradient-sync contract of the finishing
                                                  function; in-place collectives and live aliases)
  spmd.send_next & co.    pipeline.HOOKS          (p2p between pipeline stages, against the boundary type)
  spmd.assert_like        layout_vars.HOOKS       (a flag-dependent Union tied to a witness)
  @spmd.configurations    configurations.*        (each configuration checked; its flags read
                                                  as Literals there, its errors named)
  return / y: T = e       declared.hooks(...)     (rewritten into calls before analysis)
  torch.special/linalg/fft untyped.HOOKS          (Any to mypy: calls wrapped before analysis)

Modules: DESIGN.md's layout lists them (_mypy/ holds every mypy import).  Each feature module owns its
hook table; this module registers them, the core ones when mypy loads the plugin, the others
(FUNCTION_FEATURES, METHOD_FEATURES) on the first lookup of a name under their prefixes; a call
through a value holding a torch op (`self.act(x)`) is indirect_calls'.  The plugin never imports torch.
"""

from __future__ import annotations

import functools
import importlib
import hashlib
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from . import (
    _mypy,
    checkpointing,
    comm_sites,
    comms,
    config,
    configurations,
    declared,
    decorators,
    global_exact,
    global_mode,
    groups,
    modules,
    ops,
    parameters,
    partitioned,
    ranks,  # rank numbers through user functions (imported at once; its hook tables are a feature's)
    reading,
    relation,
    setup_check,
    spec_argument, untyped_regions,
)
from ..vocab.opclasses import untyped_function
from ..vocab.opnames import FUNCTION_NAMESPACES, TRANSPOSED_ATTRIBUTES
from .guard import STRICT, default_return, guarded, nothing, report_skipped, set_vocabulary
from .annotations import look, mentions_spmd
from .sourcefile import installed_package
from .indirect_calls import through_value

_VOCAB = Path(__file__).resolve().parent.parent / "vocab"


def _rules_version() -> str:
    """A digest of the rule tables and the plugin's sources, so that mypy's
    cache goes stale when one changes: of each file's name, size and
    modification time (a stat per file; reading them all cost ~2 ms a run)."""
    rows: List[str] = []
    plugin = os.path.dirname(__file__)
    folders = [(str(_VOCAB), len(str(_VOCAB)), False), (plugin, len(plugin), True)]
    while folders:
        folder, strip, below = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    stat = entry.stat()
                    rows.append(f"{entry.path[strip:]} {stat.st_size} {stat.st_mtime_ns}")
                elif below and entry.name != "__pycache__" and entry.is_dir():
                    folders.append((entry.path, strip, True))
    return hashlib.sha256("\n".join(sorted(rows)).encode()).hexdigest()[:16]


_TORCH_FUNCTION_PREFIXES = tuple(p for p, _ in FUNCTION_NAMESPACES)
_CARRIER_PREFIX = _mypy.CARRIER + "."
_TENSOR_BASE_PREFIX = "torch._C.TensorBase."
# mypy names a method on a Union receiver "<dunder> of <class>", the class
# defining it: TensorBase for most reflected operators, Tensor for __rsub__,
# __rmatmul__, __rpow__, ... (torch/_tensor.py), the carrier for the
# __rtruediv__ its stub declares.
_UNION_RECEIVERS = (" of TensorBase", " of Tensor", " of SpmdTensor")
_DISTRIBUTED_PREFIX = "torch.distributed.distributed_c10d."
_PLAIN_TENSOR_PREFIX = _mypy.TENSOR + "."  # or an unknown result (SpmdTensor[Any])
# Callees whose signatures never hold an SPMD annotation: no signature hook.
_LIBRARY_PREFIXES = ("builtins.", "typing.", "torch.", "spmd_phantom.", "spmd_mypy.", "collections.", "functools.")

Hook = Callable[[Any], Any]


def _function_hook(fullname: str) -> Optional[Hook]:
    if "." not in fullname:  # a call through a value (`act(x)`): mypy names it by the callee's short name
        return through_value(_argument_hook(fullname), _function_hook, _TORCH_FUNCTION_PREFIXES)
    if fullname in ("builtins.abs", "builtins.sum"):  # builtins that run tensor ops
        from .python_builtins import HOOKS  # a feature: imported on first use

        return HOOKS[fullname]
    for prefix, namespace in FUNCTION_NAMESPACES:
        if fullname.startswith(prefix):
            name = fullname[len(prefix):]
            return ops.op_hook(name, namespace, False, global_mode.refine_op) if "." not in name else None
    if fullname.startswith(_DISTRIBUTED_PREFIX):
        from . import raw_collectives  # a feature: imported on first use

        return raw_collectives.raw_collective_hook(fullname[len(_DISTRIBUTED_PREFIX):])
    return _argument_hook(fullname) if _user_code(fullname) else None


def _method_hook(fullname: str) -> Optional[Hook]:
    for prefix in (_CARRIER_PREFIX, _PLAIN_TENSOR_PREFIX):  # a plain receiver may get a
        if fullname.startswith(prefix):  # typed argument, or give an unknown result
            return ops.op_hook(fullname[len(prefix):], "tensor", True, global_mode.refine_op)
    if fullname.endswith(_UNION_RECEIVERS):
        # A reflected operator on a value from two branches (`x - v`, v a
        # Union): mypy names the method "<dunder> of <class>".
        name = fullname.rpartition(" of ")[0]
        if name.startswith("__") and " " not in name:
            return ops.op_hook(name, "tensor", True, global_mode.refine_op)
    if fullname == modules.SEQUENTIAL_OF_CALL:  # the receiver's class names the call
        return _SEQUENTIAL_CALL
    if fullname.endswith(".__call__") and not _stdlib(fullname):  # mypy's own plugin types functools.partial's
        return _MODULE_CALL
    if fullname.endswith(".forward") and not _stdlib(fullname):
        fallback = _argument_hook(fullname) if _user_code(fullname) else default_return
        return modules.forward_method_hook(fallback)
    if fullname.endswith(".apply") and not fullname.startswith(_LIBRARY_PREFIXES):
        return _function_apply(fullname)
    if not _user_code(fullname):
        return None  # an attribute holding a torch op (`self.act(x)`): typed by the op's hook
    return through_value(_argument_hook(fullname), _function_hook, _TORCH_FUNCTION_PREFIXES)


# Standard-library modules (typeshed's, which no user module may shadow):
# their signatures never hold an SPMD annotation.  Calls into them are a third
# of the signature hooks a cold run would otherwise run, mostly in torch.
_STDLIB = _mypy.stdlib_modules()


def _stdlib(fullname: str) -> bool:
    """A name of the standard library: its hooks are mypy's default plugin's,
    which a hook of ours would hide (mypy takes the first plugin's)."""
    return fullname.startswith(("builtins.", "typing.")) or fullname.partition(".")[0] in _STDLIB


def _user_code(fullname: str) -> bool:
    """A callee that may hold SPMD annotations: not torch, typing, stdlib, ours."""
    return not fullname.startswith(_LIBRARY_PREFIXES) and not _stdlib(fullname)


# Methods of builtins' containers that store a value of the element type: a
# dict or list of lists of plain tensors takes a list of carriers
# (relation.storing_signature_hook).
_STORING_METHODS = frozenset({
    "builtins.dict.__setitem__", "builtins.dict.setdefault", "builtins.list.__setitem__",
    "builtins.list.append", "builtins.list.insert",
})


def _signature_hook(plugin: Any, fullname: str) -> Optional[Hook]:
    if fullname in _STORING_METHODS:
        return relation.storing_signature_hook
    if fullname.startswith(_TORCH_FUNCTION_PREFIXES):
        # only a torch function with a list of tensors among its parameters
        # needs the hook (torch.cat, torch.stack): mypy then skips building a
        # context and calling it on every other torch call
        params = _mypy.declared_parameters(plugin, fullname)
        if params is not None and not relation.relaxes_torch_parameters(params):
            return None
        return relation.torch_signature_hook
    return relation.signature_hook if _user_code(fullname) else None


def _argument_hook(fullname: str, parts: int = 1) -> Hook:
    """The hook of a call of a user function, named `callee` in messages (its fullname's last `parts` parts)."""
    callee = ".".join(fullname.split(".")[-parts:])
    hook = global_exact.exact_arguments(ranks.through_call(relation.argument_hook(callee), callee))
    return guarded(configurations.narrow_result(untyped_regions.watch_function(hook, _declares_spmd)), default_return)


def _declares_spmd(ctx: Any) -> bool:
    return relation.pending_signature(ctx) is not None  # relaxed: it declares SPMD types


# Typed tensors entering unannotated code: reported with report_untyped = true.
_MODULE_CALL = guarded(
    configurations.narrow_result(
        untyped_regions.watch_forward(modules.module_call_hook, _mypy.forward_as_written, "the module", False)
    ),
    default_return,
)
_SEQUENTIAL_CALL = guarded(
    configurations.narrow_result(
        untyped_regions.watch_forward(modules.sequential_call_hook, modules.watched_chain, "the module", False)
    ),
    default_return,
)
_FUNCTION_APPLY: List[Hook] = []


def _function_apply(fullname: str) -> Hook:
    """The hook of `Fn.apply`: the call runs Fn's forward (spmd_types'
    typecheck hooks of a Function asked first), unless Fn binds apply to a
    typed attribute (`@spmd.trusted(...)` on the class): then the call is
    checked against it as a function's."""
    declared, forward = _argument_hook(fullname, parts=2), _forward_apply()  # "Fn.apply"
    return guarded(lambda ctx: declared(ctx) if _mypy.declares_apply(ctx) else forward(ctx), default_return)


def _forward_apply() -> Hook:
    """The hook of every `Fn.apply` that runs forward, built on the first."""
    if not _FUNCTION_APPLY:
        from . import spmd_types_regions

        _FUNCTION_APPLY.append(guarded(
            untyped_regions.watch_forward(
                spmd_types_regions.apply_hook(relation.function_apply_hook),
                spmd_types_regions.forward_unless_hooked(_mypy.autograd_function_forward),
                "the autograd Function",
                True,
            ),
            default_return,
        ))
    return _FUNCTION_APPLY[0]


def _attribute_hook(fullname: str) -> Optional[Hook]:
    for prefix in (_CARRIER_PREFIX, _TENSOR_BASE_PREFIX):  # keyed by the defining class
        if fullname.startswith(prefix):
            name = fullname[len(prefix):]
            hook = ops.attribute_hook(name)
            if hook is not None and name in TRANSPOSED_ATTRIBUTES:
                return global_mode.transposed_attribute(name, hook)
            return hook
    return parameters.write_hook(fullname.rpartition(".")[2]) if _user_code(fullname) else None


def _disjoint(*tables: Dict[str, Hook]) -> Dict[str, Optional[Hook]]:
    """The tables merged; each fullname belongs to one feature."""
    merged: Dict[str, Optional[Hook]] = {}
    for table in tables:
        both = merged.keys() & table.keys()
        assert not both, f"hook tables overlap: {sorted(both)}"
        merged.update(table)
    return merged


class _Hooks(Dict[str, Optional[Hook]]):
    """fullname -> hook (None: no hook), built on the first lookup of a name.
    mypy asks for hooks about 480,000 times in a cold run of a 20,000-line
    codebase: the plugin hands mypy a table's own `__getitem__` as its
    get_*_hook, so a lookup of a known name runs no Python code; only a miss
    calls `build`, whose answer is kept unless it is ASK_AGAIN."""

    __slots__ = ("_build",)

    def __init__(self, build: Callable[[str], Any], known: Optional[Dict[str, Optional[Hook]]] = None) -> None:
        super().__init__(known or {})
        self._build = build

    def __missing__(self, fullname: str) -> Optional[Hook]:
        hook = self._build(fullname)
        if hook is ASK_AGAIN:
            return None
        self[fullname] = hook
        return hook


ASK_AGAIN: Any = object()  # a build's answer for "not known yet": not kept


# -- features imported on first use ------------------------------------------------
# A feature module is imported when mypy first asks for a name under one of
# its prefixes (every key of its tables starts with one; a project that never
# calls into the feature never imports it).  A feature with settings is
# configured then, and again by every plugin mypy loads after.

Tables = Callable[[], Dict[str, Hook]]
_SETTINGS: List[Any] = [None]  # the settings of the plugin mypy loaded last
_CONFIGURED: List[Any] = []  # the features with settings imported so far


def _configured(module: Any) -> Any:
    if module not in _CONFIGURED:
        _CONFIGURED.append(module)
        module.configure(_SETTINGS[0])
    return module


def _feature(module: str, table: str = "HOOKS", configured: bool = False) -> Tables:
    """The loader of one feature's hook table: imports the plugin's module
    `module` (configured with the settings when `configured`) and returns
    its attribute `table`."""

    def tables() -> Dict[str, Hook]:
        loaded = importlib.import_module(f"{__name__}.{module}")
        return getattr(_configured(loaded) if configured else loaded, table)

    return tables


_MEGATRON = _feature("megatron")  # one feature, in both tables

_DTENSOR_PREFIX = "torch.distributed.tensor."
# (prefixes, tables) of the function and method hook tables' features
FUNCTION_FEATURES: Tuple[Tuple[Tuple[str, ...], Tables], ...] = (
    (("spmd_mypy.runtime.gradsync.",), _feature("gradsync")),
    (("spmd_mypy.runtime.pipeline.",), _feature("pipeline", configured=True)),
    (("megatron.",), _MEGATRON),
    (("spmd_types.",), _feature("spmd_types")),
    (("spmd_types.",), _feature("spmd_types_regions")),
    ((_DTENSOR_PREFIX,), _feature("dtensor", "FUNCTION_HOOKS", configured=True)),
    (("spmd_mypy.runtime.global_ops.local_map", "spmd_mypy.runtime.trusted.", _mypy.TRUSTED_APPLY), _feature("local_map")),
    (("spmd_mypy.runtime.api.assert_like",), _feature("layout_vars")),
    ((_mypy.UNTYPED,), _feature("untyped")),
    ((_mypy.RAW_WRITE,), _feature("raw_collectives")),
    ((_DISTRIBUTED_PREFIX + "get_rank",), _feature("ranks", "FUNCTION_HOOKS")),  # rank numbers, and their uses
    (("torch.distributed.nn.functional.", "torch.distributed._functional_collectives."), _feature("dist_nn", configured=True)),
)
METHOD_FEATURES: Tuple[Tuple[Tuple[str, ...], Tables], ...] = (
    (("megatron.",), _MEGATRON),
    (("spmd_types.",), _feature("spmd_types_regions", "METHOD_HOOKS")),
    ((_DTENSOR_PREFIX, "spmd_phantom.dtensor."), _feature("dtensor", "METHOD_HOOKS", configured=True)),
    (("spmd_mypy.runtime.global_ops.LocalMapDecorator.", "spmd_mypy.runtime.trusted.TrustedDecorator."),
     _feature("local_map", "METHOD_HOOKS")),
    (("spmd_phantom.AxisGroup.rank", "spmd_phantom.RankOf.", "torch.distributed.device_mesh.DeviceMesh.get_local_rank",
      "builtins.tuple.__getitem__", "builtins.list.__getitem__"), _feature("ranks", "METHOD_HOOKS")),
    (("spmd_mypy.runtime.activation.",), _feature("activations", "METHOD_HOOKS")),  # calls of an spmd.Activation
)


class _Deferred:
    """The hook tables of features imported on first use, for one hook table
    whose own entries are `eager`: a name under a feature's prefix loads that
    feature's tables (once), which must not overlap `eager` or each other."""

    def __init__(self, features: Sequence[Tuple[Tuple[str, ...], Tables]], eager: Dict[str, Any]) -> None:
        self._pending = list(features)
        self._prefixes = tuple(p for prefixes, _ in features for p in prefixes)
        self._eager = eager
        self._loaded: Dict[str, Hook] = {}

    def or_build(self, build: Callable[[str], Any]) -> Callable[[str], Any]:
        """`build`, for names that no feature's table holds."""

        def built(fullname: str) -> Any:
            hook = self.get(fullname) if fullname.startswith(self._prefixes) else None
            return build(fullname) if hook is None else hook

        return built

    def get(self, fullname: str) -> Optional[Hook]:
        for feature in [f for f in self._pending if fullname.startswith(f[0])]:
            self._pending.remove(feature)
            prefixes, tables = feature
            table = tables()
            stray = [k for k in table if not k.startswith(prefixes)]
            assert not stray, f"hook names outside their feature's prefixes {prefixes}: {sorted(stray)}"
            both = (self._eager.keys() | self._loaded.keys()) & table.keys()
            assert not both, f"hook tables overlap: {sorted(both)}"
            self._loaded.update(table)
        return self._loaded.get(fullname)


class SpmdPlugin(_mypy.Plugin):
    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.settings = config.load(getattr(options, "config_file", None))
        self._version = _rules_version()
        settings = self.settings
        self._config_data = {"rules": self._version, **settings.as_data()}
        self._each_run: Set[str] = set()  # modules mypy checks every run (report_config_data)
        set_vocabulary(settings.vocabulary)  # messages in the user's words (guard.py)
        comms.configure(settings)
        global_mode.configure(settings)
        ops.configure(settings.synced_rng)
        untyped_regions.configure(settings)
        _SETTINGS[0] = settings  # the features imported later (and those imported: now)
        for feature in _CONFIGURED:
            feature.configure(settings)
        self._tensor_hook: Hook = guarded(
            reading.tensor_hook(settings), _mypy.plain_tensor_in_analyzer
        )
        # Each feature module owns its table; global mode's refinements are
        # passed in where a table is built.
        group_calls, group_attributes = groups.hooks(settings)  # the `groups` setting
        # (gradsync, pipeline, megatron, spmd_types, dtensor, local_map, layout_vars'
        # assert_like, untyped and raw_collectives are in FUNCTION_FEATURES: imported on first use)
        functions = _disjoint(
            comms.hooks(partitioned.collective_refine(global_mode.refine_collective), global_mode.spec_redistribute),
            partitioned.HOOKS,
            declared.hooks(global_exact.exact_declared),
            global_mode.HOOKS,
            parameters.HOOKS,
            checkpointing.HOOKS,
            decorators.FUNCTION_HOOKS,
            configurations.HOOKS,
            modules.function_hooks(_argument_hook),
            group_calls,
        )
        self._functions = _Hooks(
            configurations.with_flag(_Deferred(FUNCTION_FEATURES, functions).or_build(_function_hook), configurations.flag_function),
            functions,
        )
        # calls of the `groups` setting's getters; megatron-core's layer calls,
        # spmd_types' boundaries and DTensor's methods (METHOD_FEATURES)
        methods = _disjoint(dict(group_calls), decorators.METHOD_HOOKS)
        self._methods = _Hooks(
            configurations.with_flag(_Deferred(METHOD_FEATURES, methods).or_build(_method_hook), configurations.flag_function),
            methods,
        )
        self._signatures = _Hooks(functools.partial(_signature_hook, self))
        self._attributes = _Hooks(configurations.with_flag(_attribute_hook, configurations.flag_attribute), _disjoint(dict(modules.ATTRIBUTE_HOOKS), dict(group_attributes)))
        group_hook = guarded(functools.partial(groups.analyze_group, settings=settings), _mypy.plain_group_in_analyzer)
        self._types = _Hooks(
            self._type_hook,
            {
                _mypy.TENSOR: self._tensor_hook,
                _mypy.PARAMETER: guarded(
                    reading.tensor_hook(settings, _mypy.plain_parameter_in_analyzer),
                    _mypy.plain_parameter_in_analyzer,
                ),
                _mypy.PROCESS_GROUP: group_hook,
                _mypy.CONFIGURATION_MARKER_TYPE: guarded(configurations.type_hook, _mypy.default_type),
            },
        )
        for name in _mypy.ANNOTATED:
            own = functools.partial(self._without_hook, name)
            self._types[name] = guarded(reading.annotated_hook(settings, own), own)
        self._types[_mypy.ALIAS_VALUE] = guarded(reading.alias_value_hook(settings), _mypy.alias_value_in_analyzer)
        # a flag declared by @spmd.configurations: hooks already built for its name wrapped
        _mypy.on_new_flag(configurations.with_flags(self._functions, configurations.flag_function))
        _mypy.on_new_flag(configurations.with_flags(self._methods, configurations.flag_function))
        _mypy.on_new_flag(configurations.with_flags(self._attributes, configurations.flag_attribute))
        # mypy's lookups go straight to each table's C-level __getitem__ (see
        # _Hooks); the methods of the same names below answer the same.
        for method, table in (
            ("get_function_hook", self._functions),
            ("get_method_hook", self._methods),
            ("get_function_signature_hook", self._signatures),
            ("get_method_signature_hook", self._signatures),
            ("get_attribute_hook", self._attributes),
            ("get_type_analyze_hook", self._types),
        ):
            setattr(self, method, table.__getitem__)

    def get_type_analyze_hook(self, fullname: str) -> Optional[Hook]:
        return self._types[fullname]

    def get_function_hook(self, fullname: str) -> Optional[Hook]:
        return self._functions[fullname]

    def get_method_hook(self, fullname: str) -> Optional[Hook]:
        return self._methods[fullname]

    def get_function_signature_hook(self, fullname: str) -> Optional[Hook]:
        return self._signatures[fullname]

    def get_method_signature_hook(self, fullname: str) -> Optional[Hook]:
        return self._signatures[fullname]

    def get_attribute_hook(self, fullname: str) -> Optional[Hook]:
        return self._attributes[fullname]

    def _without_hook(self, fullname: str, ctx: Any) -> Any:
        """mypy's own analysis of a type whose hook is `fullname`'s (asked
        again meanwhile, the table answers no hook)."""
        hook = self._types[fullname]
        self._types[fullname] = None
        try:
            return _mypy.default_type(ctx)
        finally:
            self._types[fullname] = hook

    def _type_hook(self, fullname: str) -> Any:
        """The type-analyze hook for a name seen the first time (or ASK_AGAIN)."""
        # An alias of an annotated tensor used in another module: its uses are
        # where a re-parsed module gets its returns routed (reading.py).
        if fullname.startswith(_LIBRARY_PREFIXES) or fullname.partition(".")[0] in _STDLIB:
            return None  # most names asked: no stat of their module's file
        tree = _mypy.module_tree(self, fullname.rpartition(".")[0])
        if not mentions_spmd(getattr(tree, "path", None), tree):  # the tree: no stat once looked at
            return None  # torch, typeshed, code without spmd
        try:
            known = _mypy.alias_holding_carrier(self, fullname)
        except Exception as exc:  # the plugin never takes mypy down
            if STRICT:
                raise
            report_skipped(None, _mypy.alias_holding_carrier, exc)
            known = False
        if known is None:
            return ASK_AGAIN  # not analysed yet
        return self._alias_hook(fullname) if known else None

    def _alias_hook(self, fullname: str) -> Hook:
        def hook(ctx: Any) -> Any:
            if not _mypy.routed_in_analyzer(ctx):  # route_values' own first question, without its guard
                reading.route_values(ctx)
            found = _mypy.alias_reference(self, ctx, fullname)
            if found is None:  # no longer an alias of a carrier (a daemon edit)
                return unhooked(ctx)
            return found

        def unhooked(ctx: Any) -> Any:
            self._types[fullname] = None  # mypy's analysis, now and from now on
            return _mypy.default_type(ctx)

        return guarded(hook, unhooked)

    # -- cache and dependencies ---------------------------------------------------
    def report_config_data(self, ctx: _mypy.ReportConfigContext) -> Any:
        # mypy asks once per module it loads (torch's ~1,700 included), and
        # hashes the answer into the module's interface.  The rules' digest,
        # built once; for a user module, a digest of the Final specs and
        # member aliases it defines (spec_argument.final_specs_digest), so a
        # change of their values re-checks the modules importing them.
        # Installed packages are left out: torch's sources import hundreds
        # of numpy's and filelock's modules, each of which the digest would
        # read and scan in every run (17 ms a run; bench/HISTORY.md, bench_scale,
        # "Re-measured in a new scratch harness").
        data = self._config_data
        user = _user_code(ctx.id + ".") and not installed_package(ctx.path)
        digest = spec_argument.final_specs_digest(ctx.path) if user else None
        if digest is not None:
            data = {**data, "final_specs": digest}
        # A module that defines autograd Functions with typecheck hooks is
        # written with an answer it is never read with, so mypy checks it on
        # every run: the hooks are read from the bodies, which mypy's cache
        # does not keep, and a module applying the Functions elsewhere would
        # else find them unread in a warm run where a cold run types them.
        # So is a module whose alias values the rewrite wrapped, or whose
        # trusted autograd Functions it gave an apply (only a parse that asks
        # get_additional_deps rewrites them: _mypy/alias_values.py,
        # _mypy/trusted_classes.py).
        if not ctx.is_check and ctx.id in self._each_run:
            return {**data, "checked_each_run": True}
        return data

    def get_additional_deps(self, file: Any) -> List[Tuple[int, str, int]]:
        # Files that annotate tensors or call spmd need the carrier's stub loaded.
        # Returns and annotated assignments are routed through hooks (declared.py).
        path = getattr(file, "path", None)
        facts = look(path, file)  # the tree is the owner: the analyzer's look at it needs no stat
        if facts.hooks and path is not None and path.endswith(".py"):  # a stub has no bodies to read
            self._each_run.add(file.fullname)
        else:
            self._each_run.discard(file.fullname)  # a daemon edit removed them
        if facts.uses:
            if facts.comms:
                comm_sites.note_file(path)  # spmd.reveal_comms: the sites are wanted
            wanted = untyped_function if facts.untyped else None
            # the passes the file's bytes can need
            needed = (facts.raw_dist, facts.spmd_types, facts.configured, facts.trusted)
            if guarded(lambda tree: _mypy.route_declared_values(tree, wanted, *needed), nothing)(file):
                self._each_run.add(file.fullname)  # an alias wrapped, a class rewritten: parsed anew each run
            dtensor = facts.raw_dist and _mypy.imports_dtensor(file)  # the imports name torch.distributed
            placed = [(10, _mypy.DTENSOR_MODULE, -1)] if dtensor else []
            return [(10, _mypy.PHANTOM_MODULE, -1), *placed]
        return []


def plugin(version: str) -> type:
    return setup_check.checked(SpmdPlugin)  # a setup it cannot work in: one line saying what to add
