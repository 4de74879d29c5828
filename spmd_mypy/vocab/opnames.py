"""The names the checker meets ops under, beside the rules in opclasses.py.

Pure data: how an operator dunder reads in a message, which function an
operator is propagated as in global code, the attributes that are views, the
raw torch.distributed collectives and their typed counterparts, the spmd ops
that take out_partial_axes, and where torch defines its functions.  A new
op is a row here (and its rule's row in opclasses.py); a new operator is one
row in operators.py.
"""

from __future__ import annotations

from typing import Dict, Final, FrozenSet, Mapping, Tuple

from .operators import functions, symbols

__all__ = [
    "OPERATOR_SYMBOLS",
    "OPERATOR_FUNCTIONS",
    "VIEW_ATTRIBUTES",
    "TRANSPOSED_ATTRIBUTES",
    "PARTIAL_OPS",
    "STAR_PARAMETERS",
    "RAW_COLLECTIVES",
    "RAW_WRITES",
    "FUNCTION_NAMESPACES",
    "display_name",
]

# operator dunder -> how a message writes it (vocab/operators.py's rows)
OPERATOR_SYMBOLS: Final[Mapping[str, str]] = symbols()

# Operators are propagated in global code under the name of their function
# (the dunder's core, without a reflected `r`), so that messages and fixes
# read `matmul`, `add`.
OPERATOR_FUNCTIONS: Final[Mapping[str, str]] = functions()

# Attributes of a tensor that are views of it: they keep its SPMD type.
VIEW_ATTRIBUTES: Final[FrozenSet[str]] = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})

# Tensor methods torch/_tensor.py defines without annotations, so mypy types
# their calls Any (`q, k, v = qkv.split(...)` would leave q, k, v untyped):
# the result's form the rules' type is carried in, "tensor" or "tuple" (of
# tensors, any length).  unique, lu and share_memory_ depend on flags or
# return the receiver; they stay Any.
UNTYPED_TENSOR_METHODS: Final[Mapping[str, str]] = {
    "split": "tuple",
    "unflatten": "tensor",
    "norm": "tensor",
    "stft": "tensor",
    "istft": "tensor",
    "resize": "tensor",
    "resize_as": "tensor",
}

# Attributes that move the dims of a global spec: the op and its arguments.
TRANSPOSED_ATTRIBUTES: Final[Mapping[str, Tuple[str, Mapping[str, object]]]] = {
    "T": ("t", {}),
    "mT": ("transpose", {"dim0": -2, "dim1": -1}),
}

# spmd.<op>(..., out_partial_axes=...) in global code -> its namespace in the op tables
PARTIAL_OPS: Final[Mapping[str, str]] = {
    "matmul": "torch",
    "einsum": "torch",
    "linear": "functional",
    "sum": "torch",
    "mean": "torch",
}

# Parameters written as *args in torch's stubs: one int there is a one-item shape.
STAR_PARAMETERS: Final[FrozenSet[str]] = frozenset({"size", "shape", "dims"})

# torch.distributed.<raw collective> -> the typed spmd collective to use instead
RAW_COLLECTIVES: Final[Mapping[str, str]] = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "all_gather_single": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter",
    "all_to_all": "all_to_all",
    "all_to_all_single": "all_to_all",
    "broadcast": "convert",
}

# What a raw torch.distributed collective writes, for the checker to type the
# tensor it changes in place: name -> (the written tensor's position, the
# read tensor's position, the group's position, the written tensor's type on
# the group's axes).  "R": the same value on every rank (a sum, max, copy or
# gather of the ranks' values); "V": each rank its own piece.  Whatever came
# in, the value is computed outside autograd: it carries no gradient.
RAW_WRITES: Final[Mapping[str, Tuple[int, int, int, str]]] = {
    "all_reduce": (0, 0, 2, "R"),
    "broadcast": (0, 0, 2, "R"),
    "all_gather_into_tensor": (0, 1, 2, "R"),
    "reduce_scatter_tensor": (0, 1, 3, "V"),
    "all_to_all_single": (0, 1, 4, "V"),
}

# Where torch defines the functions the op tables name: fullname prefix ->
# the op-table namespace.
FUNCTION_NAMESPACES: Final[Tuple[Tuple[str, str], ...]] = (
    ("torch._C._VariableFunctions.", "torch"),
    ("torch.functional.", "torch"),
    ("torch._C._nn.", "functional"),
    ("torch.nn.functional.", "functional"),
    ("torch._tensor.", "torch"),
)

# A value declared spmd.Activation (an elementwise nonlinear function of one
# tensor) is the op `activation` of a namespace of its own: no table lists it,
# so it takes the safe default class (nonlinear); the factor table lists it
# pointwise.  Messages call it "the activation".
ACTIVATION: Final = "activation"

_NAMESPACE_PREFIX: Final[Dict[str, str]] = {"torch": "torch.", "functional": "F.", "tensor": "Tensor.", ACTIVATION: "the "}


def display_name(name: str, namespace: str) -> str:
    """How a message names an op: `'+'` for an operator, else `torch.x`, `F.x`, `Tensor.x`."""
    if name in OPERATOR_SYMBOLS:
        return f"'{OPERATOR_SYMBOLS[name]}'"
    return f"{_NAMESPACE_PREFIX[namespace]}{name}"
