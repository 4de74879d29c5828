"""The torch.distributed.nn.functional table (spmd_mypy/vocab/dist_nn.py)
against two sources written here by hand, not derived from the table:

- what torch 2.13's autograd Functions run, forward and backward, read from
  torch/distributed/nn/functional.py (_AllReduce.forward/backward, ...)
  (TORCH_RUNS);
- what each typed collective runs, forward and backward, from the design's
  forward/backward table (DESIGN_RUNS), and its backward as a Step
  (DESIGN_BACKWARD).

A typed row is right when the two agree and the vocabulary's own backward
(vocab.collectives) gives the design's; an untyped row is right when no
typed collective runs its pair.
"""

from __future__ import annotations

import inspect
from typing import Dict, Tuple

import pytest

from spmd_mypy.vocab.collectives import Step, backward, plan
from spmd_mypy.vocab.dist_nn import (
    FUNCOL_IDENTITY,
    FUNCOL_MODULE,
    FUNCOL_ROWS,
    LIST,
    MODULE,
    ROWS,
    SUM_STRINGS,
    TENSOR,
    TUPLE,
    by_fullname,
)
from spmd_mypy.vocab.localtype import P, R, V
from spmd_mypy.vocab.megatron import Collective

Action = Tuple[str, ...]

# function (with op at its default, ReduceOp.SUM) -> (forward, backward), from torch 2.13:
TORCH_RUNS: Dict[str, Tuple[Action, Action]] = {
    # _AllReduce: dist.all_reduce(op) / _AllReduce.apply(ctx.op, ...) of the gradient
    "all_reduce": (("all_reduce", "sum"), ("all_reduce", "sum")),
    # _AllGather: dist.all_gather into a tuple / _Reduce_Scatter(SUM) (or all-to-all + sum)
    "all_gather": (("all_gather",), ("reduce_scatter", "sum")),
    # _Reduce_Scatter: dist.reduce_scatter(op) / _AllGather of the gradient
    "reduce_scatter": (("reduce_scatter", "sum"), ("all_gather",)),
    # _AlltoAllSingle: dist.all_to_all_single / _AlltoAllSingle, split sizes swapped
    "all_to_all_single": (("all_to_all",), ("all_to_all",)),
    # _AlltoAll: dist.all_to_all (scatters under gloo) / _AlltoAll of the gradients
    "all_to_all": (("all_to_all",), ("all_to_all",)),
    # _Broadcast: dist.broadcast from src / _Reduce(SUM) to src, zeroed on the other ranks
    "broadcast": (("broadcast", "root"), ("reduce", "sum", "root")),
    # _Reduce: dist.reduce to dst / _Broadcast from dst
    "reduce": (("reduce", "sum", "root"), ("broadcast", "root")),
    # _Gather: dist.gather to dst / _Scatter from dst
    "gather": (("gather", "root"), ("scatter", "root")),
    # _Scatter: dist.scatter from src / _Gather to src
    "scatter": (("scatter", "root"), ("gather", "root")),
}

# The design's typed collectives: what each runs, forward and backward.
DESIGN_RUNS: Dict[Collective, Tuple[Action, Action]] = {
    Collective("all_reduce", P, R): (("all_reduce", "sum"), ("all_reduce", "sum")),
    Collective("all_gather", V, R): (("all_gather",), ("reduce_scatter", "sum")),
    Collective("reduce_scatter", P, V): (("reduce_scatter", "sum"), ("all_gather",)),
    Collective("all_to_all", V, V): (("all_to_all",), ("all_to_all",)),
}
DESIGN_BACKWARD: Dict[Collective, Step] = {
    Collective("all_reduce", P, R): Step("all_reduce", P, R),
    Collective("all_gather", V, R): Step("reduce_scatter", P, V),
    Collective("reduce_scatter", P, V): Step("all_gather", V, R),
    Collective("all_to_all", V, V): Step("all_to_all", V, V),
}

# Where the input is, and whether input / result are one tensor or a sequence of them.
SHAPES: Dict[str, Tuple[str, str, str]] = {
    "all_reduce": ("tensor", TENSOR, TENSOR),
    "all_gather": ("tensor", TENSOR, TUPLE),
    "reduce_scatter": ("input_list", LIST, TENSOR),
    "all_to_all_single": ("input", TENSOR, TENSOR),
    "all_to_all": ("input_tensor_list", LIST, TUPLE),
    "broadcast": ("tensor", TENSOR, TENSOR),
    "reduce": ("tensor", TENSOR, TENSOR),
    "gather": ("tensor", TENSOR, TUPLE),
    "scatter": ("tensors", LIST, TENSOR),
}
REDUCING = {"all_reduce", "reduce_scatter", "reduce"}  # take op=, typed only with the sum


