"""Sub-axes at runtime, on 4 real gloo ranks (mesh x=4): a sub-axis x:(m)k is the
sub-group of x's ranks that differ only in that digit of their x coordinate.

The same redistribute cases also run on 4 simulated ranks in this process; the
per-axis collectives on a sub-axis also run under torch.compile(fullgraph=True).
Checked against full tensors on one process, written here without the package:
the per-rank inputs are cut from a random full tensor by the src type (a device
with x coordinate c has digit (c // (4 // (m*k))) % k along x:(m)k; Partial
axes get random addends that sum to the full tensor); the outputs must
reassemble by the dst type to the same tensor, replicas agreeing, and the input
gradients by the gradient type of src to the full output gradient.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import pytest
import torch
from torch import Tensor

import spmd_mypy as spmd
from gloo_harness import GlooRun, checked_run, float64_of, plain
from spmd_mypy import P, PartitionSpec, R, S, Spmd
from spmd_mypy.vocab import parse_spmd

PS = PartitionSpec
N = 4  # ranks, all on axis x
WORLD = N


def digit(a: str, c: int) -> Tuple[int, int]:
    """(size, this device's coordinate) along axis x or a sub-axis x:(m)k."""
    if ":" not in a:  # the whole axis
        return N, c
    pre, size = int(a[a.index("(") + 1 : a.index(")")]), int(a[a.index(")") + 1 :])
    return size, (c // (N // (pre * size))) % size


# A layout: the axes of each dim, and the axes (or sub-axes) the value is a pending sum over.
Layout = Tuple[Tuple[Tuple[str, ...], ...], Tuple[str, ...]]


def box(dims: Sequence[Tuple[str, ...]], shape: Sequence[int], c: int) -> Tuple[slice, ...]:
    out = []
    for j, axes in enumerate(dims):
        block, parts = 0, 1
        for a in axes:
            size, d = digit(a, c)
            block, parts = block * size + d, parts * size
        n = shape[j] // parts
        out.append(slice(block * n, (block + 1) * n))
    return tuple(out)


def values(tag: str, shape: Sequence[int]) -> Tensor:
    gen = torch.Generator().manual_seed(zlib.crc32(tag.encode()))
    return torch.randint(-9, 10, tuple(shape), generator=gen).to(torch.float64)


def _partial_key(partial: Sequence[str], c: int) -> Tuple[int, ...]:
    return tuple(digit(a, c)[1] for a in partial)


def distribute(full: Tensor, lay: Layout, tag: str) -> Dict[int, Tensor]:
    dims, partial = lay
    keys = sorted({_partial_key(partial, c) for c in range(N)})
    out = {}
    for c in range(N):
        b = box(dims, full.shape, c)
        k = _partial_key(partial, c)
        where = tuple((s.start, s.stop) for s in b)
        if any(k):
            out[c] = values(f"{tag}|{where}|{k}", full[b].shape)
        else:  # the first addend takes the rest
            rest = sum((values(f"{tag}|{where}|{q}", full[b].shape) for q in keys if any(q)), torch.zeros(full[b].shape, dtype=torch.float64))
            out[c] = full[b] - rest
    return out


def assemble(locals_: Mapping[int, Tensor], lay: Layout, shape: Sequence[int]) -> Tensor:
    dims, partial = lay
    full = torch.zeros(tuple(shape), dtype=torch.float64)
    seen: Dict[Any, Tensor] = {}
    for c, t in sorted(locals_.items()):
        b = box(dims, shape, c)
        assert tuple(t.shape) == tuple(full[b].shape), f"rank {c}: local shape {tuple(t.shape)}"
        key = (tuple((s.start, s.stop) for s in b), _partial_key(partial, c))
        if key in seen:  # a replica: the same tensor
            assert torch.equal(seen[key], t), f"rank {c} differs from its replica"
            continue
        seen[key] = t
        full[b] += t
    return full


@dataclass(frozen=True)
class Case:
    id: str
    src: Spmd
    dst: Spmd
    src_lay: Layout  # written by hand from the types
    dst_lay: Layout
    src_grad: Layout  # R <-> P on every axis or part not in the dims
    dst_grad: Layout
    shape: Tuple[int, ...]


H1, H2 = "x:(1)2", "x:(2)2"
SPLIT: Tuple[Tuple[str, ...], ...] = ((H1,), (H2,))
CASES: List[Case] = [
    # what a view of [8@x] as (2, 4)-like blocks leaves, gathered back to rows on x
    Case("split->rows", Spmd(spec=PS(H1, H2)), Spmd(spec=PS("x", None)),
         (SPLIT, ()), ((("x",), ()), ()), (SPLIT, ()), ((("x",), ()), ()), (8, 4)),
    Case("split->R", Spmd(spec=PS(H1, H2)), Spmd(spec=PS(None, None)),
         (SPLIT, ()), (((), ()), ()), (SPLIT, ()), (((), ()), ("x",)), (4, 4)),
    Case("P->split", Spmd(spec=PS(None, None), x=P), Spmd(spec=PS(H1, H2)),
         (((), ()), ("x",)), (SPLIT, ()), (((), ()), ()), (SPLIT, ()), (4, 6)),
    Case("minor-major->rows", Spmd(spec=PS(H2, H1)), Spmd(spec=PS("x", None)),
         (((H2,), (H1,)), ()), ((("x",), ()), ()), (((H2,), (H1,)), ()), ((("x",), ()), ()), (8, 2)),
    Case("rows->major half", Spmd(spec=PS("x", None)), Spmd(spec=PS(H1, None)),
         ((("x",), ()), ()), (((H1,), ()), ()), ((("x",), ()), ()), (((H1,), ()), (H2,)), (8, 3)),
    Case("major half->rows", Spmd(spec=PS(H1, None)), Spmd(spec=PS("x", None)),
         (((H1,), ()), ()), ((("x",), ()), ()), (((H1,), ()), (H2,)), ((("x",), ()), ()), (8, 3)),
]


def _renamed(case: Case, axis: str) -> Case:
    """The case on a mesh whose one axis is named `axis` instead of x."""

    def lay(layout: Layout) -> Layout:
        dims, partial = layout
        return tuple(tuple(a.replace("x", axis) for a in d) for d in dims), tuple(a.replace("x", axis) for a in partial)

    def typ(t: Spmd) -> Spmd:
        return parse_spmd(str(t).replace("x", axis))

    return Case(case.id, typ(case.src), typ(case.dst), lay(case.src_lay), lay(case.dst_lay),
                lay(case.src_grad), lay(case.dst_grad), case.shape)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_redistribute_with_sub_axes_on_simulated_ranks(sim: Any, case: Case) -> None:
    """The same cases on 4 simulated ranks in this process (the 1-d mesh w=4)."""
    from torch.distributed._local_tensor import LocalTensorMode

    c = _renamed(case, "w")
    xs = distribute(values(c.id, c.shape), c.src_lay, c.id)
    gs = distribute(values(c.id + "|g", c.shape), c.dst_grad, c.id + "|g")
    with LocalTensorMode(N) as mode, spmd.set_mesh(sim.meshes["1d"]):
        x = mode.rank_map(lambda r: xs[r].clone()).requires_grad_()
        y = spmd.redistribute(x, src=c.src, dst=c.dst)
        y.backward(mode.rank_map(lambda r: gs[r].clone()))
        assert x.grad is not None
        ys = {r: y._local_tensors[r].detach().clone() for r in range(N)}
        gxs = {r: x.grad._local_tensors[r].clone() for r in range(N)}
    torch.testing.assert_close(assemble(ys, c.dst_lay, c.shape), values(c.id, c.shape), rtol=0, atol=0)
    torch.testing.assert_close(assemble(gxs, c.src_grad, c.shape), values(c.id + "|g", c.shape), rtol=0, atol=0)


def test_cases_plan_on_the_split_mesh() -> None:
    """The cases need more than one runner form, each over a sub-axis group."""
    ops = set()
    for case in CASES:
        plan = spmd.plan_redistribute(case.src, case.dst, case.shape, {"x": N})
        ops |= {s.op for s in plan.steps}
        assert plan.mesh == ((H1, 2), (H2, 2)) and plan.base_mesh == (("x", N),)
    assert {"all_to_all", "all_gather", "reduce_scatter", "convert"} <= ops


def test_reference_round_trip() -> None:
    for case in CASES:
        full = values(case.id, case.shape)
        for lay in (case.src_lay, case.dst_lay, case.src_grad, case.dst_grad):
            assert torch.equal(assemble(distribute(full, lay, "t"), lay, case.shape), full)


# -- per-axis collectives on a sub-axis ----------------------------------------------

COLLECTIVES = ["all_gather x:(2)2", "all_reduce x:(1)2", "reduce_scatter x:(2)2", "all_to_all x:(2)2"]
C_SHAPE = (4, 8)


def _collective(name: str, rank: int) -> Tuple[Tensor, Tensor, Layout, Layout]:
    """(input, output gradient, input layout, output layout) for this rank."""
    full = values(name, C_SHAPE)
    g = values(name + "|g", C_SHAPE)
    if name.startswith("all_gather"):  # [x:(1)2, x:(2)2] -> [x:(1)2, R]
        src, dst = (SPLIT, ()), (((H1,), ()), ())
        gdst = (((H1,), ()), (H2,))
    elif name.startswith("all_reduce"):  # P over x:(1)2 -> R, dim 1 on x:(2)2
        src, dst = (((), (H2,)), (H1,)), (((), (H2,)), ())
        gdst = src
    elif name.startswith("reduce_scatter"):  # P over x:(2)2 -> S(1) there, dim 0 on x:(1)2
        src, dst = (((H1,), ()), (H2,)), (SPLIT, ())
        gdst = dst
    else:  # all_to_all S(1) -> S(0) over x:(2)2, dim 0 already on x:(1)2
        src, dst = (SPLIT, ()), (((H1, H2), ()), ())
        gdst = dst
    return distribute(full, src, name)[rank], distribute(g, gdst, name + "|g")[rank], src, dst


def _run_collective(name: str, x: Tensor) -> Tensor:
    if name.startswith("all_gather"):
        return spmd.all_gather(x, H2, src=S(1), dst=R)
    if name.startswith("all_reduce"):
        return spmd.all_reduce(x, H1, src=P, dst=R)
    if name.startswith("reduce_scatter"):
        return spmd.reduce_scatter(x, H2, src=P, dst=S(1))
    return spmd.all_to_all(x, H2, src=S(1), dst=S(0))


# -- the gloo run ----------------------------------------------------------------------


COMPILED = "compiled "  # the same collective under torch.compile(fullgraph=True)


def _items() -> List[Any]:
    return list(CASES) + [_Named(n) for n in COLLECTIVES] + [_Named(COMPILED + n) for n in COLLECTIVES]


@dataclass(frozen=True)
class _Named:
    id: str


def _setup(rank: int) -> Tuple[Any, None]:
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (N,), mesh_dim_names=("x",)), None


def _run(item: Any, rank: int, mesh: Any) -> Tuple[Any, Any]:
    if isinstance(item, Case):
        full = values(item.id, item.shape)
        x = distribute(full, item.src_lay, item.id)[rank].clone().requires_grad_()
        g = distribute(values(item.id + "|g", item.shape), item.dst_grad, item.id + "|g")[rank]
        with spmd.set_mesh(mesh):
            y = spmd.redistribute(x, src=item.src, dst=item.dst)
    else:
        name = item.id[len(COMPILED):] if item.id.startswith(COMPILED) else item.id
        x0, g, _, _ = _collective(name, rank)
        x = x0.clone().requires_grad_()
        fn = lambda t: _run_collective(name, t)  # noqa: E731
        if item.id.startswith(COMPILED):
            from spmd_mypy.runtime.mesh import prepare_axes

            prepare_axes(mesh, (H1,), (H2,))  # the sub-axis groups are made outside the trace
            torch._dynamo.reset()
            fn = torch.compile(fn, fullgraph=True, backend="aot_eager")
        with spmd.set_mesh(mesh):
            y = fn(x)
    with spmd.set_mesh(mesh):
        y.backward(g.clone())
    assert x.grad is not None
    return plain(y), plain(x.grad)


@pytest.fixture(scope="module")
def gloo_run() -> GlooRun:
    return checked_run(_setup, _run, _items, world=WORLD, deadline_s=180.0, timeout_s=60)


@pytest.mark.gloo
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_redistribute_with_sub_axes_on_gloo(gloo_run: GlooRun, case: Case) -> None:
    per_rank = gloo_run.per_rank(case.id)
    ys = {r: float64_of(per_rank[r][0]) for r in range(N)}
    gxs = {r: float64_of(per_rank[r][1]) for r in range(N)}
    got = assemble(ys, case.dst_lay, case.shape)
    torch.testing.assert_close(got, values(case.id, case.shape), rtol=0, atol=0)
    gx = assemble(gxs, case.src_grad, case.shape)
    torch.testing.assert_close(gx, values(case.id + "|g", case.shape), rtol=0, atol=0)


@pytest.mark.gloo
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("name", COLLECTIVES)
def test_collective_on_a_sub_axis_on_gloo(gloo_run: GlooRun, name: str, compiled: bool) -> None:
    """Eager, and under torch.compile(fullgraph=True) (aot_eager: the forward and
    backward graphs through AOTAutograd, the sub-axis group made beforehand)."""
    per_rank = gloo_run.per_rank(COMPILED + name if compiled else name)
    _, _, src, dst = _collective(name, 0)
    gsrc = {"all_gather": src, "all_reduce": (src[0], ()), "reduce_scatter": (src[0], ()), "all_to_all": src}[
        name.split()[0]
    ]
    ys = {r: float64_of(per_rank[r][0]) for r in range(N)}
    gxs = {r: float64_of(per_rank[r][1]) for r in range(N)}
    torch.testing.assert_close(assemble(ys, dst, C_SHAPE), values(name, C_SHAPE), rtol=0, atol=0)
    torch.testing.assert_close(assemble(gxs, gsrc, C_SHAPE), values(name + "|g", C_SHAPE), rtol=0, atol=0)
    # a sub-axis group has 2 ranks: the gathered dim doubles, the scattered one halves
    y0 = ys[0]
    if name.startswith("all_gather"):
        assert y0.shape == (2, 8)
    if name.startswith("reduce_scatter"):
        assert y0.shape == (2, 4)
