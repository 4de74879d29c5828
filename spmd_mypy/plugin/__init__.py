"""The mypy plugin: `plugins = spmd_mypy.plugin` in the mypy configuration.

Hooks, each a dictionary lookup by fullname (mypy asks hundreds of thousands
of times per run):

  Tensor in a type        reading.analyze_tensor  (Annotated[Tensor, Spmd(...)])
  torch functions, F.*    ops.op_hook             (table-driven per-axis rules)
  methods of a carrier    ops.op_hook             (operators, in-place, backward)
  spmd.* collectives      comms.HOOKS             (src/dst from vocab.collectives)
  Module.__call__         relation.module_call_hook (routed to forward)
  Function.apply          relation.function_apply_hook (routed to forward)
  user function calls     relation.signature_hook (arguments checked per axis)
  carrier attributes      ops.attribute_hook      (.T keeps the type, .grad is its gradient)

Modules: _mypy (every mypy import), annotations (the per-file index, pure
Python), reading, carrier, ops, comms, relation, errors, config.  The plugin
never imports torch.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _mypy, comms, config, ops, reading, relation
from .guard import guarded, nothing
from .annotations import mentions_spmd

_VOCAB = Path(__file__).resolve().parent.parent / "vocab"


def _rules_version() -> str:
    """A digest of the rule tables, so that mypy's cache goes stale when they change."""
    h = hashlib.sha256()
    for path in sorted(_VOCAB.glob("*.py")) + sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


# fullname prefix -> op-table namespace
_FUNCTION_PREFIXES: Tuple[Tuple[str, str], ...] = (
    ("torch._C._VariableFunctions.", "torch"),
    ("torch.functional.", "torch"),
    ("torch._C._nn.", "functional"),
    ("torch.nn.functional.", "functional"),
    ("torch._tensor.", "torch"),
)
_CARRIER_PREFIX = _mypy.CARRIER + "."
_TENSOR_BASE_PREFIX = "torch._C.TensorBase."
_DISTRIBUTED_PREFIX = "torch.distributed.distributed_c10d."
_PLAIN_TENSOR_PREFIX = _mypy.TENSOR + "."  # or an unknown result (SpmdTensor[Any])
# Callees whose signatures never hold an SPMD annotation: no signature hook.
_LIBRARY_PREFIXES = ("builtins.", "typing.", "torch.", "spmd_phantom.", "spmd_mypy.", "collections.", "functools.")

Hook = Callable[[Any], Any]


class SpmdPlugin(_mypy.Plugin):
    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.settings = config.load(getattr(options, "config_file", None))
        self._version = _rules_version()
        self._functions: Dict[str, Optional[Hook]] = dict(comms.HOOKS)
        self._methods: Dict[str, Optional[Hook]] = {}
        self._signatures: Dict[str, Optional[Hook]] = {}
        self._attributes: Dict[str, Optional[Hook]] = {}

    # -- types in annotations ---------------------------------------------------
    def get_type_analyze_hook(self, fullname: str) -> Optional[Hook]:
        if fullname == _mypy.TENSOR:
            settings = self.settings
            return guarded(
                lambda ctx: reading.analyze_tensor(ctx, settings), _mypy.plain_tensor_in_analyzer
            )
        return None

    # -- calls -----------------------------------------------------------------------
    def get_function_hook(self, fullname: str) -> Optional[Hook]:
        try:
            return self._functions[fullname]
        except KeyError:
            pass
        hook = None
        for prefix, namespace in _FUNCTION_PREFIXES:
            if fullname.startswith(prefix):
                name = fullname[len(prefix):]
                if "." not in name:
                    hook = ops.op_hook(name, namespace, receiver=False)
                break
        else:
            if fullname.startswith(_DISTRIBUTED_PREFIX):
                hook = comms.raw_collective_hook(fullname[len(_DISTRIBUTED_PREFIX):])
        self._functions[fullname] = hook
        return hook

    def get_method_hook(self, fullname: str) -> Optional[Hook]:
        try:
            return self._methods[fullname]
        except KeyError:
            pass
        hook: Optional[Hook] = None
        if fullname.startswith(_CARRIER_PREFIX):
            hook = ops.op_hook(fullname[len(_CARRIER_PREFIX):], "tensor", receiver=True)
        elif fullname.startswith(_PLAIN_TENSOR_PREFIX):  # plain receiver: a typed argument,
            hook = ops.op_hook(fullname[len(_PLAIN_TENSOR_PREFIX):], "tensor", receiver=True)
        elif fullname.endswith(".__call__") and not fullname.startswith(("builtins.", "typing.")):
            hook = relation.module_call_hook
        elif fullname.endswith(".apply") and not fullname.startswith(_LIBRARY_PREFIXES):
            hook = relation.function_apply_hook
        self._methods[fullname] = hook
        return hook

    def get_function_signature_hook(self, fullname: str) -> Optional[Hook]:
        return self._signature(fullname)

    def get_method_signature_hook(self, fullname: str) -> Optional[Hook]:
        return self._signature(fullname)

    def _signature(self, fullname: str) -> Optional[Hook]:
        try:
            return self._signatures[fullname]
        except KeyError:
            pass
        hook: Optional[Hook] = None
        if fullname.startswith(tuple(p for p, _ in _FUNCTION_PREFIXES)):
            hook = relation.torch_signature_hook
        elif not fullname.startswith(_LIBRARY_PREFIXES):
            hook = relation.signature_hook(fullname.rsplit(".", 1)[-1])
        self._signatures[fullname] = hook
        return hook

    def get_attribute_hook(self, fullname: str) -> Optional[Hook]:
        try:
            return self._attributes[fullname]
        except KeyError:
            pass
        hook = None
        for prefix in (_CARRIER_PREFIX, _TENSOR_BASE_PREFIX):
            if fullname.startswith(prefix):  # keyed by the defining class
                hook = ops.attribute_hook(fullname[len(prefix):])
        self._attributes[fullname] = hook
        return hook

    def get_base_class_hook(self, fullname: str) -> Optional[Hook]:
        if fullname == "torch.nn.modules.module.Module":
            return guarded(_mypy.make_class_attributes_descriptors, nothing)
        return None

    # -- cache and dependencies ---------------------------------------------------
    def report_config_data(self, ctx: _mypy.ReportConfigContext) -> Any:
        return {"rules": self._version, **self.settings.as_data()}

    def get_additional_deps(self, file: Any) -> List[Tuple[int, str, int]]:
        # Files that annotate tensors or call spmd need the carrier's stub loaded.
        if mentions_spmd(getattr(file, "path", None)):
            return [(10, "spmd_phantom", -1)]
        return []


def plugin(version: str) -> type:
    return SpmdPlugin
