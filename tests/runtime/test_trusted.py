"""spmd.trusted at runtime: the call goes straight to fn; the declaration is validated."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import spmd_mypy as spmd
from spmd_mypy import I, R, Spmd


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 2


def test_call_form_runs_fn_forward_and_backward() -> None:
    double = spmd.trusted(_Double.apply, in_types=(Spmd(tp=I),), out_types=Spmd(tp=R))
    x = torch.tensor([1.0, -3.0], requires_grad=True)
    y = double(x)
    y.sum().backward()
    assert y.tolist() == [2.0, -6.0]
    assert x.grad is not None and x.grad.tolist() == [2.0, 2.0]
    assert double.__spmd_trusted_types__ == ((Spmd(tp=I),), Spmd(tp=R))


def test_decorator_form_keeps_a_class_and_wraps_a_function() -> None:
    Marked = spmd.trusted(in_types=(Spmd(tp=I),), out_types=Spmd(tp=R))(_Double)
    assert Marked is _Double and Marked.__spmd_trusted_types__[1] == Spmd(tp=R)

    @spmd.trusted(in_types=(Spmd(tp=I),), out_types=Spmd(tp=I))
    def plus_one(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    assert plus_one.__name__ == "plus_one"
    assert plus_one(torch.tensor([1.0])).tolist() == [2.0]


def test_declaration_must_hold_spmd_types() -> None:
    with pytest.raises(TypeError, match="in_types takes Spmd"):
        spmd.trusted(_Double.apply, in_types=("tp=I",), out_types=Spmd(tp=R))  # type: ignore[arg-type]
