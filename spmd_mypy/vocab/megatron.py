"""megatron-core's tensor-parallel mapping functions as typed collectives, as data.

Each function in `megatron.core.tensor_parallel.mappings` (0.16.1) wraps an
autograd Function whose forward and backward are one collective pair; each
row below names the typed collective (op, src, dst) with the same forward
and the same backward (the design's backward of that collective).  The rows
follow what the Functions' code does, not their docstrings: for example
scatter_to_tensor_model_parallel_region splits the last dim (its docstring
says reduce-scatter), so it is convert(I -> S(-1)).

`group=None` (or no group argument) means megatron's tensor-parallel group:
the axis the plugin is configured with (`megatron_axis`, default "tp").  A
row's variants give the collective a literal flag argument selects (for
example `tensor_parallel_output_grad=False` makes the gather's backward a
split instead of a reduce-scatter).

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import Dict, Final, NamedTuple, Optional, Tuple

from .localtype import AxisType, I, P, R, S, V

__all__ = [
    "Collective",
    "Mapping",
    "GIVEN",
    "MAPPINGS",
    "MODULES",
    "DEFAULT_AXIS",
    "TP_GROUP_GETTERS",
    "by_fullname",
    "collective_for",
    "Layer",
    "LAYERS",
    "LAYER_MODULES",
    "layer_rows",
]

DEFAULT_AXIS: Final = "tp"

# Where megatron-core defines the functions, and the package that re-exports them.
MODULES: Final = ("megatron.core.tensor_parallel.mappings", "megatron.core.tensor_parallel")

# Functions that return megatron's tensor-parallel group: a group argument
# written as a call of one of these names the configured axis.
TP_GROUP_GETTERS: Final = frozenset({"megatron.core.parallel_state.get_tensor_model_parallel_group"})


class Collective(NamedTuple):
    """A typed collective: the vocabulary's op name and its src/dst types."""

    op: str
    src: AxisType
    dst: AxisType

    def __str__(self) -> str:
        return f"{self.op}({self.src} -> {self.dst})"


# A variant's condition value meaning "the argument is given and is not None".
GIVEN: Final = "<given>"

Condition = Tuple[str, object]  # (parameter, literal value or GIVEN)


class Mapping(NamedTuple):
    """One mapping function: where its tensor and group are, and what it is."""

    name: str
    tensor: str  # the parameter that holds the tensor
    group: str  # the parameter that holds the process group
    typed: Collective  # with the flags at their defaults
    variants: Tuple[Tuple[Condition, Collective], ...] = ()
    group_required: bool = False  # no default: the call always names a group


def _m(name: str, typed: Collective, *variants: Tuple[Condition, Collective], tensor: str = "input_") -> Mapping:
    return Mapping(name, tensor, "group", typed, tuple(variants))


# Forward / backward of each autograd Function, as megatron-core 0.16.1's code runs them:
MAPPINGS: Final[Tuple[Mapping, ...]] = (
    # identity / all-reduce of the gradient
    _m("copy_to_tensor_model_parallel_region", Collective("convert", I, R)),
    # all-reduce / identity
    _m("reduce_from_tensor_model_parallel_region", Collective("all_reduce", P, I)),
    # split the last dim / all-gather the last dim
    _m("scatter_to_tensor_model_parallel_region", Collective("convert", I, S(-1))),
    # all-gather the last dim / split the last dim
    _m("gather_from_tensor_model_parallel_region", Collective("all_gather", S(-1), I)),
    # split dim 0 / all-gather dim 0
    _m("scatter_to_sequence_parallel_region", Collective("convert", I, S(0))),
    # all-gather dim 0 / reduce-scatter dim 0; with tensor_parallel_output_grad=False
    # the backward splits dim 0 instead; with output_split_sizes the gather is ragged
    _m(
        "gather_from_sequence_parallel_region",
        Collective("all_gather", S(0), R),
        (("tensor_parallel_output_grad", False), Collective("all_gather", S(0), I)),
        (("output_split_sizes", GIVEN), Collective("all_gather", V, R)),
    ),
    # reduce-scatter dim 0 / all-gather dim 0 (ragged with input_split_sizes)
    _m(
        "reduce_scatter_to_sequence_parallel_region",
        Collective("reduce_scatter", P, S(0)),
        (("input_split_sizes", GIVEN), Collective("reduce_scatter", P, V)),
    ),
    # all-gather the last dim / reduce-scatter the last dim
    _m("all_gather_last_dim_from_tensor_parallel_region", Collective("all_gather", S(-1), R)),
    # reduce-scatter the last dim / all-gather the last dim
    _m("reduce_scatter_last_dim_to_tensor_parallel_region", Collective("reduce_scatter", P, S(-1))),
    # all-to-all / all-to-all with the split sizes swapped; the group comes first
    # and has no default
    Mapping("all_to_all", "input_", "group", Collective("all_to_all", V, V), (), group_required=True),
    # [tokens/tp, h] -> [tokens, h/tp] by one all-to-all / the inverse all-to-all
    _m("all_to_all_sp2hp", Collective("all_to_all", S(0), S(-1))),
    # [tokens, h/tp] -> [tokens/tp, h] / the inverse
    _m("all_to_all_hp2sp", Collective("all_to_all", S(-1), S(0))),
)


