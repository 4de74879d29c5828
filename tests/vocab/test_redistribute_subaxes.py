"""The spec-level redistribute planner on types with sub-axes ("x":(m)k).

The planner splits the mesh at the sub-axes and plans on whole axes; here the
plans are checked against a geometry written on the mesh as given: a device's
tile uses the sub-axis digit of its coordinate (x:(m)k is digit k of the
mixed radix [m, k, n/(m*k)]), and the lower bound is what a device needs and
does not hold, by brute force.  Each plan also runs on the simulator of
test_redistribute_plan.py (on the split mesh, where it starts from the same
tiles), which checks every step and the final value.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import List, Mapping, Sequence, Set, Tuple

import pytest

from spmd_mypy import P, PartitionSpec, Spmd
from spmd_mypy.vocab.redistribute_plan import RedistributeError, grad_spmd, local_shape, plan_redistribute

from test_redistribute_plan import devices, simulate  # the independent simulator

PS = PartitionSpec
Elem = Tuple[int, ...]


def _size_and_digit(a: str, mesh: Mapping[str, int], c: Mapping[str, int]) -> Tuple[int, int]:
    if a in mesh:  # a whole axis (on the split mesh, each part is one)
        return mesh[a], c[a]
    name, rest = a.split(":")
    pre, size = int(rest[1 : rest.index(")")]), int(rest[rest.index(")") + 1 :])
    return size, (c[name] // (mesh[name] // (pre * size))) % size


def tile(spmd: Spmd, shape: Sequence[int], mesh: Mapping[str, int], c: Mapping[str, int]) -> Set[Elem]:
    assert spmd.spec is not None
    ranges = []
    for j, axes in enumerate(spmd.spec.dims):
        block, parts = 0, 1
        for a in axes:
            size, digit = _size_and_digit(a, mesh, c)
            block, parts = block * size + digit, parts * size
        n = shape[j] // parts
        ranges.append(range(block * n, (block + 1) * n))
    return set(itertools.product(*ranges))


def needs_and_lacks(src: Spmd, dst: Spmd, shape: Sequence[int], mesh: Mapping[str, int]) -> int:
    return max(len(tile(dst, shape, mesh, c) - tile(src, shape, mesh, c)) for c in devices(mesh))


X4 = {"x": 4}
X4Y2 = {"x": 4, "y": 2}
X8 = {"x": 8}
M48 = {"dp": 4, "tp": 8}
SHAPE = (16, 16)

# (name, mesh, src, dst, bound in units of N): layout moves at their brute-force bound,
# reductions at (g-1)/g (reduce-scatter) or 2(g-1)/g (all-reduce) of the local size.
Row = Tuple[str, Mapping[str, int], Spmd, Spmd, Fraction]
TABLE: List[Row] = [
    ("x=4 [x:(1)2, x:(2)2] -> [x, R]", X4, Spmd(spec=PS("x:(1)2", "x:(2)2")), Spmd(spec=PS("x", None)),
     Fraction(1, 8)),
    ("x=4 [x:(1)2, x:(2)2] -> R", X4, Spmd(spec=PS("x:(1)2", "x:(2)2")), Spmd(spec=PS(None, None)),
     Fraction(3, 4)),
    ("x=4 [x, R] -> [x:(1)2, x:(2)2]", X4, Spmd(spec=PS("x", None)), Spmd(spec=PS("x:(1)2", "x:(2)2")),
     Fraction(1, 8)),
    # device x=1 holds rows 8..15 and needs rows 4..7: it holds none of what it needs
    ("x=4 [x:(2)2, x:(1)2] -> [x, R]", X4, Spmd(spec=PS("x:(2)2", "x:(1)2")), Spmd(spec=PS("x", None)),
     Fraction(1, 4)),
    ("x=4 [x:(1)2, R] -> [x, R]", X4, Spmd(spec=PS("x:(1)2", None)), Spmd(spec=PS("x", None)),
     Fraction(0)),
    # gathering the minor half of x: a device gets its partner's quarter
    ("x=4 [x, R] -> [x:(1)2, R]", X4, Spmd(spec=PS("x", None)), Spmd(spec=PS("x:(1)2", None)),
     Fraction(1, 4)),
    ("x=4 P@x -> [x:(1)2, x:(2)2]", X4, Spmd(spec=PS(None, None), x=P), Spmd(spec=PS("x:(1)2", "x:(2)2")),
     Fraction(3, 4)),
    ("x=4 [x:(1)2, R] P@x:(2)2 -> [x:(1)2, x:(2)2]", X4, Spmd(spec=PS("x:(1)2", None), **{"x:(2)2": P}),
     Spmd(spec=PS("x:(1)2", "x:(2)2")), Fraction(1, 4)),
    ("x=4,y=2 [(y, x:(2)2), R] -> [x:(1)2, y]", X4Y2, Spmd(spec=PS(("y", "x:(2)2"), None)),
     Spmd(spec=PS("x:(1)2", "y")), Fraction(1, 4)),
    ("x=8 [x:(1)2, x:(2)4] -> [x:(1)4, x:(4)2]", X8, Spmd(spec=PS("x:(1)2", "x:(2)4")),
     Spmd(spec=PS("x:(1)4", "x:(4)2")), Fraction(1, 8)),
    # the sub-axis rows of bench/bench_redistribute.py (dp=4 x tp=8)
    ("4x8 [tp:(1)2, tp:(2)4] -> [tp, R]", M48, Spmd(spec=PS("tp:(1)2", "tp:(2)4")), Spmd(spec=PS("tp", None)),
     Fraction(3, 32)),
    ("4x8 [tp:(1)2, tp:(2)4] -> R", M48, Spmd(spec=PS("tp:(1)2", "tp:(2)4")), Spmd(spec=PS(None, None)),
     Fraction(7, 8)),
    ("4x8 [(dp, tp:(1)2), R] -> [dp, tp:(1)2]", M48, Spmd(spec=PS(("dp", "tp:(1)2"), None)),
     Spmd(spec=PS("dp", "tp:(1)2")), Fraction(1, 16)),
    ("4x8 P@tp -> [tp:(1)2, tp:(2)4]", M48, Spmd(spec=PS(None, None), tp=P),
     Spmd(spec=PS("tp:(1)2", "tp:(2)4")), Fraction(7, 8)),
    ("4x8 [tp:(2)4, dp] -> [dp, tp:(2)4]", M48, Spmd(spec=PS("tp:(2)4", "dp")), Spmd(spec=PS("dp", "tp:(2)4")),
     Fraction(1, 16)),
]


def _id(row: Row) -> str:
    return row[0]


@pytest.mark.parametrize("row", TABLE, ids=_id)
def test_sub_axis_rows_meet_their_bound_with_one_collective(row: Row) -> None:
    _, mesh, src, dst, bound = row
    plan = plan_redistribute(src, dst, SHAPE, mesh)
    assert plan.volume == bound, plan.text()
    assert plan.collectives <= 1, plan.text()
    if "P@" not in row[0]:  # layout moves: the bound is what a device needs and lacks
        assert Fraction(needs_and_lacks(src, dst, SHAPE, mesh), 16 * 16) == bound


@pytest.mark.parametrize("row", TABLE, ids=_id)
def test_sub_axis_plans_simulate_correctly(row: Row) -> None:
    _, mesh, src, dst, _ = row
    plan = plan_redistribute(src, dst, SHAPE, mesh)
    fine = dict(plan.mesh)
    # the split mesh holds the same tiles as the mesh given: device by device
    for c in devices(mesh):
        split = {}
        for a, n in plan.mesh:
            split[a] = _size_and_digit(a, mesh, c)[1]
        assert tile(plan.src, SHAPE, fine, split) == tile(src, SHAPE, mesh, c)
        assert tile(plan.dst, SHAPE, fine, split) == tile(dst, SHAPE, mesh, c)
    assert simulate(plan, fine) == plan.max_recv_elements
    back = plan.backward()  # the gradient's plan, on the same split mesh
    assert back.src == grad_spmd(plan.dst, fine) and back.dst == grad_spmd(plan.src, fine)
    assert [s.axes for s in back.steps] == [s.axes for s in reversed(plan.steps)]
    assert back.base_mesh == plan.base_mesh == tuple(mesh.items())


def _types(parts: Sequence[str], ndim: int) -> List[Spmd]:
    """Every spec-form type with these parts of x as R, P or sharding a dim, in any order."""
    out = []
    for roles in itertools.product(["R", "P"] + [f"S{j}" for j in range(ndim)], repeat=len(parts)):
        per_dim = [[a for a, r in zip(parts, roles) if r == f"S{j}"] for j in range(ndim)]
        for orders in itertools.product(*[list(itertools.permutations(d)) for d in per_dim]):
            other = {a: P for a, r in zip(parts, roles) if r == "P"}
            try:
                out.append(Spmd.of(other, PS(*[o if o else None for o in orders])))
            except ValueError:  # x:(1)2 then x:(2)2 in one dim is written x (below)
                pass
    return out


def test_every_pair_of_split_types_on_x4() -> None:
    """Types over x=4 as a whole axis or as its two halves: every valid pair plans,
    simulates, and every layout move meets the brute-force bound."""
    types = _types(["x:(1)2", "x:(2)2"], 2) + _types(["x"], 2)
    # 16 roles of the two halves (both on one dim: the order x:(2)2, x:(1)2 only, as the
    # other is x) less "both P" (written x=P), and x itself R, P, S0 or S1
    assert len(types) == 19
    planned = 0
    for src, dst in itertools.product(types, types):
        s_letters = {src.axis_type(a) for a in src.axes}
        try:
            plan = plan_redistribute(src, dst, (8, 8), X4)
        except RedistributeError as e:
            # a part sharded in src and P in dst: no value-preserving move (S(i) -> P)
            assert "to P, which is not a redistribution" in str(e), (src, dst, e)
            assert any(a in src.spec.axes for a in dst.axes if dst.axis_type(a) is P) or any(  # type: ignore[union-attr]
                ":" in a and "x" in src.spec.axes for a in dst.axes if dst.axis_type(a) is P  # type: ignore[union-attr]
            ) or ("x" in dst.axes and dst.axis_type("x") is P and src.spec.axes), (src, dst)  # type: ignore[union-attr]
            continue
        planned += 1
        fine = dict(plan.mesh)
        assert simulate(plan, fine) == plan.max_recv_elements, plan.text()
        if P not in s_letters:
            assert plan.max_recv_elements == needs_and_lacks(src, dst, (8, 8), X4), plan.text()
    assert planned > 100


def test_sub_axis_shapes_and_errors() -> None:
    t = Spmd(spec=PS("x:(1)2", "x:(2)2"))
    assert local_shape(t, (8, 8), X4) == (4, 4)
    with pytest.raises(RedistributeError, match="not divisible"):
        plan_redistribute(t, Spmd(spec=PS(None, None)), (3, 8), X4)
    with pytest.raises(RedistributeError, match="do not fit one split"):
        plan_redistribute(Spmd(spec=PS("x:(1)3", None)), t, (6, 8), X4)
    plan = plan_redistribute(t, Spmd(spec=PS("x", None)), (8, 8), X4)
    text = plan.text()
    assert "mesh (x=4) split at the sub-axes" in text
    assert "to   spec=(x, None)" in text  # shown on the mesh given
    assert "all_to_all over x:(2)2" in text


def test_no_sub_axis_keeps_the_mesh() -> None:
    plan = plan_redistribute(Spmd(spec=PS("x", None)), Spmd(spec=PS(None, "x")), (8, 8), X4)
    assert plan.mesh == plan.base_mesh == (("x", 4),)
    assert "split" not in plan.text()
