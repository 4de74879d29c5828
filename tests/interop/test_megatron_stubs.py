"""The megatron-core stubs (stubs/torch-spmd/megatron-stubs) against the
installed megatron-core (0.16.1, in the test extras): every stubbed function
and method has the runtime's parameter names, kinds and defaults, so a
signature change upstream fails here.  The stubs are read with ast (what they
declare), the runtime with inspect.signature (what megatron-core defines).

A narrower overload (a flag as Literal[True]) may drop a default the flag's
literal type cannot hold; the last overload, the general one, must match in
full.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from spmd_mypy.vocab.megatron import LAYERS, MAPPINGS

pytest.importorskip("megatron.core", reason="megatron-core is in the test extras")

STUBS = Path(__file__).resolve().parents[2] / "stubs" / "torch-spmd" / "megatron-stubs"
NO_DEFAULT = inspect.Parameter.empty

Param = Tuple[str, str, Any]  # name, kind, default (NO_DEFAULT when none)


def _stub_params(fn: ast.FunctionDef) -> List[Param]:
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults: List[Any] = [NO_DEFAULT] * (len(positional) - len(a.defaults)) + [
        ast.literal_eval(d) for d in a.defaults
    ]
    params: List[Param] = []
    for i, arg in enumerate(positional):
        kind = "POSITIONAL_ONLY" if i < len(a.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        params.append((arg.arg, kind, defaults[i]))
    if a.vararg is not None:
        params.append((a.vararg.arg, "VAR_POSITIONAL", NO_DEFAULT))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        params.append((arg.arg, "KEYWORD_ONLY", NO_DEFAULT if d is None else ast.literal_eval(d)))
    if a.kwarg is not None:
        params.append((a.kwarg.arg, "VAR_KEYWORD", NO_DEFAULT))
    return params


def _runtime_params(fn: Any) -> List[Param]:
    return [(p.name, p.kind.name, p.default) for p in inspect.signature(fn).parameters.values()]


def _defs(body: List[ast.stmt]) -> Dict[str, List[ast.FunctionDef]]:
    """name -> its definitions (several for overloads), in order."""
    out: Dict[str, List[ast.FunctionDef]] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef):
            out.setdefault(node.name, []).append(node)
    return out


def _module(path: str) -> ast.Module:
    return ast.parse((STUBS / path).read_text())


def _classes(tree: ast.Module) -> Dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _assert_matches(stubbed: List[ast.FunctionDef], runtime: Any, what: str) -> None:
    want = _runtime_params(runtime)
    *narrow, general = stubbed
    assert _stub_params(general) == want, what
    for overload in narrow:
        got = _stub_params(overload)
        assert [(n, k) for n, k, _ in got] == [(n, k) for n, k, _ in want], what
        for (name, _, default), (_, _, real) in zip(got, want):
            assert default in (NO_DEFAULT, real), f"{what}: {name}"


MAPPING_NAMES = sorted(row.name for row in MAPPINGS)


@pytest.mark.parametrize("name", MAPPING_NAMES)
def test_mapping_signature(name: str) -> None:
    runtime = importlib.import_module("megatron.core.tensor_parallel.mappings")
    _assert_matches(_defs(_module("core/tensor_parallel/mappings.pyi").body)[name], getattr(runtime, name), name)


def test_every_public_mapping_function_is_stubbed() -> None:
    """A function megatron-core adds to mappings.py must get a stub and a table row."""
    runtime = importlib.import_module("megatron.core.tensor_parallel.mappings")
    defined = {
        n
        for n, v in vars(runtime).items()
        if inspect.isfunction(v) and v.__module__ == runtime.__name__ and not n.startswith("_")
    }
    stubbed = set(_defs(_module("core/tensor_parallel/mappings.pyi").body)) - {"__getattr__"}
    assert defined == stubbed == set(MAPPING_NAMES)


@pytest.mark.parametrize("layer", [layer.name for layer in LAYERS])
@pytest.mark.parametrize("method", ["__init__", "forward"])
def test_layer_signature(layer: str, method: str) -> None:
    runtime = getattr(importlib.import_module("megatron.core.tensor_parallel.layers"), layer)
    stubbed = _defs(_classes(_module("core/tensor_parallel/layers.pyi"))[layer].body)
    _assert_matches(stubbed[method], getattr(runtime, method), f"{layer}.{method}")
    # calling the module runs forward: the stub's __call__ takes forward's parameters
    _assert_matches(stubbed["__call__"], runtime.forward, f"{layer}.__call__")


@pytest.mark.parametrize("layer", LAYERS, ids=lambda layer: layer.name)
def test_layer_flags_are_constructor_parameters(layer: Any) -> None:
    """The flags the table keys on: the constructor's, except sequence_parallel
    (megatron-core reads it from config), and the forward override."""
    runtime = getattr(importlib.import_module("megatron.core.tensor_parallel.layers"), layer.name)
    init = inspect.signature(runtime.__init__).parameters
    assert [f for f in layer.flags if f not in init] == (["sequence_parallel"] if len(layer.flags) == 2 else [])
    if layer.call_flag is not None:
        assert layer.call_flag in inspect.signature(runtime.forward).parameters


def test_tp_group_getter_signature() -> None:
    runtime = importlib.import_module("megatron.core.parallel_state")
    stubbed = _defs(_module("core/parallel_state.pyi").body)
    _assert_matches(stubbed["get_tensor_model_parallel_group"], runtime.get_tensor_model_parallel_group, "getter")


@pytest.mark.parametrize(
    "owner, name",
    [
        ("VocabUtility", "vocab_range_from_per_partition_vocab_size"),
        ("VocabUtility", "vocab_range_from_global_vocab_size"),
        (None, "split_tensor_along_last_dim"),
    ],
)
def test_utils_signature(owner: Any, name: str) -> None:
    runtime = importlib.import_module("megatron.core.tensor_parallel.utils")
    tree = _module("core/tensor_parallel/utils.pyi")
    body = _classes(tree)[owner].body if owner else tree.body
    real = getattr(getattr(runtime, owner), name) if owner else getattr(runtime, name)
    _assert_matches(_defs(body)[name], real, name)


def test_package_reexports_what_megatron_does() -> None:
    """megatron.core.tensor_parallel re-exports each stubbed name (the table keys both modules)."""
    package = importlib.import_module("megatron.core.tensor_parallel")
    tree = _module("core/tensor_parallel/__init__.pyi")
    reexported = {a.asname for n in tree.body if isinstance(n, ast.ImportFrom) and n.level == 1 for a in n.names}
    stubbed = set(MAPPING_NAMES) | {layer.name for layer in LAYERS}
    assert reexported == stubbed
    assert all(hasattr(package, name) for name in stubbed)


def test_partial_stub_package() -> None:
    """py.typed says partial: modules not stubbed here resolve from the installed package."""
    assert (STUBS / "py.typed").read_text() == "partial\n"


def test_megatron_imports_on_cpu_without_initialising_anything() -> None:
    code = (
        "import torch, megatron.core.tensor_parallel as tp, megatron.core.parallel_state as ps\n"
        "assert not torch.distributed.is_initialized()\n"
        "assert not torch.cuda.is_initialized()\n"
        "assert not ps.model_parallel_is_initialized()\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


# The config classes: the fields the stubs declare, with their types as the
# dataclass annotates them, except where the stub is narrower on purpose.
CONFIGS = [
    ("core/model_parallel_config.pyi", "megatron.core.model_parallel_config", "ModelParallelConfig"),
    ("core/transformer/transformer_config.pyi", "megatron.core.transformer.transformer_config", "TransformerConfig"),
]
NARROWED = {("TransformerConfig", "activation_func"): ("Callable", "Activation")}


@pytest.mark.parametrize("path, module, name", CONFIGS, ids=[c[2] for c in CONFIGS])
def test_config_fields_are_the_dataclass_fields(path: str, module: str, name: str) -> None:
    import dataclasses

    runtime = getattr(importlib.import_module(module), name)
    fields = {f.name: f for f in dataclasses.fields(runtime)}
    declared = {
        n.target.id: ast.unparse(n.annotation)
        for n in _classes(_module(path))[name].body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    assert declared, name
    for field, stub_type in declared.items():
        assert field in fields, f"{name}.{field} is not a field of the installed dataclass"
        real = fields[field].type
        real_text = real.__name__ if isinstance(real, type) else str(real).replace("typing.", "")
        want = NARROWED.get((name, field), (real_text, real_text))
        assert (real_text, stub_type) == want, f"{name}.{field}"


def test_the_default_activation_is_elementwise() -> None:
    """activation_func is declared spmd.Activation (an elementwise nonlinear
    function): megatron-core's default is F.gelu, and its MLP applies it to
    the column-parallel output."""
    import dataclasses

    import torch.nn.functional as F
    from megatron.core.transformer.transformer_config import TransformerConfig

    default = {f.name: f.default for f in dataclasses.fields(TransformerConfig)}["activation_func"]
    assert default is F.gelu
    mlp = inspect.getsource(importlib.import_module("megatron.core.transformer.mlp"))
    assert "self.activation_func = self.config.activation_func" in mlp
    assert "intermediate_parallel = self.activation_func(intermediate_parallel)" in mlp


def test_the_transformer_package_reexports_its_config() -> None:
    package = importlib.import_module("megatron.core.transformer")
    tree = _module("core/transformer/__init__.pyi")
    reexported = {a.asname for n in tree.body if isinstance(n, ast.ImportFrom) and n.level == 1 for a in n.names}
    assert reexported == {"TransformerConfig"}
    assert all(hasattr(package, name) for name in reexported)
