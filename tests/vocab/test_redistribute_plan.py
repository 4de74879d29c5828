"""The spec-level redistribute planner against the targets and an independent simulator.

* Every row of the communication-volume tables in notes/targets.md
  (transcribed here) plans at exactly its lower bound, with one collective.
* The layout rows' bounds are recomputed by brute force (what a device
  needs and does not hold), so the transcription is checked too.
* A small simulator written here, independent of the planner, runs every
  step of a plan on symbolic data: each device holds a map from global
  element to the set of Partial addends summed into it.  It follows the
  meaning of each collective (gather, reduce, move, local convert), checks
  that each step starts where the previous one ended, counts what each
  device receives, and checks that the final data is the dst type of the
  same value.  It runs on every pair of types of two 2-D meshes (exhaustive
  for dp=2 x tp=2, sampled for a 2 x 2 x 2 mesh) and on the table rows.
"""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from typing import Dict, FrozenSet, List, Mapping, Optional, Sequence, Set, Tuple

import pytest

from spmd_mypy import I, P, PartitionSpec, R, S, Spmd, V
from spmd_mypy.vocab.collectives import CollectiveError
from spmd_mypy.vocab.redistribute_plan import (
    RedistPlan,
    RedistributeError,
    exchange_pieces,
    global_shape,
    grad_spmd,
    local_shape,
    plan_redistribute,
)

PS = PartitionSpec
MESH_2x2 = {"dp": 2, "tp": 2}
MESH_4x8 = {"dp": 4, "tp": 8}

# -- the targets, transcribed from notes/targets.md --------------------------------

Row = Tuple[str, Mapping[str, int], Spmd, Spmd, Fraction, Optional[Fraction]]

TABLE: List[Row] = [
    ("2x2 [S0@dp, S1@tp] -> R", MESH_2x2, Spmd(spec=PS("dp", "tp")), Spmd(spec=PS(None, None)),
     Fraction(3, 4), Fraction(3, 4)),
    ("2x2 S0@tp -> S1@tp", MESH_2x2, Spmd(spec=PS("tp", None)), Spmd(spec=PS(None, "tp")),
     Fraction(1, 4), Fraction(1, 4)),
    ("2x2 swap", MESH_2x2, Spmd(spec=PS("dp", "tp")), Spmd(spec=PS("tp", "dp")),
     Fraction(1, 4), Fraction(1, 2)),
    ("2x2 dim order", MESH_2x2, Spmd(spec=PS(("dp", "tp"), None)), Spmd(spec=PS(("tp", "dp"), None)),
     Fraction(1, 4), None),
    ("2x2 [S0@dp, S0@tp] -> [R, S0@tp]", MESH_2x2, Spmd(spec=PS(("dp", "tp"), None)),
     Spmd(spec=PS("tp", None)), Fraction(1, 2), Fraction(3, 4)),
    ("2x2 [P@dp, P@tp] -> R", MESH_2x2, Spmd(spec=PS(None, None), dp=P, tp=P),
     Spmd(spec=PS(None, None)), Fraction(3, 2), Fraction(2)),
    ("2x2 [P@dp, P@tp] -> S0@(dp,tp)", MESH_2x2, Spmd(spec=PS(None, None), dp=P, tp=P),
     Spmd(spec=PS(("dp", "tp"), None)), Fraction(3, 4), Fraction(3, 4)),
    ("4x8 swap", MESH_4x8, Spmd(spec=PS("dp", "tp")), Spmd(spec=PS("tp", "dp")),
     Fraction(1, 32), Fraction(13, 32)),
    ("4x8 [P@dp, P@tp] -> R", MESH_4x8, Spmd(spec=PS(None, None), dp=P, tp=P),
     Spmd(spec=PS(None, None)), Fraction(31, 16), Fraction(13, 4)),
    ("4x8 [S0@dp, S0@tp] -> [R, S0@tp]", MESH_4x8, Spmd(spec=PS(("dp", "tp"), None)),
     Spmd(spec=PS("tp", None)), Fraction(1, 8), Fraction(31, 32)),
]
TABLE_SHAPE = (64, 64)


