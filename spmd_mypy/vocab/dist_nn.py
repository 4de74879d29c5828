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

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import Dict, Final, NamedTuple, Optional, Tuple

from .localtype import P, R, V
from .megatron import Collective

__all__ = [
    "MODULE",
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

_BY_FULLNAME: Final[Dict[str, Row]] = {f"{MODULE}.{row.name}": row for row in ROWS}


def by_fullname() -> Dict[str, Row]:
    """fullname (as mypy names the callee) -> its row."""
    return dict(_BY_FULLNAME)
