"""The table of torch.special / torch.linalg / torch.fft functions (opclasses),
checked against torch itself: the names it lists, the classes it gives, and the
named tuples of the stub (spmd_phantom.linalg_*)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Callable, Dict, List

import pytest
import torch
import torch.fft
import torch.linalg
import torch.special

from spmd_mypy.coverage import _public_callables
from spmd_mypy.vocab.opclasses import (
    LINEAR,
    MULTILINEAR,
    NONLINEAR,
    UNTYPED_FUNCTIONS,
    UNTYPED_TUPLE_FLAGS,
    WITHOUT_OPERANDS,
    op_class,
    untyped_function,
)

STUB = Path(__file__).resolve().parents[2] / "stubs" / "torch-spmd" / "spmd_phantom" / "__init__.pyi"
MODULES = {"special": torch.special, "linalg": torch.linalg, "fft": torch.fft}


def _public_functions() -> set:
    return {f"{short}.{name}" for short, module in MODULES.items() for name in _public_callables(module)}


def test_the_table_lists_every_public_function_of_the_three_modules() -> None:
    assert {k for k in UNTYPED_FUNCTIONS if "." in k} == _public_functions()


def test_unique_is_keyed_by_its_name_and_its_tuple_flags_are_torchs() -> None:
    assert {k for k in UNTYPED_FUNCTIONS if "." not in k} == {"unique", "unique_consecutive"}
    assert untyped_function("torch.unique") == "unique"
    assert untyped_function("torch.functional.unique") == "unique"  # the definition's name
    for name, flags in UNTYPED_TUPLE_FLAGS.items():
        params = inspect.signature(getattr(torch.functional, f"_{name}_impl")).parameters
        assert set(flags) <= set(params), name
        x = torch.tensor([3, 1, 3])
        assert isinstance(getattr(torch, name)(x), torch.Tensor)
        for flag in flags:
            assert isinstance(getattr(torch, name)(x, **{flag: True}), tuple), (name, flag)


def test_names_map_to_keys_only_for_listed_functions() -> None:
    assert untyped_function("torch.special.expit") == "special.expit"
    assert untyped_function("torch.linalg.LinAlgError") is None
    assert untyped_function("torch.sigmoid") is None
    assert untyped_function("mytorch.special.expit") is None


def _args(name: str, n: int, gen: torch.Generator) -> List[torch.Tensor]:
    shape = (3, 3) if name.startswith("linalg.") else (4, 6)
    return [torch.randn(*shape, dtype=torch.float64, generator=gen) for _ in range(n)]


def _call(name: str) -> Callable[..., torch.Tensor]:
    module, fn = name.split(".")
    f = getattr(MODULES[module], fn)
    if name == "linalg.multi_dot":
        return lambda *xs: f(list(xs))
    return f


def _as_real(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


@pytest.mark.parametrize("name", sorted(n for n in UNTYPED_FUNCTIONS if op_class(n) == LINEAR))
def test_linear_rows_are_additive(name: str) -> None:
    # linear: f(a + b) = f(a) + f(b), which is what lets a Partial pass through
    gen = torch.Generator().manual_seed(0)
    a, b = _args(name, 2, gen)
    f = _call(name)
    torch.testing.assert_close(_as_real(f(a + b)), _as_real(f(a) + f(b)))


@pytest.mark.parametrize(
    "name, arity", [(n, 3 if n == "linalg.multi_dot" else 2)
                    for n in sorted(UNTYPED_FUNCTIONS) if op_class(n) == MULTILINEAR]
)
def test_multilinear_rows_are_additive_in_each_operand(name: str, arity: int) -> None:
    gen = torch.Generator().manual_seed(1)
    f = _call(name)
    for k in range(arity):
        xs = _args(name, arity, gen)
        extra = _args(name, 1, gen)[0]
        summed = list(xs)
        summed[k] = xs[k] + extra
        other = list(xs)
        other[k] = extra
        torch.testing.assert_close(f(*summed), f(*xs) + f(*other))


@pytest.mark.parametrize("name", ["special.expit", "special.erf", "linalg.vector_norm", "linalg.inv"])
def test_nonlinear_rows_are_not_additive(name: str) -> None:
    # the default class really is needed: these are not additive
    gen = torch.Generator().manual_seed(2)
    a, b = _args(name, 2, gen)
    f = _call(name)
    assert op_class(name) == NONLINEAR
    assert not torch.allclose(f(a + b), f(a) + f(b))


def test_frequency_grids_are_replicated_factories() -> None:
    for name in ("fft.fftfreq", "fft.rfftfreq"):
        assert name in WITHOUT_OPERANDS
        assert torch.equal(_call(name)(8), _call(name)(8))  # no randomness: R


def _stub_named_tuples() -> Dict[str, List[str]]:
    tree = ast.parse(STUB.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.startswith("linalg_"):
            out[node.name] = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign)]
    return out


def test_stub_named_tuples_match_torchs_results() -> None:
    stub = _stub_named_tuples()
    a = torch.randn(3, 3, dtype=torch.float64)
    spd = a @ a.T + 3 * torch.eye(3, dtype=torch.float64)
    found = {}
    for key in sorted(UNTYPED_FUNCTIONS):
        module, _, fn = key.rpartition(".")
        if module != "linalg":
            continue
        f = getattr(torch.linalg, fn)
        try:
            result = f(spd, spd) if fn in ("lstsq", "solve_ex", "solve", "cross", "matmul", "vecdot", "ldl_solve",
                                           "lu_solve", "solve_triangular", "tensorsolve") else f(spd)
        except Exception:
            continue
        if isinstance(result, tuple):
            fields = stub.get(f"linalg_{fn}")
            assert fields is not None, f"torch.linalg.{fn} returns a named tuple the stub lacks"
            assert len(fields) == len(result)
            for i, field in enumerate(fields):
                assert getattr(result, field) is result[i], (fn, field)
            found[f"linalg_{fn}"] = fields
    assert set(found) <= set(stub)
    assert len(found) >= 12  # every tuple-returning function that runs on one matrix
