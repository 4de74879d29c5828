"""spmd.Activation: the type of a value that holds an elementwise activation.

    class MLP(nn.Module):
        def __init__(self, config: Config) -> None:
            super().__init__()
            self.activation_func: spmd.Activation = config.activation_func

        def forward(self, h: Annotated[Tensor, Spmd(tp=V)]) -> ...:
            return self.activation_func(h)   # typed as F.gelu(h) would be

A module that stores its activation (Megatron's `config.activation_func`,
HF-style `ACT2FN[name]`, nanotron's `self.act`) calls a value whose type
is `Callable`: the checker cannot see which function it holds, and the call
of a P value with it, the classic missing all-reduce before the
nonlinearity, would pass unchecked.  Declared `spmd.Activation`, the value
is an elementwise nonlinear function of one tensor (gelu, silu, relu, ...),
and the checker types its calls by that rule: a P operand is an error, and
the result has the operand's type on every other axis.  Any function of one
tensor fits the protocol; the declaration is the user's claim that it is
elementwise (a reduction or a collective is not an activation).  The
megatron-core stubs declare TransformerConfig.activation_func so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["Activation"]


class Activation(Protocol):
    """An elementwise nonlinear function of one tensor (see the module docstring)."""

    def __call__(self, input: Tensor, /) -> Tensor: ...