def test_every_function_has_one_row() -> None:
    assert sorted(r.name for r in ROWS) == sorted(TORCH_RUNS)
    assert {k for k in by_fullname() if k.startswith(MODULE + ".")} == {f"{MODULE}.{name}" for name in TORCH_RUNS}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_row_runs_what_torch_runs(row) -> None:
    runs = TORCH_RUNS[row.name]
    if row.typed is None:
        assert runs not in DESIGN_RUNS.values(), f"{row.name} runs a typed collective's pair"
        return
    assert DESIGN_RUNS[row.typed] == runs


@pytest.mark.parametrize("row", [r for r in ROWS if r.typed is not None], ids=lambda r: r.name)
def test_vocabulary_backward_is_the_design(row) -> None:
    c = row.typed
    assert backward(plan(c.op, c.src, c.dst, axis="tp")) == (DESIGN_BACKWARD[c],)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_row_shapes(row) -> None:
    assert (row.tensor, row.inputs, row.result) == SHAPES[row.name]
    assert (row.op == "op") is (row.name in REDUCING)
    assert row.group == "group"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_parameters_exist_in_torch(row) -> None:
    functional = pytest.importorskip("torch.distributed.nn.functional")
    params = inspect.signature(getattr(functional, row.name)).parameters
    assert row.tensor in params and row.group in params
    assert row.op is None or row.op in params


# torch.distributed._functional_collectives, with reduceOp "sum": what ran
# (ops logged by a TorchDispatchMode in a one-process gloo group, torch 2.13),
# forward / during `.sum().backward()`; every result had a grad_fn.
FUNCOL_TORCH_RUNS: Dict[str, Tuple[Action, Action]] = {
    "all_reduce": (("all_reduce", "sum"), ("all_reduce", "sum")),
    "all_gather_tensor": (("all_gather",), ("reduce_scatter", "sum")),
    "all_gather_tensor_autograd": (("all_gather",), ("reduce_scatter", "sum")),
    "all_gather_single": (("all_gather",), ("reduce_scatter", "sum")),
    "all_gather_single_autograd": (("all_gather",), ("reduce_scatter", "sum")),
    "reduce_scatter_tensor": (("reduce_scatter", "sum"), ("all_gather",)),
    "reduce_scatter_tensor_autograd": (("reduce_scatter", "sum"), ("all_gather",)),
    "reduce_scatter_single": (("reduce_scatter", "sum"), ("all_gather",)),
    "reduce_scatter_single_autograd": (("reduce_scatter", "sum"), ("all_gather",)),
    "all_to_all_single": (("all_to_all",), ("all_to_all",)),
    "all_to_all_single_autograd": (("all_to_all",), ("all_to_all",)),
}
FUNCOL_REDUCING = {n for n in FUNCOL_TORCH_RUNS if n.startswith(("all_reduce", "reduce_scatter"))}


def test_every_funcol_function_has_one_row() -> None:
    assert sorted(r.name for r in FUNCOL_ROWS) == sorted(FUNCOL_TORCH_RUNS)
    assert {f"{FUNCOL_MODULE}.{name}" for name in FUNCOL_TORCH_RUNS} <= set(by_fullname())
    assert FUNCOL_IDENTITY == {"wait_tensor": "tensor"}
    assert SUM_STRINGS == {"sum"}


@pytest.mark.parametrize("row", FUNCOL_ROWS, ids=lambda r: r.name)
def test_funcol_row_runs_what_torch_runs(row) -> None:
    assert row.typed is not None and DESIGN_RUNS[row.typed] == FUNCOL_TORCH_RUNS[row.name]
    assert backward(plan(row.typed.op, row.typed.src, row.typed.dst, axis="tp")) == (DESIGN_BACKWARD[row.typed],)


@pytest.mark.parametrize("row", FUNCOL_ROWS, ids=lambda r: r.name)
def test_funcol_row_shapes(row) -> None:
    assert (row.module, row.tensor, row.inputs, row.result, row.group) == (FUNCOL_MODULE, "self", TENSOR, TENSOR, "group")
    assert row.group_only and row.str_op is (row.name in FUNCOL_REDUCING)
    assert row.op == ("reduceOp" if row.name in FUNCOL_REDUCING else None)


@pytest.mark.parametrize("name", sorted(FUNCOL_TORCH_RUNS) + ["wait_tensor"])
def test_funcol_parameters_exist_in_torch(name) -> None:
    funcol = pytest.importorskip("torch.distributed._functional_collectives")
    params = inspect.signature(getattr(funcol, name)).parameters
    row = by_fullname().get(f"{FUNCOL_MODULE}.{name}")
    expected = (row.tensor, row.group) if row is not None else ("tensor",)
    assert expected == tuple(p for p in params if p in ("self", "group", "tensor"))
    assert row is None or row.op is None or row.op in params