def _row_id(row: Row) -> str:
    return row[0]


@pytest.mark.parametrize("row", TABLE, ids=_row_id)
def test_table_row_meets_its_lower_bound(row: Row) -> None:
    _, mesh, src, dst, bound, _ = row
    plan = plan_redistribute(src, dst, TABLE_SHAPE, mesh)
    assert plan.volume == bound, plan.text()
    assert plan.max_recv_elements == bound * 64 * 64
    assert plan.collectives == 1, plan.text()  # one flattened collective, permute or exchange


@pytest.mark.parametrize("row", [r for r in TABLE if r[5] is not None], ids=_row_id)
def test_table_row_beats_or_matches_dtensor(row: Row) -> None:
    _, mesh, src, dst, bound, dtensor = row
    assert dtensor is not None
    assert plan_redistribute(src, dst, TABLE_SHAPE, mesh).volume <= dtensor


def test_table_rows_plan_the_expected_collectives() -> None:
    ops = {r[0]: [s.op for s in plan_redistribute(r[2], r[3], TABLE_SHAPE, r[1]).steps] for r in TABLE}
    assert ops == {
        "2x2 [S0@dp, S1@tp] -> R": ["all_gather"],
        "2x2 S0@tp -> S1@tp": ["all_to_all"],
        "2x2 swap": ["permute"],
        "2x2 dim order": ["permute"],
        "2x2 [S0@dp, S0@tp] -> [R, S0@tp]": ["exchange"],
        "2x2 [P@dp, P@tp] -> R": ["all_reduce"],
        "2x2 [P@dp, P@tp] -> S0@(dp,tp)": ["reduce_scatter"],
        "4x8 swap": ["exchange"],
        "4x8 [P@dp, P@tp] -> R": ["all_reduce"],
        "4x8 [S0@dp, S0@tp] -> [R, S0@tp]": ["exchange"],
    }
    flat = plan_redistribute(TABLE[0][2], TABLE[0][3], TABLE_SHAPE, MESH_2x2).steps[0]
    assert flat.axes == ("dp", "tp")


# -- independent geometry -----------------------------------------------------------

Coords = Tuple[int, ...]
Elem = Tuple[int, ...]


def devices(mesh: Mapping[str, int]) -> List[Dict[str, int]]:
    names = list(mesh)
    return [dict(zip(names, c)) for c in itertools.product(*[range(mesh[a]) for a in names])]


def key(c: Mapping[str, int], mesh: Mapping[str, int]) -> Coords:
    return tuple(c[a] for a in mesh)


def letter(spmd: Spmd, axis: str) -> str:
    """R, I, P, or S for an axis of a spec-form type (unnamed axes are R)."""
    assert spmd.spec is not None
    if any(axis in d for d in spmd.spec.dims):
        return "S"
    t = spmd.axes.get(axis, R)
    return {R: "R", I: "I", P: "P"}[t]


def tile(spmd: Spmd, shape: Sequence[int], mesh: Mapping[str, int], c: Mapping[str, int]) -> Set[Elem]:
    assert spmd.spec is not None
    ranges = []
    for j, axes in enumerate(spmd.spec.dims):
        block, parts = 0, 1
        for a in axes:  # major to minor
            block = block * mesh[a] + c[a]
            parts *= mesh[a]
        assert shape[j] % parts == 0
        n = shape[j] // parts
        ranges.append(range(block * n, (block + 1) * n))
    return set(itertools.product(*ranges))


def brute_lower_bound(src: Spmd, dst: Spmd, shape: Sequence[int], mesh: Mapping[str, int]) -> int:
    """Layout moves: the most elements a device needs and does not hold."""
    return max(len(tile(dst, shape, mesh, c) - tile(src, shape, mesh, c)) for c in devices(mesh))


