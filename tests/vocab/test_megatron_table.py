"""The megatron-core table (spmd_mypy/vocab/megatron.py) against two sources
written here by hand, not derived from the table:

- what megatron-core 0.16.1's autograd Functions run, forward and backward,
  read from its mappings.py (MEGATRON_RUNS);
- what each typed collective runs, forward and backward, from the design
  (shared/seeds/000: "the backwards is ..." for each collective) (DESIGN_RUNS).

A row is right when the two agree; and the vocabulary's own backward
(vocab.collectives) must give the design's backward for each row.
"""

from __future__ import annotations

from typing import Dict, Tuple

import pytest

from spmd_mypy.vocab.collectives import Step, backward, plan
from spmd_mypy.vocab.localtype import I, P, R, S, Shard, V
from spmd_mypy.vocab.megatron import GIVEN, MAPPINGS, MODULES, Collective, by_fullname, collective_for

Action = Tuple[str, ...]
IDENTITY: Action = ("identity",)


def split(dim: int) -> Action:
    return ("split", str(dim))


def gather(dim: int) -> Action:
    return ("all_gather", str(dim))


def reduce_scatter(dim: int) -> Action:
    return ("reduce_scatter", str(dim))


ALL_REDUCE: Action = ("all_reduce",)
A2A: Action = ("all_to_all",)
RAGGED_GATHER: Action = ("all_gather", "ragged")
RAGGED_REDUCE_SCATTER: Action = ("reduce_scatter", "ragged")

# (function, flags) -> (forward, backward), read from megatron-core 0.16.1's
# mappings.py (_CopyToModelParallelRegion ... _AllToAll and the helpers).
MEGATRON_RUNS: Dict[Tuple[str, Tuple[Tuple[str, object], ...]], Tuple[Action, Action]] = {
    ("copy_to_tensor_model_parallel_region", ()): (IDENTITY, ALL_REDUCE),
    ("reduce_from_tensor_model_parallel_region", ()): (ALL_REDUCE, IDENTITY),
    ("scatter_to_tensor_model_parallel_region", ()): (split(-1), gather(-1)),
    ("gather_from_tensor_model_parallel_region", ()): (gather(-1), split(-1)),
    ("scatter_to_sequence_parallel_region", ()): (split(0), gather(0)),
    ("gather_from_sequence_parallel_region", ()): (gather(0), reduce_scatter(0)),
    ("gather_from_sequence_parallel_region", (("tensor_parallel_output_grad", False),)): (gather(0), split(0)),
    ("gather_from_sequence_parallel_region", (("output_split_sizes", GIVEN),)): (
        RAGGED_GATHER,
        RAGGED_REDUCE_SCATTER,
    ),
    ("reduce_scatter_to_sequence_parallel_region", ()): (reduce_scatter(0), gather(0)),
    ("reduce_scatter_to_sequence_parallel_region", (("input_split_sizes", GIVEN),)): (
        RAGGED_REDUCE_SCATTER,
        RAGGED_GATHER,
    ),
    ("all_gather_last_dim_from_tensor_parallel_region", ()): (gather(-1), reduce_scatter(-1)),
    ("reduce_scatter_last_dim_to_tensor_parallel_region", ()): (reduce_scatter(-1), gather(-1)),
    ("all_to_all", ()): (A2A, A2A),
    # sp2hp: split h, stack on tokens, one all-to-all: rank r ends with all
    # tokens of hidden chunk r; hp2sp is its inverse.
    ("all_to_all_sp2hp", ()): (("all_to_all", "0", "-1"), ("all_to_all", "-1", "0")),
    ("all_to_all_hp2sp", ()): (("all_to_all", "-1", "0"), ("all_to_all", "0", "-1")),
}


