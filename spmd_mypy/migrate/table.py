"""The helpers the codemod recognises, per codebase style, and the typed call each one equals.

Data only.  A helper is found by its qualified name (the module it is
imported from, then its name; `.apply` for an autograd Function), so a
module re-exporting the helpers is listed beside the module defining them.

Each helper's `params` is its signature as written upstream
("name" or "name=default", in order).  Roles of parameters:
- `tensor`: the tensor argument (becomes the typed call's first argument);
- `group`: the process group; absent or `None` -> the axis name given to the
  codemod (`--axis`, default "tp"), any other expression -> passed unchanged
  as the axis argument (the runtime accepts a ProcessGroup);
- `optional_group`: the helper takes a group that may be None at run time
  for the axis's default group (Megatron-core's
  `get_tensor_model_parallel_group_if_none`): a group written as a name or an
  attribute becomes `g if g is not None else "<axis>"` (a call is passed
  unchanged: it is evaluated once, and getters return a group);
- `choices`: a literal flag that selects src/dst (e.g. Megatron's
  tensor_parallel_output_grad); a non-literal value is reported, not guessed;
- `dims`: an int literal substituted into src/dst (`S({seq_dim})`);
- `sizes`: split sizes passed on as `split_sizes=` (None is dropped);
- `drop`: a parameter that may be dropped when given its literal default
  (e.g. use_global_buffer=False); any other value is reported.
`unconverted` lists names of those modules that have no typed equivalent,
with the reason the report gives.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict, Mapping, Optional, Tuple


@dataclass(frozen=True)
class Helper:
    op: str  # the spmd_mypy function
    src: str  # "I", "P", "S(-1)", "S({seq_dim})" (a template over `dims`)
    dst: str
    params: Tuple[str, ...]
    tensor: str = "input_"
    group: Optional[str] = "group"  # None: the helper always works on the axis of --axis
    optional_group: bool = False  # a None group is the axis's own (see the module's docstring)
    choices: Mapping[str, Mapping[str, Mapping[str, str]]] = field(default_factory=dict)
    dims: Tuple[str, ...] = ()
    sizes: Optional[str] = None
    drop: Tuple[str, ...] = ()

    def defaults(self) -> Dict[str, str]:
        """Parameter name -> its default's source text (parameters with one)."""
        return {p.split("=", 1)[0]: p.split("=", 1)[1] for p in self.params if "=" in p}

    def names(self) -> Tuple[str, ...]:
        return tuple(p.split("=", 1)[0] for p in self.params)


@dataclass(frozen=True)
class Style:
    name: str
    modules: Tuple[str, ...]
    helpers: Mapping[str, Helper]
    unconverted: Mapping[str, str] = field(default_factory=dict)


_GROUP = ("input_", "group=None")


def _optional_groups(helpers: Mapping[str, Helper]) -> Dict[str, Helper]:
    return {name: replace(helper, optional_group=True) for name, helper in helpers.items()}


MEGATRON_CORE = Style(
    "megatron-core",
    (
        "megatron.core.tensor_parallel.mappings",
        "megatron.core.tensor_parallel",
    ),
    _optional_groups({
        "copy_to_tensor_model_parallel_region": Helper("convert", "I", "R", _GROUP),
        "reduce_from_tensor_model_parallel_region": Helper("all_reduce", "P", "I", _GROUP),
        "scatter_to_tensor_model_parallel_region": Helper("convert", "I", "S(-1)", _GROUP),
        "gather_from_tensor_model_parallel_region": Helper("all_gather", "S(-1)", "I", _GROUP),
        "scatter_to_sequence_parallel_region": Helper("convert", "I", "S(0)", _GROUP),
        "gather_from_sequence_parallel_region": Helper(
            "all_gather",
            "S(0)",
            "R",
            (
                "input_",
                "tensor_parallel_output_grad=True",
                "group=None",
                "output_split_sizes=None",
                "use_global_buffer=False",
            ),
            choices={"tensor_parallel_output_grad": {"True": {}, "False": {"dst": "I"}}},
            sizes="output_split_sizes",
            drop=("use_global_buffer",),
        ),
        "reduce_scatter_to_sequence_parallel_region": Helper(
            "reduce_scatter",
            "P",
            "S(0)",
            ("input_", "group=None", "input_split_sizes=None", "use_global_buffer=False"),
            sizes="input_split_sizes",
            drop=("use_global_buffer",),
        ),
        "all_gather_last_dim_from_tensor_parallel_region": Helper("all_gather", "S(-1)", "R", _GROUP),
        "reduce_scatter_last_dim_to_tensor_parallel_region": Helper("reduce_scatter", "P", "S(-1)", _GROUP),
    }),
    {
        "all_to_all": "ragged all_to_all: write spmd.all_to_all(x, axis, src=V, dst=V, split_sizes=(in, out))",
        "all_to_all_sp2hp": "a reshape around an all_to_all: write the typed all_to_all by hand",
        "all_to_all_hp2sp": "a reshape around an all_to_all: write the typed all_to_all by hand",
    },
)