@pytest.mark.parametrize("row", [r for r in TABLE if "P@" not in r[0]], ids=_row_id)
def test_table_bound_is_what_a_device_needs_and_lacks(row: Row) -> None:
    _, mesh, src, dst, bound, _ = row
    shape = (32, 32)
    assert Fraction(brute_lower_bound(src, dst, shape, mesh), 32 * 32) == bound


# -- the simulator --------------------------------------------------------------------

State = Dict[Coords, Dict[Elem, FrozenSet[Coords]]]


def initial_state(src: Spmd, shape: Sequence[int], mesh: Mapping[str, int]) -> State:
    partial = [a for a in mesh if letter(src, a) == "P"]
    out: State = {}
    for c in devices(mesh):
        addend = frozenset({tuple(c[a] for a in partial)})
        out[key(c, mesh)] = {e: addend for e in tile(src, shape, mesh, c)}
    return out


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def simulate_step(state: State, step, shape, mesh) -> Tuple[State, Dict[Coords, int]]:
    group = step.axes
    g = 1
    for a in group:
        g *= mesh[a]
    devs = devices(mesh)
    new: State = {}
    recv: Dict[Coords, int] = {}
    for c in devs:
        k = key(c, mesh)
        assert set(state[k]) == tile(step.src, shape, mesh, c), f"{step!r} does not start from the data"
        peers = [
            key(d, mesh) for d in devs if all(d[a] == c[a] for a in mesh if a not in group)
        ]
        want = tile(step.dst, shape, mesh, c)
        mine = state[k]
        out: Dict[Elem, FrozenSet[Coords]] = {}
        if step.op in ("all_reduce", "reduce_scatter"):
            for e in want:
                parts = [state[p][e] for p in peers]
                assert sum(len(x) for x in parts) == len(frozenset().union(*parts)), "an addend twice"
                out[e] = frozenset().union(*parts)
            local = len(mine)
            recv[k] = (g - 1) * local // g if step.op == "reduce_scatter" else _ceil(2 * (g - 1) * local, g)
        elif step.op in ("all_gather", "all_to_all", "permute", "exchange"):
            got = 0
            for e in want:
                if e in mine:
                    out[e] = mine[e]
                    continue
                held = {state[p][e] for p in peers if e in state[p]}
                assert len(held) == 1, f"{step!r}: element {e} is held {len(held)} ways in the group"
                out[e] = held.pop()
                got += 1
            recv[k] = got
        elif step.op == "convert":
            zero = any(
                c[a] != 0 for a in group if letter(step.src, a) == "R" and letter(step.dst, a) == "P"
            )
            for e in want:
                assert e in mine, f"{step!r}: a local convert needs element {e} on the device"
                out[e] = frozenset() if zero else mine[e]
            recv[k] = 0
        else:
            raise AssertionError(f"unknown op {step.op}")
        new[k] = out
    return new, recv


def check_final(state: State, src: Spmd, dst: Spmd, shape, mesh) -> None:
    src_partial = [a for a in mesh if letter(src, a) == "P"]
    everything = frozenset(itertools.product(*[range(mesh[a]) for a in src_partial]))
    dst_partial = [a for a in mesh if letter(dst, a) == "P"]
    replicated = [a for a in mesh if letter(dst, a) in ("R", "I")]
    devs = devices(mesh)
    for c in devs:
        assert set(state[key(c, mesh)]) == tile(dst, shape, mesh, c)
    # Replicas (R/I) hold the same local tensor.
    for c in devs:
        for d in devs:
            if all(c[a] == d[a] for a in mesh if a not in replicated):
                assert state[key(c, mesh)] == state[key(d, mesh)], (c, d)
    # Over each Partial group, every element's addends sum to the full value, once each.
    for c in devs:
        if any(c[a] for a in dst_partial):
            continue
        group = [key(d, mesh) for d in devs if all(d[a] == c[a] for a in mesh if a not in dst_partial)]
        for e in state[key(c, mesh)]:
            parts = [state[p][e] for p in group]
            assert sum(len(x) for x in parts) == len(everything), (e, parts)
            assert frozenset().union(*parts) == everything, (e, parts)


