"""torch.distributed.nn.functional's autograd-aware collectives as typed collectives, as data.

torch (2.13) defines these functions with plain `def`s, so mypy types their
results Any.  Each one applies an autograd Function whose forward and
backward are one collective pair; a row below names the typed collective
(op, src, dst) whose forward and backward (the design's backward, in
vocab/collectives.py) are that same pair, read from the Functions' code
(_AllReduce, _AllGather, _Reduce_Scatter, _AlltoAll, _AlltoAllSingle,
_Broadcast, _Reduce, _Gather, _Scatter), not from the docstrings:

  all_reduce         all-reduce with `op` / all-reduce of the gradient with
                     the same `op`: with the sum, all_reduce(P -> R); with
                     any other op no typed collective (and no right gradient)
  all_gather         gathers a tuple of world-size tensors (rank i's at i) /
                     reduce-scatter (sum) of their gradients: each element is
                     all_gather(V -> R)
  reduce_scatter     reduce-scatter (with `op`) of a list / all-gather of the
                     gradient: reduce_scatter(P -> V), the list's elements P
  all_to_all_single  all-to-all / all-to-all with the split sizes swapped:
                     all_to_all(V -> V)
  all_to_all         the same, of lists: all_to_all(V -> V) per element
  broadcast, reduce, gather, scatter: a root rank's forward (broadcast from
                     src; reduce, gather to dst; scatter from src) and its
                     inverse to the same root as backward; no typed
                     collective has that pair: not typed (typed=None).

`group` omitted (group.WORLD) or None is the default group: every rank,
i.e. every mesh axis at once.

torch.distributed._functional_collectives ("funcol": torchtitan, DTensor,
OLMo-core) has FUNCOL_ROWS.  Its functions return an AsyncCollectiveTensor
and take the reduction op as a string (lowered) and a required `group` (a
ProcessGroup, a DeviceMesh, (mesh, dim), a list of ranks, or a group's
name).  In torch 2.13 the base ops are differentiable: funcol.py registers
autograd formulas (torch.library.register_autograd) for
_c10d_functional::all_reduce, all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single and wait_tensor, and the
`*_autograd` functions now just call the plain ones.  Found by running them
(one-process gloo group, input requiring grad, ops logged by a
TorchDispatchMode during forward and `.sum().backward()`):

  all_reduce(x, "sum", g)       grad_fn set; forward all_reduce(sum) /
                                backward all_reduce(sum): all_reduce(P -> R)
  all_reduce(x, "max"|"avg", g) grad_fn set, but backward raises
                                RuntimeError ("all_reduce backward only
                                supports 'sum' reduction"): no typed
                                collective, unchecked
  all_gather_tensor[_autograd], all_gather_single[_autograd]
                                all_gather_into_tensor / reduce_scatter_tensor
                                (sum) of the gradient: all_gather(V -> R)
                                (rank i's block at i along gather_dim)
  reduce_scatter_tensor[_autograd], reduce_scatter_single[_autograd]
                                with "sum": reduce_scatter_tensor(sum) /
                                all_gather_into_tensor: reduce_scatter(P -> V);
                                another op's backward raises RuntimeError
  all_to_all_single[_autograd]  all_to_all_single / all_to_all_single with
                                the split sizes swapped: all_to_all(V -> V)
  wait_tensor(t)                no collective; backward is the identity
                                (wait_tensor_backward): t's type unchanged
                                (FUNCOL_IDENTITY)

Only a ProcessGroup names a funcol group's axis (a string is a group's
name, not an axis; a mesh, (mesh, dim) or a list of ranks names none here).

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import Dict, Final, NamedTuple, Optional, Tuple

from .localtype import P, R, V
from .megatron import Collective

__all__ = [
    "MODULE",
    "FUNCOL_MODULE",
    "FUNCOL_ROWS",
    "FUNCOL_IDENTITY",
    "SUM_STRINGS",
    "TENSOR",
    "LIST",
    "TUPLE",
    "Row",
    "ROWS",
    "SUM_OPS",
    "SPMD_REDUCE_OPS",
    "WORLD_GROUPS",
    "by_fullname",
]

MODULE: Final = "torch.distributed.nn.functional"

# What a row's input and result are: one tensor, or a list / tuple of tensors
# whose elements each hold the collective's src / dst.
TENSOR: Final = "tensor"
LIST: Final = "list"
TUPLE: Final = "tuple"


class Row(NamedTuple):
    """One function: where its input, reduction op and group are, and what it runs."""

    name: str
    tensor: str  # the parameter that holds the input
    typed: Optional[Collective]  # None: no typed collective has its forward and backward
    runs: str  # forward / backward, as torch's code runs them (for messages)
    inputs: str = TENSOR  # TENSOR or LIST
    result: str = TENSOR  # TENSOR or TUPLE
    op: Optional[str] = None  # the parameter of the reduction op (typed only with the sum)
    group: str = "group"
    module: str = MODULE
    str_op: bool = False  # the op is a string ("sum"), not a ReduceOp
    group_only: bool = False  # only a ProcessGroup names an axis (a string is a group's name)


ROWS: Final[Tuple[Row, ...]] = (
    Row("all_reduce", "tensor", Collective("all_reduce", P, R), "all-reduce / all-reduce of the gradient", op="op"),
    Row(
        "all_gather",
        "tensor",
        Collective("all_gather", V, R),
        "all-gather into a tuple / reduce-scatter (sum) of the gradients",
        result=TUPLE,
    ),
    Row(
        "reduce_scatter",
        "input_list",
        Collective("reduce_scatter", P, V),
        "reduce-scatter of a list / all-gather of the gradient",
        inputs=LIST,
        op="op",
    ),
    Row("all_to_all_single", "input", Collective("all_to_all", V, V), "all-to-all / all-to-all of the gradient"),
    Row(
        "all_to_all",
        "input_tensor_list",
        Collective("all_to_all", V, V),
        "all-to-all of lists / all-to-all of the gradients",
        inputs=LIST,
        result=TUPLE,
    ),
    Row("broadcast", "tensor", None, "broadcast from rank src / reduce (sum) of the gradient to src, zeroed elsewhere"),
    Row("reduce", "tensor", None, "reduce to rank dst / broadcast of the gradient from dst", op="op"),
    Row("gather", "tensor", None, "gather to rank dst / scatter of the gradients from dst", result=TUPLE),
    Row("scatter", "tensors", None, "scatter from rank src / gather of the gradient to src", inputs=LIST),
)

FUNCOL_MODULE: Final = "torch.distributed._functional_collectives"


def _funcol(name: str, typed: Collective, runs: str, op: Optional[str] = None) -> Row:
    return Row(name, "self", typed, runs, op=op, module=FUNCOL_MODULE, str_op=op is not None, group_only=True)


_GATHER: Final = Collective("all_gather", V, R)
_SCATTER: Final = Collective("reduce_scatter", P, V)
_TO_ALL: Final = Collective("all_to_all", V, V)
FUNCOL_ROWS: Final[Tuple[Row, ...]] = (
    _funcol("all_reduce", Collective("all_reduce", P, R), "all-reduce / all-reduce of the gradient", "reduceOp"),
    *(
        _funcol(name, _GATHER, "all-gather along gather_dim / reduce-scatter (sum) of the gradient")
        for name in ("all_gather_tensor", "all_gather_tensor_autograd", "all_gather_single", "all_gather_single_autograd")
    ),
    *(
        _funcol(name, _SCATTER, "reduce-scatter along scatter_dim / all-gather of the gradient", "reduceOp")
        for name in (
            "reduce_scatter_tensor", "reduce_scatter_tensor_autograd", "reduce_scatter_single",
            "reduce_scatter_single_autograd",
        )
    ),
    *(
        _funcol(name, _TO_ALL, "all-to-all / all-to-all of the gradient, split sizes swapped")
        for name in ("all_to_all_single", "all_to_all_single_autograd")
    ),
)

# funcol functions whose result has their argument's type (function -> its parameter).
FUNCOL_IDENTITY: Final[Dict[str, str]] = {"wait_tensor": "tensor"}

# The string ops that are the sum (funcol lowers the op before running it).
SUM_STRINGS: Final = frozenset({"sum"})

# The reduction ops that are the sum, as mypy names them (`ReduceOp.SUM`).
SUM_OPS: Final = frozenset(
    {"torch._C._distributed_c10d.ReduceOp.SUM", "torch._C._distributed_c10d.ReduceOp.RedOpType.SUM"}
)

# ReduceOp attributes spmd.all_reduce's `op=` has (without a gradient): for hints.
SPMD_REDUCE_OPS: Final = {"MAX": "max", "MIN": "min"}

# The default group (every rank), as mypy names it (`dist.group.WORLD`).
WORLD_GROUPS: Final = frozenset(
    {"torch.distributed.distributed_c10d.group.WORLD", "torch.distributed.distributed_c10d.GroupMember.WORLD"}
)

_BY_FULLNAME: Final[Dict[str, Row]] = {f"{row.module}.{row.name}": row for row in ROWS + FUNCOL_ROWS}


def by_fullname() -> Dict[str, Row]:
    """fullname (as mypy names the callee) -> its row."""
    return dict(_BY_FULLNAME)