def _index() -> Dict[str, Mapping]:
    return {f"{module}.{m.name}": m for module in MODULES for m in MAPPINGS}


_BY_FULLNAME: Final = _index()


def by_fullname() -> Dict[str, Mapping]:
    """fullname (as mypy names the callee, in either module) -> its row."""
    return dict(_BY_FULLNAME)


def collective_for(mapping: Mapping, flags: Dict[str, object]) -> Optional[Collective]:
    """The collective a call with these literal flag arguments runs.

    `flags` maps a flag parameter to its literal value (GIVEN for an argument
    that is not None, None for an explicit None); a flag missing from `flags`
    is at its default.  None when two variants apply at once (no row says
    what that call is)."""
    chosen = [c for (param, value), c in mapping.variants if param in flags and flags[param] == value]
    if len(chosen) > 1:
        return None
    return chosen[0] if chosen else mapping.typed


# -- the parallel layers ---------------------------------------------------------

LAYER_MODULES: Final = ("megatron.core.tensor_parallel.layers", "megatron.core.tensor_parallel")

Flags = Tuple[bool, ...]  # the layer's flags, in the order of Layer.flags


class Layer(NamedTuple):
    """A parallel layer's call on the tensor-parallel axis, per flag setting:
    the input types it takes and the output type it gives (None: the setting
    is rejected by megatron-core's constructor)."""

    name: str
    flags: Tuple[str, ...]  # the class's type parameters, in order
    rows: Dict[Flags, Optional[Tuple[Tuple[AxisType, ...], AxisType]]]
    call_flag: Optional[str] = None  # a forward argument that overrides flags[0]


LAYERS: Final[Tuple[Layer, ...]] = (
    # copy_to (I -> R) or, under sequence parallelism, an all-gather of dim 0
    # inside the matmul (backward reduce-scatter); the weight's rows are split,
    # so the output is S(-1); gather_output all-gathers it (backward split).
    Layer(
        "ColumnParallelLinear",
        ("gather_output", "sequence_parallel"),
        {
            (False, False): ((I,), S(-1)),
            (True, False): ((I,), I),
            (False, True): ((S(0),), S(-1)),
            (True, True): ((S(0),), I),
        },
        call_flag="runtime_gather_output",
    ),
    # input_is_parallel=False scatters an I input (I -> S(-1)); the matmul on
    # the split input is a partial sum, reduced by reduce_from (P -> I) or,
    # under sequence parallelism, reduce_scatter_to_sequence (P -> S(0)).
    Layer(
        "RowParallelLinear",
        ("input_is_parallel", "sequence_parallel"),
        {
            (True, False): ((S(-1), V), I),
            (True, True): ((S(-1), V), S(0)),
            (False, False): ((I,), I),
            (False, True): None,  # megatron raises: sequence_parallel needs input_is_parallel
        },
    ),
    # a masked lookup of replicated token ids, then reduce_from (P -> I) or
    # reduce_scatter_to_sequence (P -> S(0)); ids carry no gradient (R or I).
    Layer(
        "VocabParallelEmbedding",
        ("reduce_scatter_embeddings",),
        {(False,): ((R, I), I), (True,): ((R, I), S(0))},
    ),
)


def layer_rows(layer: Layer, known: Tuple[Optional[bool], ...]) -> Tuple[Tuple[Tuple[AxisType, ...], AxisType], ...]:
    """The rows a layer's call may run: every valid setting that agrees with
    the flags known statically (None: a flag that is not a literal)."""
    return tuple(
        row
        for flags, row in layer.rows.items()
        if row is not None and all(k is None or k == f for k, f in zip(known, flags))
    )