def simulate(plan: RedistPlan, mesh: Mapping[str, int]) -> int:
    """Run the plan; check every step and the result; return the max received."""
    shape = plan.shape
    state = initial_state(plan.src, shape, mesh)
    totals = {key(c, mesh): 0 for c in devices(mesh)}
    at = plan.src
    for step in plan.steps:
        assert step.src == at, f"{step!r} starts at {step.src}, the previous step ended at {at}"
        state, recv = simulate_step(state, step, shape, mesh)
        assert max(recv.values()) == step.recv, f"{step!r}: simulated max recv {max(recv.values())}"
        for k, v in recv.items():
            totals[k] += v
        at = step.dst
    assert at == plan.dst
    check_final(state, plan.src, plan.dst, shape, mesh)
    return max(totals.values())


@pytest.mark.parametrize("row", TABLE, ids=_row_id)
def test_table_plans_simulate_correctly(row: Row) -> None:
    _, mesh, src, dst, bound, _ = row
    plan = plan_redistribute(src, dst, (32, 32), mesh)
    assert simulate(plan, mesh) == plan.max_recv_elements == bound * 32 * 32


# -- every pair of types on small meshes ------------------------------------------------


def all_types(mesh: Mapping[str, int], ndim: int) -> List[Spmd]:
    """Every spec-form type over these axes (R/I/P or sharding a dim, in every order)."""
    names = list(mesh)
    out = []
    for roles in itertools.product(["R", "I", "P"] + [f"S{j}" for j in range(ndim)], repeat=len(names)):
        per_dim = [[a for a, r in zip(names, roles) if r == f"S{j}"] for j in range(ndim)]
        for orders in itertools.product(*[list(itertools.permutations(d)) for d in per_dim]):
            spec = PS(*[(o if len(o) > 1 else o[0]) if o else None for o in orders])
            other = {a: {"R": R, "I": I, "P": P}[r] for a, r in zip(names, roles) if r in ("I", "P")}
            out.append(Spmd.of(other, spec))
    return out


_BAD = {("R", "I"), ("I", "P"), ("S", "P")}  # no value-preserving per-axis move


def expect_invalid(src: Spmd, dst: Spmd, mesh: Mapping[str, int]) -> Optional[str]:
    for a in mesh:
        if (letter(src, a), letter(dst, a)) in _BAD:
            return a
    return None


def _check_pair(src: Spmd, dst: Spmd, shape, mesh) -> Optional[RedistPlan]:
    bad_axis = expect_invalid(src, dst, mesh)
    if bad_axis is not None:
        with pytest.raises(RedistributeError) as info:
            plan_redistribute(src, dst, shape, mesh)
        assert f"axis {bad_axis!r}" in str(info.value)
        return None
    plan = plan_redistribute(src, dst, shape, mesh)
    got = simulate(plan, mesh)
    assert got == plan.max_recv_elements, plan.text()
    if all(letter(src, a) != "P" for a in mesh):
        assert plan.max_recv_elements >= brute_lower_bound(src, dst, shape, mesh)
    return plan


def test_every_pair_on_a_2x2_mesh() -> None:
    types = all_types(MESH_2x2, 2)
    assert len(types) == 27
    planned = at_bound = layout_only = 0
    for src, dst in itertools.product(types, types):
        plan = _check_pair(src, dst, (4, 4), MESH_2x2)
        if plan is None:
            continue
        planned += 1
        if all(letter(src, a) != "P" for a in MESH_2x2) and not any(
            "I" in (letter(src, a), letter(dst, a)) for a in MESH_2x2
        ):
            layout_only += 1
            at_bound += plan.max_recv_elements == brute_lower_bound(src, dst, (4, 4), MESH_2x2)
    assert planned > 400
    # Layout moves without Invariant axes reach the brute-force bound exactly.
    assert at_bound == layout_only