def _design_runs(c: Collective) -> Tuple[Action, Action]:
    """What the design says a typed collective runs, forward and backward."""
    s, d = c.src, c.dst
    table = {
        # reinterpret(I,R) (= convert(I,R)): no-op; backward all_reduce(I): P -> I
        ("convert", I, R): (IDENTITY, ALL_REDUCE),
        # all_reduce(I): P -> I; backward reinterpret(I,R), a no-op
        ("all_reduce", P, I): (ALL_REDUCE, IDENTITY),
        # all_gather(V,R); backward reduce_scatter(V): P -> V
        ("all_gather", V, R): (RAGGED_GATHER, RAGGED_REDUCE_SCATTER),
        # reduce_scatter(V): P -> V; backward all_gather(V,R)
        ("reduce_scatter", P, V): (RAGGED_REDUCE_SCATTER, RAGGED_GATHER),
        ("all_to_all", V, V): (A2A, A2A),
    }
    if (c.op, s, d) in table:
        return table[(c.op, s, d)]
    if c.op == "convert" and s == I and isinstance(d, Shard):
        return split(d.dim), gather(d.dim)  # convert(I,S(i)); backward all_gather(S(i),I)
    if c.op == "all_gather" and isinstance(s, Shard) and d == I:
        return gather(s.dim), split(s.dim)  # backward convert(I,S(i)): a split
    if c.op == "all_gather" and isinstance(s, Shard) and d == R:
        return gather(s.dim), reduce_scatter(s.dim)  # backward reduce_scatter(S(i))
    if c.op == "reduce_scatter" and s == P and isinstance(d, Shard):
        return reduce_scatter(d.dim), gather(d.dim)  # backward all_gather(S(i),R)
    if c.op == "all_to_all" and isinstance(s, Shard) and isinstance(d, Shard):
        return ("all_to_all", str(s.dim), str(d.dim)), ("all_to_all", str(d.dim), str(s.dim))
    raise AssertionError(f"no design entry for {c}")


def _cases():
    for (name, flags), runs in MEGATRON_RUNS.items():
        yield pytest.param(name, dict(flags), runs, id=f"{name}{dict(flags) or ''}")


@pytest.mark.parametrize("name, flags, runs", list(_cases()))
def test_row_runs_what_megatron_runs(name: str, flags: Dict[str, object], runs: Tuple[Action, Action]) -> None:
    row = by_fullname()[f"megatron.core.tensor_parallel.mappings.{name}"]
    typed = collective_for(row, flags)
    assert typed is not None
    assert _design_runs(typed) == runs


# The design's backward of each collective the table uses (seed 000).
DESIGN_BACKWARD = {
    Collective("convert", I, R): (Step("all_reduce", P, I),),
    Collective("all_reduce", P, I): (Step("reinterpret", I, R),),
    Collective("convert", I, S(-1)): (Step("all_gather", S(-1), I),),
    Collective("convert", I, S(0)): (Step("all_gather", S(0), I),),
    Collective("all_gather", S(-1), I): (Step("convert", I, S(-1)),),
    Collective("all_gather", S(0), I): (Step("convert", I, S(0)),),
    Collective("all_gather", S(0), R): (Step("reduce_scatter", P, S(0)),),
    Collective("all_gather", S(-1), R): (Step("reduce_scatter", P, S(-1)),),
    Collective("all_gather", V, R): (Step("reduce_scatter", P, V),),
    Collective("reduce_scatter", P, S(0)): (Step("all_gather", S(0), R),),
    Collective("reduce_scatter", P, S(-1)): (Step("all_gather", S(-1), R),),
    Collective("reduce_scatter", P, V): (Step("all_gather", V, R),),
    Collective("all_to_all", V, V): (Step("all_to_all", V, V),),
    Collective("all_to_all", S(0), S(-1)): (Step("all_to_all", S(-1), S(0)),),
    Collective("all_to_all", S(-1), S(0)): (Step("all_to_all", S(0), S(-1)),),
}


def _every_collective():
    for row in MAPPINGS:
        yield row.typed
        yield from (c for _, c in row.variants)


@pytest.mark.parametrize("typed", sorted(set(_every_collective()), key=str), ids=str)
def test_vocabulary_backward_is_the_designs(typed: Collective) -> None:
    steps = plan(typed.op, typed.src, typed.dst, axis="tp")
    assert backward(steps) == DESIGN_BACKWARD[typed]


def test_every_function_megatron_runs_has_a_row_in_both_modules() -> None:
    names = {name for name, _ in MEGATRON_RUNS}
    assert {row.name for row in MAPPINGS} == names
    assert set(by_fullname()) == {f"{m}.{n}" for m in MODULES for n in names}


def test_two_flag_variants_at_once_have_no_row() -> None:
    """tensor_parallel_output_grad=False with output_split_sizes: megatron's
    backward asserts the sizes are None, so no collective describes the call."""
    row = by_fullname()["megatron.core.tensor_parallel.gather_from_sequence_parallel_region"]
    assert collective_for(row, {"tensor_parallel_output_grad": False, "output_split_sizes": GIVEN}) is None
    assert collective_for(row, {"tensor_parallel_output_grad": True}) == Collective("all_gather", S(0), R)


def test_only_all_to_all_requires_a_group() -> None:
    assert [row.name for row in MAPPINGS if row.group_required] == ["all_to_all"]