# Megatron v1's four helpers (gpt-neox's megatron.mpu, fairscale's
# model_parallel): no group argument (the model-parallel group); the split
# and the gather work on the last dim.
_MEGATRON_V1 = {
    "copy_to_model_parallel_region": Helper("convert", "I", "R", ("input_",), group=None),
    "reduce_from_model_parallel_region": Helper("all_reduce", "P", "I", ("input_",), group=None),
    "scatter_to_model_parallel_region": Helper("convert", "I", "S(-1)", ("input_",), group=None),
    "gather_from_model_parallel_region": Helper("all_gather", "S(-1)", "I", ("input_",), group=None),
}

# gpt-neox's `megatron.mpu`: the four, and sequence-parallel helpers that
# take the sequence dim.
GPT_NEOX = Style(
    "gpt-neox",
    ("megatron.mpu.mappings", "megatron.mpu"),
    {
        **_MEGATRON_V1,
        "reduce_scatter_to_sequence_parallel_region": Helper(
            "reduce_scatter", "P", "S({seq_dim})", ("input_", "seq_dim=0"), group=None, dims=("seq_dim",)
        ),
        "gather_from_sequence_parallel_region": Helper(
            "all_gather", "S({seq_dim})", "R", ("input_", "seq_dim=0"), group=None, dims=("seq_dim",)
        ),
        "scatter_to_sequence_parallel_region": Helper(
            "convert", "I", "S({seq_dim})", ("input_", "seq_dim=1"), group=None, dims=("seq_dim",)
        ),
    },
    {
        "copy_to_expert_model_parallel_region": "routes tokens per expert: no single typed call",
        "gather_from_expert_model_parallel_region": "routes tokens per expert: no single typed call",
    },
)

# fairscale's model_parallel (the LLaMA reference code's TP): the four alone.
FAIRSCALE = Style("fairscale", ("fairscale.nn.model_parallel.mappings", "fairscale.nn.model_parallel"), _MEGATRON_V1)

# nanotron: wrapper functions and the autograd Functions they call (.apply
# takes the group positionally); gathers and scatters work on dim 0.
_NT = ("tensor", "group=None")
_NT_APPLY = ("tensor", "group")
NANOTRON = Style(
    "nanotron",
    ("nanotron.parallel.tensor_parallel.distributed_differentiable_primitives",),
    {
        "differentiable_identity": Helper("convert", "I", "R", _NT, tensor="tensor"),
        "differentiable_all_reduce_sum": Helper("all_reduce", "P", "I", _NT, tensor="tensor"),
        "differentiable_all_gather": Helper("all_gather", "S(0)", "R", _NT, tensor="tensor"),
        "differentiable_reduce_scatter_sum": Helper("reduce_scatter", "P", "S(0)", _NT, tensor="tensor"),
        "DifferentiableIdentity.apply": Helper("convert", "I", "R", _NT_APPLY, tensor="tensor"),
        "DifferentiableAllReduceSum.apply": Helper("all_reduce", "P", "I", _NT_APPLY, tensor="tensor"),
        "DifferentiableAllGather.apply": Helper("all_gather", "S(0)", "R", _NT_APPLY, tensor="tensor"),
        "DifferentiableReduceScatterSum.apply": Helper("reduce_scatter", "P", "S(0)", _NT_APPLY, tensor="tensor"),
    },
    {
        "all_to_all": "ragged all_to_all: write spmd.all_to_all(x, axis, src=V, dst=V, split_sizes=(in, out))",
        "DifferentiableAllToAll.apply": "ragged all_to_all: write spmd.all_to_all(x, axis, src=V, dst=V, split_sizes=(in, out))",
    },
)

# picotron: autograd Functions on the global manager's tp group, called with .apply(x).
PICOTRON = Style(
    "picotron",
    ("picotron.tensor_parallel.tp_communications",),
    {
        "CopyToModelParallelRegion.apply": Helper("convert", "I", "R", ("x",), tensor="x", group=None),
        "ReduceFromModelParallelRegion.apply": Helper("all_reduce", "P", "I", ("x",), tensor="x", group=None),
        "GatherFromModelParallelRegion.apply": Helper("all_gather", "S(-1)", "I", ("x",), tensor="x", group=None),
    },
    {
        "LinearWithAsyncAllReduce.apply": "a fused linear with its own backward all-reduce: "
        "write convert(x, axis, src=I, dst=R) before an F.linear",
        "linear_with_async_all_reduce": "a fused linear with its own backward all-reduce: "
        "write convert(x, axis, src=I, dst=R) before an F.linear",
        "linear_with_all_reduce": "a linear whose input enters the region (identity forward, all-reduce "
        "backward): write F.linear(spmd.convert(x, axis, src=I, dst=R), weight, bias)",
    },
)

STYLES: Tuple[Style, ...] = (MEGATRON_CORE, GPT_NEOX, FAIRSCALE, NANOTRON, PICOTRON)


def by_qualified_name() -> Dict[str, Tuple[Style, Helper]]:
    """"module.name" (or "module.Class.apply") -> its style and helper."""
    return {f"{m}.{n}": (s, h) for s in STYLES for m in s.modules for n, h in s.helpers.items()}


def unconverted_by_qualified_name() -> Dict[str, str]:
    """"module.name" -> why the codemod leaves it alone."""
    return {f"{m}.{n}": why for s in STYLES for m in s.modules for n, why in s.unconverted.items()}