def test_sampled_pairs_on_a_2x2x2_mesh() -> None:
    mesh = {"pp": 2, "dp": 2, "tp": 2}
    types = all_types(mesh, 2)
    rng = random.Random(20261121)
    pairs = [(rng.choice(types), rng.choice(types)) for _ in range(300)]
    for src, dst in pairs:
        _check_pair(src, dst, (8, 8), mesh)


def test_uneven_mesh_axes() -> None:
    """Axes of different sizes on one dim: the 4x8 rows on a smaller shape, and more."""
    mesh = {"dp": 2, "tp": 3}
    for src, dst in [
        (Spmd(spec=PS(("dp", "tp"), None)), Spmd(spec=PS(("tp", "dp"), None))),
        (Spmd(spec=PS("dp", "tp")), Spmd(spec=PS("tp", "dp"))),
        (Spmd(spec=PS(("dp", "tp"), None)), Spmd(spec=PS("tp", None))),
        (Spmd(spec=PS(None, None), dp=P, tp=P), Spmd(spec=PS("tp", "dp"))),
        (Spmd(spec=PS("tp", None), dp=P), Spmd(spec=PS(None, ("tp", "dp")))),
    ]:
        plan = _check_pair(src, dst, (6, 12), mesh)
        assert plan is not None


# -- the per-axis form ------------------------------------------------------------------


def test_per_axis_form_converts_when_unambiguous() -> None:
    a = plan_redistribute(Spmd(dp=S(0), tp=S(1)), Spmd(dp=R, tp=R), (8, 8), MESH_2x2)
    b = plan_redistribute(Spmd(spec=PS("dp", "tp")), Spmd(spec=PS(None, None)), (8, 8), MESH_2x2)
    assert a == b
    c = plan_redistribute(Spmd(dp=P, tp=S(-1)), Spmd(dp=R, tp=S(0)), (8, 8), MESH_2x2)
    assert c.src == Spmd(spec=PS(None, "tp"), dp=P)
    assert c.dst == Spmd(spec=PS("tp", None))


@pytest.mark.parametrize(
    "src, words",
    [
        (Spmd(dp=S(0), tp=S(0)), ["'dp'", "'tp'", "dim 0", "PartitionSpec"]),
        (Spmd(tp=S(0)), ["does not name axis 'dp'"]),
        (Spmd(dp=V, tp=R), ["'dp'", "V", "no global layout"]),
        (Spmd(spec=PS(None, None), dp=V), ["'dp'", "V"]),
        (Spmd(dp=S(2), tp=R), ["'dp'", "S(2)", "out of range"]),
        (Spmd(spec=PS("ep", None)), ["'ep'", "not a mesh axis"]),
        (Spmd(spec=PS("dp")), ["rank 1", "(8, 8)"]),
    ],
)
def test_rejected_types(src: Spmd, words: List[str]) -> None:
    with pytest.raises(RedistributeError) as info:
        plan_redistribute(src, Spmd(spec=PS(None, None)), (8, 8), MESH_2x2)
    for w in words:
        assert w in str(info.value)


@pytest.mark.parametrize(
    "src, dst, axis, words",
    [
        (Spmd(spec=PS(None, None)), Spmd(spec=PS(None, None), tp=I), "tp", ["R to I", "expert"]),
        (Spmd(spec=PS("tp", None), dp=P), Spmd(spec=PS(None, None), tp=P), "tp", ["S(0) to P"]),
        (Spmd(spec=PS(None, None), dp=I), Spmd(spec=PS(None, None), dp=P), "dp", ["I to P"]),
    ],
)
def test_rejected_transitions_name_axis_and_specs(src, dst, axis, words) -> None:
    with pytest.raises(RedistributeError) as info:
        plan_redistribute(src, dst, (8, 8), MESH_2x2)
    msg = str(info.value)
    assert f"axis {axis!r}" in msg and str(src) in msg and str(dst) in msg
    for w in words:
        assert w in msg
    assert isinstance(info.value, CollectiveError)


