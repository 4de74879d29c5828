"""Partitioned shards (seed 004) on real gloo ranks: every conversion, forward and backward.

Two spawns (tests/gloo_harness.py): 2 ranks with the seed's worked example
(rank 0's slices [4, 6, 4, 2], rank 1's [2, 4, 8, 2]) and 4 ranks with random
splits, empty partitions and an empty rank among them.  Each item builds a
full tensor X on every rank (the same seed), hands each rank its pieces in
the source layout, converts, and backpropagates a per-rank random gradient
of the output.  The reference is computed here, in one process, from X and
the gradients alone: which rows of X each layout puts on each rank
(partition-major full order, rank-minor), the output rows, and the input
gradient autograd must produce (dst R: the sum over ranks of their
gradients, taken at the input's rows; dst I: the rank's own; src R: the
rank's gradient placed at its rows, zeros elsewhere, a Partial).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

import pytest
import torch

from gloo_harness import GlooRun, gloo_available, plain, spawn_and_collect, tensor_of
from spmd_mypy.vocab.partitioned import aligned_layout, aligned_splits, full_layout, unaligned_layout

pytestmark = pytest.mark.gloo

H = 3  # trailing dim of every tensor (rows are dim 0, or dim 1 after a transpose)
SEED_EXAMPLE = [[4, 6, 4, 2], [2, 4, 8, 2]]

# function -> (src layout, dst layout, dst/src type)
CONVERSIONS = {
    "unaligned_to_aligned": ("PS", "PSA", None),
    "aligned_to_unaligned": ("PSA", "PS", None),
    "unaligned_to_replicate": ("PS", "R", "R"),
    "aligned_to_replicate": ("PSA", "R", "R"),
    "unaligned_to_invariant": ("PS", "R", "I"),
    "aligned_to_invariant": ("PSA", "R", "I"),
    "replicate_to_unaligned": ("R", "PS", "R"),
    "replicate_to_aligned": ("R", "PSA", "R"),
}


@dataclass(frozen=True)
class Item:
    id: str
    conv: str
    M: Tuple[Tuple[int, ...], ...]
    seed: int
    dim: int = 0


def _random_matrix(rng: random.Random, n: int) -> Tuple[Tuple[int, ...], ...]:
    k = n * rng.choice([1, 2, 3])
    M = [[rng.choice([0, 0, 1, 2, 3, 5]) for _ in range(k)] for _ in range(n)]
    if rng.random() < 0.5:
        M[rng.randrange(n)] = [0] * k  # a rank with no rows at all
    return tuple(tuple(r) for r in M)


def _items_for(world: int) -> List[Item]:
    out: List[Item] = []
    if world == 2:
        M = tuple(tuple(r) for r in SEED_EXAMPLE)
        for conv in CONVERSIONS:
            out.append(Item(f"seed.{conv}", conv, M, 1))
        out.append(Item("seed.unaligned_to_aligned.dim1", "unaligned_to_aligned", M, 2, dim=1))
        out.append(Item("seed.roundtrip", "roundtrip", M, 3))
        return out
    rng = random.Random(20261124)
    for trial in range(3):
        for conv in CONVERSIONS:
            out.append(Item(f"random{trial}.{conv}", conv, _random_matrix(rng, world), 10 + trial))
    out.append(Item("random.roundtrip", "roundtrip", _random_matrix(rng, world), 40))
    out.append(Item("random.aligned_to_replicate.dim1", "aligned_to_replicate", _random_matrix(rng, world), 41, dim=1))
    return out


def _items2() -> List[Item]:
    return _items_for(2)


def _items4() -> List[Item]:
    return _items_for(4)


# -- the single-process reference --------------------------------------------------------


def _rows(M: Sequence[Sequence[int]], pieces: Sequence[Tuple[int, int]]) -> List[int]:
    start: Dict[Tuple[int, int], int] = {}
    acc = 0
    for piece in full_layout(M):
        start[piece] = acc
        acc += M[piece[0]][piece[1]]
    return [start[(s, p)] + e for s, p in pieces for e in range(M[s][p])]


def _layout(M: Sequence[Sequence[int]], name: str, r: int) -> List[Tuple[int, int]]:
    return {"PS": unaligned_layout, "PSA": aligned_layout, "R": lambda M, r: full_layout(M)}[name](M, r)


def _full(item: Item) -> torch.Tensor:
    g = torch.Generator().manual_seed(item.seed)
    return torch.randn(sum(map(sum, item.M)), H, generator=g, dtype=torch.float64)


def _grad_out(item: Item, rank: int, rows: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * item.seed + rank)
    return torch.randn(rows, H, generator=g, dtype=torch.float64)


def _splits_of(M: Sequence[Sequence[int]], layout: str, r: int) -> Any:
    if layout == "PS":
        return list(M[r])
    if layout == "PSA":
        return aligned_splits(M, r)
    return [list(row) for row in M]


# -- one rank ------------------------------------------------------------------------------


def _setup(rank: int) -> Tuple[Any, Any]:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("ep",))
    return mesh, None


def _convert(conv: str, x: torch.Tensor, splits: Any, dim: int) -> Tuple[torch.Tensor, Any]:
    from spmd_mypy import I, R
    from spmd_mypy.runtime import partitioned as part

    if conv == "roundtrip":  # PS -> PSA -> PS: the identity
        y, a = part.unaligned_to_aligned(x, "ep", splits, dim=dim)
        return part.aligned_to_unaligned(y, "ep", a, dim=dim)
    if conv.endswith("_to_invariant"):
        fn = getattr(part, conv.replace("_to_invariant", "_to_replicate"))
        return fn(x, "ep", splits, dim=dim, dst=I)
    if conv.startswith("replicate_to_"):
        return getattr(part, conv)(x, "ep", splits, dim=dim, src=R)
    return getattr(part, conv)(x, "ep", splits, dim=dim)


def _run_item(item: Item, rank: int, mesh: Any) -> Any:
    import spmd_mypy as spmd

    src, dst, _ = CONVERSIONS.get(item.conv, ("PS", "PS", None))
    X = _full(item)
    x = X[_rows(item.M, _layout(item.M, src, rank))].clone()
    if item.dim == 1:
        x = x.t().contiguous()
    x.requires_grad_(True)
    with spmd.set_mesh(mesh):
        y, splits = _convert(item.conv, x, _splits_of(item.M, src, rank), item.dim)
    y0 = y.t() if item.dim == 1 else y
    (y0 * _grad_out(item, rank, y0.shape[0])).sum().backward()
    g = x.grad.t() if item.dim == 1 else x.grad
    return {"y": plain(y0), "splits": splits, "grad": plain(g)}


def _expected(item: Item, world: int) -> Dict[int, Dict[str, Any]]:
    src, dst, typ = CONVERSIONS.get(item.conv, ("PS", "PS", None))
    M, X = item.M, _full(item)
    out_rows = {r: _rows(M, _layout(M, dst, r)) for r in range(world)}
    G = {r: _grad_out(item, r, len(out_rows[r])) for r in range(world)}
    total = torch.zeros_like(X)
    for r in range(world):
        total.index_add_(0, torch.tensor(out_rows[r], dtype=torch.long), G[r])
    want = {}
    for r in range(world):
        in_rows = _rows(M, _layout(M, src, r))
        if typ == "I":
            grad = G[r][in_rows]
        elif src == "R":
            grad = torch.zeros_like(X)
            grad[out_rows[r]] = G[r]
        else:
            grad = total[in_rows]
        splits = _splits_of(M, dst, r)
        want[r] = {"y": X[out_rows[r]], "splits": splits, "grad": grad}
    return want


def _check(run: GlooRun, world: int, items: List[Item]) -> None:
    for item in items:
        want = _expected(item, world)
        for rank, got in sorted(run.per_rank(item.id).items()):
            w = want[rank]
            assert got["splits"] == w["splits"], (item.id, rank)
            torch.testing.assert_close(tensor_of(got["y"]), w["y"], rtol=0, atol=0, msg=f"{item.id} rank {rank} forward")
            torch.testing.assert_close(tensor_of(got["grad"]), w["grad"], rtol=1e-12, atol=1e-12,
                                       msg=f"{item.id} rank {rank} backward")


@pytest.fixture(scope="module")
def run2() -> GlooRun:
    if not gloo_available():
        pytest.skip("this torch has no gloo backend")
    return spawn_and_collect(_setup, _run_item, _items2, world=2, deadline_s=300.0, timeout_s=120.0)


@pytest.fixture(scope="module")
def run4() -> GlooRun:
    if not gloo_available():
        pytest.skip("this torch has no gloo backend")
    return spawn_and_collect(_setup, _run_item, _items4, world=4, deadline_s=300.0, timeout_s=120.0)


def test_seed_worked_example(run2: GlooRun) -> None:
    _check(run2, 2, _items2())
    # The seed's own numbers: aligned splits [4, 2, 6, 4] and [4, 8, 2, 2].
    got = run2.per_rank("seed.unaligned_to_aligned")
    assert got[0]["splits"] == [4, 2, 6, 4] and got[1]["splits"] == [4, 8, 2, 2]


def test_random_splits_with_empty_partitions(run4: GlooRun) -> None:
    items = _items4()
    assert any(0 in row for it in items for row in it.M)  # empty partitions occur
    assert any(sum(row) == 0 for it in items for row in it.M)  # and a rank with nothing
    _check(run4, 4, items)
