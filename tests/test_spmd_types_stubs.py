"""The shipped stubs for spmd_types (stubs/torch-spmd/spmd_types-stubs) against
the installed package: every public name, and each function's parameters
(names, kinds, which have defaults), so that an upstream change fails here."""

from __future__ import annotations

import __future__
import ast
import inspect
import types
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

spmd_types = pytest.importorskip("spmd_types")

STUB = Path(__file__).resolve().parents[1] / "stubs" / "torch-spmd" / "spmd_types-stubs" / "__init__.pyi"
Param = Tuple[str, str, bool]  # name, kind, has a default


def _stub_functions(stub: Path = STUB) -> Dict[str, List[List[Param]]]:
    """name -> the parameter lists of its definitions (several for overloads)."""
    out: Dict[str, List[List[Param]]] = {}
    for node in ast.parse(stub.read_text()).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        a = node.args
        params: List[Param] = []
        positional = a.posonlyargs + a.args
        defaults = [False] * (len(positional) - len(a.defaults)) + [True] * len(a.defaults)
        for arg, has in zip(positional, defaults):
            kind = "POSITIONAL_ONLY" if arg in a.posonlyargs else "POSITIONAL_OR_KEYWORD"
            params.append((arg.arg, kind, has))
        if a.vararg is not None:
            params.append((a.vararg.arg, "VAR_POSITIONAL", False))
        for arg, default in zip(a.kwonlyargs, a.kw_defaults):
            params.append((arg.arg, "KEYWORD_ONLY", default is not None))
        if a.kwarg is not None:
            params.append((a.kwarg.arg, "VAR_KEYWORD", False))
        out.setdefault(node.name, []).append(params)
    return out


def _stub_names() -> set:
    names = set()
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and node.module == ".":
            names.update(alias.asname or alias.name for alias in node.names)
    return {n for n in names if not n.startswith("_")}


def _runtime_params(fn: object) -> List[Param]:
    return [
        (p.name, p.kind.name, p.default is not inspect.Parameter.empty)
        for p in inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
    ]


def _opaque(params: List[Param]) -> bool:
    """`(*args, **kwargs)`: a name the plugin never reads, typed loosely on purpose."""
    return [k for _, k, _ in params] == ["VAR_POSITIONAL", "VAR_KEYWORD"]


def test_every_public_name_is_stubbed_and_exists() -> None:
    public = {
        n for n, v in vars(spmd_types).items()
        if not n.startswith("_") and not isinstance(v, (types.ModuleType, __future__._Feature))
    }
    stubbed = _stub_names()
    assert public - stubbed == set(), "names spmd_types exports that the stubs lack"
    assert {n for n in stubbed - public if n not in ("DeviceMeshAxis", "PartitionSpecEntry", "rules")} == set(), (
        "names the stubs give that spmd_types does not export"
    )


@pytest.mark.parametrize("name", sorted(n for n in _stub_functions() if not n.startswith("_spmd_")))
def test_signature_matches_the_installed_package(name: str) -> None:
    """(`_spmd_*`: the plugin's rewrite targets, which exist in the stubs only.)"""
    runtime = _runtime_params(getattr(spmd_types, name))
    stubbed = _stub_functions()[name]
    if len(stubbed) == 1 and _opaque(stubbed[0]):
        return
    if len(stubbed) == 1:
        assert stubbed[0] == runtime
    else:  # overloads: each a narrowing of the implementation's parameters
        names = {p[0] for p in runtime}
        for overload in stubbed:
            assert {p[0] for p in overload} <= names | {"out_types", "in_types"}


def test_class_constructors_match() -> None:
    for cls in ("Shard", "SpmdType", "Scalar"):
        stub_init = next(
            f for node in ast.parse(STUB.read_text()).body
            if isinstance(node, ast.ClassDef) and node.name == cls
            for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"
        )
        want = [p.name for p in inspect.signature(getattr(spmd_types, cls)).parameters.values()]
        assert [a.arg for a in stub_init.args.args[1:]] + [a.arg for a in stub_init.args.kwonlyargs] == want


# The package's public submodules: each has a stub module, so that no value
# of the installed package's own classes reaches the user's code (torchtitan
# imports get_partition_spec from spmd_types.runtime: its PartitionSpec must
# be the stub's).  rulecheck is a test helper run beside a model, not imported
# by model code; mypy reads it from the installed package.
SUBMODULES = ("checker", "rules", "runtime", "types")
UNSTUBBED = {"rulecheck"}


def _source_names(path: Path) -> set:
    """A module's own top-level names and those it imports from spmd_types
    (not typing's or torch's), public ones only."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("spmd_types")):
            names.update(alias.asname or alias.name for alias in node.names)
    return {n for n in names if not n.startswith("_")}


def test_every_public_submodule_has_a_stub() -> None:
    installed = Path(spmd_types.__file__).parent
    public = {p.stem for p in installed.glob("*.py") if not p.stem.startswith("_")}
    public |= {p.name for p in installed.iterdir() if p.is_dir() and (p / "__init__.py").exists() and not p.name.startswith("_")}
    assert public - UNSTUBBED == set(SUBMODULES)
    missing = [m for m in SUBMODULES if not (STUB.parent / f"{m}.pyi").is_file()]
    assert missing == [], "public submodules without a stub module"


@pytest.mark.parametrize("module", ["runtime", "types"])
def test_submodule_stub_has_the_installed_names(module: str) -> None:
    import importlib

    installed = importlib.import_module(f"spmd_types.{module}")
    want = _source_names(Path(installed.__file__))
    got = _source_names(STUB.parent / f"{module}.pyi")
    assert want - got == set(), f"names spmd_types.{module} has that its stub lacks"
    assert {n for n in got - want if not hasattr(installed, n)} == set(), (
        f"names the stub of spmd_types.{module} gives that the installed module lacks"
    )


@pytest.mark.parametrize("module", ["runtime", "types"])
def test_submodule_stub_signatures_match(module: str) -> None:
    import importlib

    installed = importlib.import_module(f"spmd_types.{module}")
    declared = _stub_functions(STUB.parent / f"{module}.pyi")
    assert declared, "the module declares helpers of its own"
    for name, (params,) in declared.items():
        assert params == _runtime_params(getattr(installed, name)), name