def test_indivisible_shapes_are_rejected() -> None:
    with pytest.raises(RedistributeError, match=r"dim 0 has size 6, not divisible by 4"):
        plan_redistribute(Spmd(spec=PS(("dp", "tp"), None)), Spmd(spec=PS(None, None)), (6, 4), MESH_2x2)
    with pytest.raises(RedistributeError, match=r"dim 1 has size 3, not divisible by 2"):
        plan_redistribute(Spmd(spec=PS("dp", None)), Spmd(spec=PS("dp", "tp")), (4, 3), MESH_2x2)


def test_bad_mesh_and_shape_arguments() -> None:
    t = Spmd(spec=PS(None))
    with pytest.raises(RedistributeError, match="mesh maps"):
        plan_redistribute(t, t, (4,), {"dp": 0})
    with pytest.raises(RedistributeError, match="shape"):
        plan_redistribute(t, t, 4, MESH_2x2)  # type: ignore[arg-type]
    with pytest.raises(RedistributeError, match="src must be an Spmd"):
        plan_redistribute({"dp": S(0)}, t, (4,), MESH_2x2)  # type: ignore[arg-type]


# -- plan properties --------------------------------------------------------------------


def test_identity_plans_nothing() -> None:
    t = Spmd(spec=PS("dp", None), tp=P)
    plan = plan_redistribute(t, t, (4, 4), MESH_2x2)
    assert plan.steps == () and plan.max_recv_elements == 0 and plan.collectives == 0
    assert "no steps" in plan.text()


def test_local_moves_communicate_nothing() -> None:
    plan = plan_redistribute(Spmd(spec=PS(None, None), dp=I), Spmd(spec=PS("dp", "tp")), (4, 4), MESH_2x2)
    assert [s.op for s in plan.steps] == ["convert", "convert"]
    assert plan.collectives == 0 and plan.max_recv_elements == 0


def test_slices_come_before_reductions() -> None:
    """[P@dp, R@tp] -> [R, S0@tp]: slice on tp first, then all-reduce the smaller half."""
    plan = plan_redistribute(Spmd(spec=PS(None, None), dp=P), Spmd(spec=PS("tp", None)), (8, 8), MESH_2x2)
    assert [s.op for s in plan.steps] == ["convert", "all_reduce"]
    assert plan.volume == Fraction(1, 2)  # 2 (g-1)/g of N/2


def test_text_and_repr_are_readable() -> None:
    plan = plan_redistribute(TABLE[0][2], TABLE[0][3], (64, 64), MESH_2x2)
    text = plan.text()
    assert "all_gather over (dp, tp)" in text
    assert "dp S(0)->R, tp S(1)->R" in text
    assert "3/4 N" in text and "1 collective" in text
    assert str(plan) == text
    assert repr(plan).startswith("RedistPlan(spec=(dp, tp) -> spec=(None, None)")
    assert "max_recv_elements=3072" in repr(plan)
    step = plan.steps[0]
    assert "all_gather" in repr(step) and "recv 3072" in repr(step)
    swap = plan_redistribute(TABLE[2][2], TABLE[2][3], (64, 64), MESH_2x2)
    assert any("2 of 4 devices receive" in n for n in swap.notes)


def test_plan_is_immutable_and_cached() -> None:
    plan = plan_redistribute(TABLE[0][2], TABLE[0][3], (64, 64), MESH_2x2)
    with pytest.raises(AttributeError):
        plan.steps = ()  # type: ignore[misc]
    assert plan_redistribute(TABLE[0][2], TABLE[0][3], [64, 64], dict(MESH_2x2)) is plan


