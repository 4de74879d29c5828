"""Per-axis types in global code (plugin/global_per_axis.py): which dims
each global axis shards, compared and checked as a spec would be.  The
expected answers are written from the design: a per-axis `S(i)` names the
dim, a spec names the dim and the order of the axes on it."""

from __future__ import annotations

from spmd_mypy import P, PartitionSpec, R, S, Spmd, V
from spmd_mypy.plugin.global_per_axis import collective_problem, shard_mismatch, shared_dim


def every(axis: str) -> bool:
    return True


def only_tp(axis: str) -> bool:
    return axis == "tp"


def test_same_dims_match_in_either_form() -> None:
    assert shard_mismatch(Spmd(dp=S(0), tp=S(1)), Spmd(dp=S(0), tp=S(1)), every) is None
    assert shard_mismatch(Spmd(spec=PartitionSpec("dp", "tp")), Spmd(dp=S(0), tp=S(1)), every) is None
    assert shard_mismatch(Spmd(dp=S(0), tp=S(1)), Spmd(spec=PartitionSpec("dp", "tp")), every) is None


def test_another_dim_on_a_global_axis_is_a_mismatch() -> None:
    assert shard_mismatch(Spmd(dp=S(0), tp=S(1)), Spmd(dp=S(1), tp=S(0)), every) is not None
    got = Spmd(spec=PartitionSpec(("dp", "tp"), None))
    found = shard_mismatch(got, Spmd(dp=S(1), tp=S(0)), every)
    assert found == (repr(got), "Spmd(dp=S(1), tp=S(0))")


def test_a_local_axis_keeps_the_local_rule() -> None:
    # dp is local in a global_spmd(axes=("tp",)) scope: S(0) and S(1) stand for each other there
    assert shard_mismatch(Spmd(dp=S(0), tp=S(1)), Spmd(dp=S(1), tp=S(1)), only_tp) is None
    assert shard_mismatch(Spmd(dp=S(0), tp=S(1)), Spmd(dp=S(0), tp=S(0)), only_tp) is not None


def test_negative_dims_resolve_against_the_spec_side_rank() -> None:
    assert shard_mismatch(Spmd(spec=PartitionSpec(None, "tp")), Spmd(tp=S(-1)), every) is None
    assert shard_mismatch(Spmd(spec=PartitionSpec("tp", None)), Spmd(tp=S(-1)), every) is not None


def test_two_axes_on_one_dim_of_a_spec_against_per_axis_is_a_mismatch() -> None:
    # the per-axis side cannot say which of dp and tp is the major one
    assert shard_mismatch(Spmd(spec=PartitionSpec(("dp", "tp"), None)), Spmd(dp=S(0), tp=S(0)), every) is not None


def test_shared_dim_of_an_annotation() -> None:
    assert shared_dim(Spmd(dp=S(0), tp=S(0)), every) == (0, ["dp", "tp"])
    assert shared_dim(Spmd(dp=S(0), tp=S(1)), every) is None
    assert shared_dim(Spmd(dp=S(0), tp=S(0)), only_tp) is None
    assert shared_dim(Spmd(spec=PartitionSpec(("dp", "tp"), None)), every) is None


def test_collectives_the_local_rules_type_exactly() -> None:
    assert collective_problem(Spmd(dp=R, tp=S(1)), ["tp"], S(1), R, every) is None
    assert collective_problem(Spmd(dp=S(0), tp=P), ["tp"], P, S(1), every) is None
    assert collective_problem(Spmd(dp=S(0), tp=S(1)), ["tp"], S(1), R, every) is None


def test_collectives_the_local_rules_would_get_wrong() -> None:
    wrong_dim = collective_problem(Spmd(dp=R, tp=S(1)), ["tp"], S(0), R, every)
    assert wrong_dim is not None and wrong_dim[1] == "src=S(1)"
    assert collective_problem(Spmd(dp=S(0), tp=V), ["tp"], S(0), R, every) is not None
    # dst fills a dim another global axis shards; src cuts such a dim
    assert collective_problem(Spmd(dp=S(0), tp=S(1)), ["dp"], S(0), S(1), every) is not None
    assert collective_problem(Spmd(dp=S(0), tp=P), ["tp"], P, S(0), every) is not None
    # ...but not when that other axis is local
    assert collective_problem(Spmd(dp=S(0), tp=P), ["tp"], P, S(0), only_tp) is None