def test_flat_types() -> None:
    rs = plan_redistribute(TABLE[6][2], TABLE[6][3], (8, 8), MESH_2x2).steps[0]
    assert rs.flat_types() == (P, S(0))
    a2a = plan_redistribute(TABLE[1][2], TABLE[1][3], (8, 8), MESH_2x2).steps[0]
    assert a2a.flat_types() == (S(0), S(1))
    stacked = plan_redistribute(TABLE[0][2], TABLE[0][3], (8, 8), MESH_2x2).steps[0]
    assert stacked.flat_types() is None
    # The same axes out of mesh order on one dim: stacked as well.
    out_of_order = plan_redistribute(
        Spmd(spec=PS(("tp", "dp"), None)), Spmd(spec=PS(None, None)), (8, 8), MESH_2x2
    ).steps[0]
    assert out_of_order.op == "all_gather" and out_of_order.flat_types() is None


# -- the backward plan ------------------------------------------------------------------

_BACKWARD_OP = {
    "all_gather": {"reduce_scatter", "convert"},
    "reduce_scatter": {"all_gather"},
    "all_reduce": {"all_reduce", "reinterpret"},
    "all_to_all": {"all_to_all"},
    "permute": {"permute"},
    "exchange": {"exchange", "permute"},
    "convert": {"convert", "all_gather", "all_reduce"},
}


@pytest.mark.parametrize("row", TABLE, ids=_row_id)
def test_backward_is_the_gradient_plan_reversed(row: Row) -> None:
    _, mesh, src, dst, _, _ = row
    plan = plan_redistribute(src, dst, (32, 32), mesh)
    back = plan.backward()
    assert back.src == grad_spmd(plan.dst, mesh) and back.dst == grad_spmd(plan.src, mesh)
    assert len(back.steps) == len(plan.steps)
    for f, b in zip(reversed(plan.steps), back.steps):
        assert b.op in _BACKWARD_OP[f.op], (f, b)
        assert b.axes == f.axes
        assert b.src == grad_spmd(f.dst, mesh) and b.dst == grad_spmd(f.src, mesh)
    twice = back.backward()
    assert (twice.src, twice.dst, twice.steps) == (plan.src, plan.dst, plan.steps)


def test_backward_volumes() -> None:
    # all_gather forward, reduce_scatter backward: (g-1)/g of the gathered size.
    ag = plan_redistribute(TABLE[0][2], TABLE[0][3], (64, 64), MESH_2x2).backward()
    assert [s.op for s in ag.steps] == ["reduce_scatter"] and ag.volume == Fraction(3, 4)
    # An exchange with duplication: its backward sends every copy's gradient home.
    ex = plan_redistribute(TABLE[4][2], TABLE[4][3], (64, 64), MESH_2x2)
    assert ex.backward().volume == Fraction(1, 2)


def test_grad_spmd() -> None:
    assert grad_spmd(Spmd(spec=PS("dp", None)), MESH_2x2) == Spmd(spec=PS("dp", None), tp=P)
    assert grad_spmd(Spmd(spec=PS(None), dp=P, tp=I), MESH_2x2) == Spmd(spec=PS(None), tp=I)


# -- exchange pieces ----------------------------------------------------------------------


def test_exchange_pieces_of_the_2x2_swap() -> None:
    src, dst = Spmd(spec=PS("dp", "tp")), Spmd(spec=PS("tp", "dp"))
    pieces = exchange_pieces(src, dst, ("dp", "tp"), (4, 4), (("dp", 2), ("tp", 2)))
    moves = sorted((p.sender, p.receiver) for p in pieces if p.sender != p.receiver)
    assert moves == [(1, 2), (2, 1)]
    assert all(p.src_box == ((0, 2), (0, 2)) == p.dst_box for p in pieces)


def test_shapes() -> None:
    t = Spmd(spec=PS(("dp", "tp"), None))
    assert local_shape(t, (8, 3), MESH_2x2) == (2, 3)
    assert global_shape(t, (2, 3), MESH_2x2) == (8, 3)
    assert global_shape(Spmd(dp=S(1), tp=R), (2, 3), MESH_2x2) == (2, 6)
