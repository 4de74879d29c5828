"""The one table of runtime cases, shared by the simulated and the gloo tests.

A case is one call of a public spmd function on a mesh axis of one of two
meshes over 4 ranks:

  "1d"  a 1-D mesh of 4, dim "w"
  "2d"  a 2 x 2 mesh, dims ("dp", "tp"); rank = 2 * dp + tp

Each case builds deterministic float64 per-rank inputs (identical on the
ranks of a group when src is R or I, different otherwise), per-rank output
gradients that respect the gradient type of dst (grad of R is P and of P is
R; I stays I; V and S(i) stay varying), and the expected per-rank outputs and
input gradients, computed by `reference` on the full per-group lists.  A
rejected case instead lists the words its CollectiveError must contain.

The table is plain data plus small functions of (n, c): n is the size of the
case's communicator group and c a rank's coordinate in it.  Spawned workers
import this module and look cases up by id.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

import reference as ref
from spmd_mypy import I, P, R, S, V

WORLD = 4
MESH_SHAPES: Dict[str, Tuple[Tuple[int, ...], Tuple[str, ...]]] = {
    "1d": ((4,), ("w",)),
    "2d": ((2, 2), ("dp", "tp")),
}

Shape = Tuple[int, ...]
ShapeFn = Callable[[int, int], Shape]
KwFn = Callable[[int, int], Dict[str, Any]]


def _no_kwargs(n: int, c: int) -> Dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Case:
    id: str
    mesh: Optional[str]  # "1d", "2d", or None: call without set_mesh
    axis: Any  # a dim name, a tuple of names, or another object (a bad axis)
    op: str
    src: Any
    dst: Any
    shape: ShapeFn  # (n, c) -> this rank's input shape
    kwargs: KwFn = _no_kwargs  # (n, c) -> keyword arguments of the call
    axis_as: str = "name"  # "name": pass axis; "group": the mesh dim's ProcessGroup; "world"
    ref: Optional[Tuple[str, str, str]] = None  # reference primitive; default (op, src, dst)
    ref_sizes: Optional[Callable[[int], Any]] = None  # default: kwargs' split_sizes
    identity: bool = False  # expected to return the input unchanged (no-op coercion)
    error: Optional[Tuple[str, ...]] = None  # words the CollectiveError must contain
    per_rank_kwargs: bool = False  # kwargs differ between ranks (real ranks only)
    tags: Tuple[str, ...] = field(default=())

    def __repr__(self) -> str:
        return f"Case({self.id})"

    @property
    def rejected(self) -> bool:
        return self.error is not None

    @property
    def simulated_ok(self) -> bool:
        """Simulated ranks run one Python call for every rank: kwargs must agree."""
        return not self.per_rank_kwargs


# -- mesh geometry, computed here independently of spmd_mypy --------------------


def _coords(rank: int, shape: Sequence[int]) -> List[int]:
    out = []
    for size in reversed(shape):
        out.append(rank % size)
        rank //= size
    return out[::-1]


def groups(case: Case) -> List[List[int]]:
    """The communicator groups of the case's axis: global ranks in coordinate order."""
    if case.axis_as == "world" or case.mesh is None:
        return [list(range(WORLD))]
    shape, names = MESH_SHAPES[case.mesh]
    axes = case.axis if isinstance(case.axis, tuple) else (case.axis,)
    if not all(a in names for a in axes) or len(set(axes)) != len(axes):
        assert case.rejected, case.id  # a bad axis: one group, for making inputs only
        return [list(range(WORLD))]
    idx = [names.index(a) for a in axes]
    by_key: Dict[Tuple[int, ...], Dict[int, int]] = {}
    for rank in range(WORLD):
        co = _coords(rank, shape)
        key = tuple(co[d] for d in range(len(shape)) if d not in idx)
        c = 0
        for d in idx:
            c = c * shape[d] + co[d]
        by_key.setdefault(key, {})[c] = rank
    return [[m[c] for c in sorted(m)] for _, m in sorted(by_key.items())]


def group_size(case: Case) -> int:
    return len(groups(case)[0])


def placement(case: Case) -> Dict[int, Tuple[int, int]]:
    """rank -> (group index, coordinate in the group)."""
    out = {}
    for g, members in enumerate(groups(case)):
        for c, rank in enumerate(members):
            out[rank] = (g, c)
    return out


# -- deterministic data ----------------------------------------------------------


def _kind(t: Any) -> str:
    return str(t)[0]


def _grad_kind(k: str) -> str:
    return {"R": "P", "P": "R", "I": "I", "V": "V", "S": "S"}[k]


def values(tag: str, shape: Shape) -> Tensor:
    """Non-zero small integers as float64 (sums are exact), seeded by tag."""
    gen = torch.Generator().manual_seed(zlib.crc32(tag.encode()))
    mag = torch.randint(1, 10, shape, generator=gen).to(torch.float64)
    sign = torch.randint(0, 2, shape, generator=gen).to(torch.float64) * 2 - 1
    return mag * sign


def _same_in_group(kind: str) -> bool:
    return kind in ("R", "I")


def inputs(case: Case) -> Dict[int, Tensor]:
    n = group_size(case)
    same = _same_in_group(_kind(case.src))
    out = {}
    for rank, (g, c) in placement(case).items():
        key = f"g{g}" if same else f"g{g}c{c}"
        out[rank] = values(f"{case.id}|x|{key}", tuple(case.shape(n, c)))
    return out


def api_kwargs(case: Case, rank: int) -> Dict[str, Any]:
    n = group_size(case)
    return dict(case.kwargs(n, placement(case)[rank][1]))


def _ref_sizes(case: Case) -> Any:
    n = group_size(case)
    if case.ref_sizes is not None:
        return case.ref_sizes(n)
    return case.kwargs(n, 0).get("split_sizes")


def _ref_key(case: Case) -> Tuple[str, str, str]:
    return case.ref if case.ref is not None else (case.op, str(case.src), str(case.dst))


@dataclass
class Expected:
    inputs: Dict[int, Tensor]
    grads: Dict[int, Tensor]  # output gradients fed to backward
    outputs: Dict[int, Tensor]
    input_grads: Dict[int, Tensor]


def expected(case: Case) -> Expected:
    """Inputs, output gradients, and the reference's outputs and input gradients."""
    assert not case.rejected
    xs = inputs(case)
    sizes = _ref_sizes(case)
    op, src, dst = _ref_key(case)
    outs: Dict[int, Tensor] = {}
    for g, members in enumerate(groups(case)):
        if case.identity:
            ys = [xs[r].clone() for r in members]
        else:
            ys = ref.forward(op, src, dst, [xs[r] for r in members], sizes)
        outs.update(zip(members, ys))
    gkind = _grad_kind(_kind(case.dst))
    grads: Dict[int, Tensor] = {}
    for rank, (g, c) in placement(case).items():
        key = f"g{g}" if _same_in_group(gkind) else f"g{g}c{c}"
        grads[rank] = values(f"{case.id}|dy|{key}", tuple(outs[rank].shape))
    gins: Dict[int, Tensor] = {}
    for g, members in enumerate(groups(case)):
        gs = [grads[r] for r in members]
        if case.identity:
            gx = [t.clone() for t in gs]
        else:
            gx = ref.backward(op, src, dst, gs, xs[members[0]].ndim, sizes)
        gins.update(zip(members, gx))
    return Expected(xs, grads, outs, gins)


def error_words(case: Case) -> Tuple[str, ...]:
    """What the rejection message must name: the op, the axis and both types."""
    assert case.error is not None
    words = [case.op]
    axes = case.axis if isinstance(case.axis, tuple) else (case.axis,)
    words += [repr(a) for a in axes]
    words += [f"src={case.src}", f"dst={case.dst}"]
    return tuple(words) + tuple(case.error)


# -- calling the code under test -------------------------------------------------


def axis_arg(case: Case, meshes: Dict[str, Any]) -> Any:
    """The axis argument to pass: a name/tuple, or a ProcessGroup."""
    if case.axis_as == "name":
        return case.axis
    import torch.distributed as dist

    if case.axis_as == "world":
        return dist.group.WORLD
    assert case.axis_as == "group" and case.mesh is not None
    return meshes[case.mesh].get_group(case.axis)


def call(case: Case, x: Tensor, axis: Any, kwargs: Dict[str, Any]) -> Tensor:
    import spmd_mypy as spmd

    fn = getattr(spmd, case.op)
    return fn(x, axis, src=case.src, dst=case.dst, **kwargs)


def local(t: Tensor, rank: int) -> Tensor:
    """Rank `rank`'s tensor of a LocalTensor (a plain tensor is every rank's)."""
    lt = getattr(t, "_local_tensors", None)
    return t if lt is None else lt[rank]


def check_rejection(exc: BaseException, case: Case) -> None:
    """exc is the CollectiveError the rejected case promises, naming what it must."""
    from spmd_mypy import CollectiveError

    assert isinstance(exc, CollectiveError), f"{case.id}: expected CollectiveError, got {exc!r}"
    msg = str(exc)
    missing = [w for w in error_words(case) if w not in msg]
    assert not missing, f"{case.id}: the message lacks {missing}: {msg!r}"


# -- the table -------------------------------------------------------------------

CASES: List[Case] = []


def _add(case: Case) -> None:
    assert all(c.id != case.id for c in CASES), case.id
    CASES.append(case)


MESH_AXES = [("1d", "w"), ("2d", "dp"), ("2d", "tp")]


def _fixed(*shape: int) -> ShapeFn:
    return lambda n, c: shape


def _uneven(n: int) -> List[int]:
    """Uneven per-rank sizes with a zero-size shard when n == 4."""
    return {2: [3, 1], 4: [2, 0, 3, 1]}[n]


def _uneven_b(n: int) -> List[int]:
    """Other uneven sizes with the same sum as _uneven (for re-splits)."""
    return {2: [1, 3], 4: [1, 3, 0, 2]}[n]


def _uneven_c(n: int) -> List[int]:
    """Uneven sizes whose sum is a multiple of n (an even re-split)."""
    return {2: [3, 1], 4: [3, 0, 4, 1]}[n]


def _kw(**kw: Any) -> KwFn:
    return lambda n, c: dict(kw)


def _expert() -> KwFn:
    return _kw(expert_mode=True)


def _shape_on(dim: int, ndim: int, length: Callable[[int, int], int], base: int = 3) -> ShapeFn:
    """A rank-ndim shape with `base` everywhere except dim, which has length(n, c)."""

    def f(n: int, c: int) -> Shape:
        s = [base - k % 2 for k in range(ndim)]  # e.g. (3, 2, 3)
        s[dim] = length(n, c)
        return tuple(s)

    return f


# 1. Every primitive row on every mesh axis.  S rows use a different shard dim
#    per axis (0, 1, -1) so that positive and negative dims are covered.
_DIMS = {"w": 0, "dp": 1, "tp": -1}


def _primitive_cases() -> None:
    for mesh, axis in MESH_AXES:
        d = _DIMS[axis]
        e = 0 if d != 0 else 1  # a second dim for all_to_all S(d) -> S(e)
        at = f"{mesh}.{axis}"
        rows: List[Tuple[str, Any, Any, ShapeFn, KwFn]] = [
            ("all_gather", V, R, _fixed(2, 3), _no_kwargs),
            ("all_gather", V, I, _fixed(2, 3), _no_kwargs),
            ("all_gather", S(d), R, _fixed(2, 3, 2), _no_kwargs),
            ("all_gather", S(d), I, _fixed(3, 2, 2), _no_kwargs),
            ("all_reduce", P, R, _fixed(3, 2), _no_kwargs),
            ("all_reduce", P, I, _fixed(3, 2), _no_kwargs),
            ("reduce_scatter", P, V, lambda n, c: (n, 3), _no_kwargs),
            ("reduce_scatter", P, S(d), _shape_on(d % 3, 3, lambda n, c: 2 * n), _no_kwargs),
            ("all_to_all", V, V, lambda n, c: (2 * n, 3), _no_kwargs),
            ("all_to_all", S(d), S(e), _shape_on(e, 3, lambda n, c: 2 * n), _no_kwargs),
            ("reinterpret", R, I, _fixed(2, 3), _expert()),
            ("reinterpret", R, V, _fixed(2, 3), _expert()),
            ("reinterpret", R, P, _fixed(2, 3), _expert()),
            ("reinterpret", I, R, _fixed(2, 3), _no_kwargs),
            ("reinterpret", V, P, _fixed(2, 3), _no_kwargs),
            ("convert", R, V, lambda n, c: (n, 3), _no_kwargs),
            ("convert", R, S(d), _shape_on(d % 3, 3, lambda n, c: 2 * n), _no_kwargs),
            ("convert", I, V, lambda n, c: (n, 2, 2), _no_kwargs),
            ("convert", I, S(d), _shape_on(d % 3, 3, lambda n, c: n), _no_kwargs),
            ("convert", R, P, _fixed(2, 3), _no_kwargs),
            ("convert", I, P, _fixed(2, 3), _expert()),
            ("convert", V, P, _fixed(2, 3), _expert()),
            ("convert", S(d), P, _fixed(2, 3, 2), _expert()),
        ]
        for op, src, dst, shape, kw in rows:
            _add(Case(f"prim.{op}.{src}.{dst}.{at}", mesh, axis, op, src, dst, shape, kw,
                      tags=("primitive",)))


# 2. Composites.
def _composite_cases() -> None:
    for mesh, axis in MESH_AXES:
        at = f"{mesh}.{axis}"
        for op, src, dst, kw in [
            ("reinterpret", I, V, _expert()),
            ("reinterpret", I, P, _expert()),
            ("convert", R, I, _expert()),
            ("convert", I, R, _no_kwargs),
        ]:
            _add(Case(f"comp.{op}.{src}.{dst}.{at}", mesh, axis, op, src, dst, _fixed(3, 2), kw,
                      tags=("composite",)))


# 3. redistribute: each route, with the primitive that preserves the value.
def _redistribute_cases() -> None:
    routes: List[Tuple[Any, Any, Optional[Tuple[str, str, str]], ShapeFn, KwFn]] = [
        (S(0), R, ("all_gather", "S(0)", "R"), _fixed(2, 3), _no_kwargs),
        (S(-1), I, ("all_gather", "S(-1)", "I"), _fixed(2, 3), _no_kwargs),
        (V, R, ("all_gather", "V", "R"), _fixed(2, 3), _no_kwargs),
        (V, I, ("all_gather", "V", "I"), _fixed(2, 3), _no_kwargs),
        (P, R, ("all_reduce", "P", "R"), _fixed(2, 3), _no_kwargs),
        (P, I, ("all_reduce", "P", "I"), _fixed(2, 3), _no_kwargs),
        (P, S(1), ("reduce_scatter", "P", "S(1)"), lambda n, c: (3, 2 * n), _no_kwargs),
        (P, V, ("reduce_scatter", "P", "V"), lambda n, c: (n, 3), _no_kwargs),
        (S(0), S(1), ("all_to_all", "S(0)", "S(1)"), lambda n, c: (2, 2 * n), _no_kwargs),
        (R, V, ("convert", "R", "V"), lambda n, c: (n, 3), _no_kwargs),
        (R, S(-1), ("convert", "R", "S(-1)"), lambda n, c: (3, 2 * n), _no_kwargs),
        (I, V, ("convert", "I", "V"), lambda n, c: (n, 3), _no_kwargs),
        (I, S(0), ("convert", "I", "S(0)"), lambda n, c: (2 * n, 3), _no_kwargs),
        (R, P, ("convert", "R", "P"), _fixed(2, 3), _no_kwargs),
        (I, R, ("convert", "I", "R"), _fixed(2, 3), _no_kwargs),
        (I, P, ("convert", "I", "P"), _fixed(2, 3), _expert()),
        (S(0), P, ("convert", "S(0)", "P"), _fixed(2, 3), _expert()),
        # uneven, through split_sizes
        (S(0), R, ("all_gather", "S(0)", "R"), lambda n, c: (_uneven(n)[c], 3),
         _kw_sizes(_uneven)),
        (P, S(0), ("reduce_scatter", "P", "S(0)"), lambda n, c: (sum(_uneven(n)), 2),
         _kw_sizes(_uneven)),
    ]
    for mesh, axis in [("2d", "tp"), ("1d", "w")]:
        for k, (src, dst, key, shape, kw) in enumerate(routes):
            _add(Case(f"redist.{src}.{dst}.{k}.{mesh}.{axis}", mesh, axis, "redistribute",
                      src, dst, shape, kw, ref=key, tags=("redistribute",)))
    for t in (V, S(1), R):
        _add(Case(f"redist.{t}.{t}.identity", "2d", "dp", "redistribute", t, t,
                  _fixed(2, 4), identity=True, tags=("redistribute",)))
    for op in ("reinterpret", "convert"):
        _add(Case(f"{op}.V.V.identity", "1d", "w", op, V, V, _fixed(2, 3), identity=True))


def _kw_sizes(fn: Callable[[int], Any]) -> KwFn:
    return lambda n, c: {"split_sizes": fn(n)}


# 4. Uneven shards (split_sizes), negative dims, re-splits.
def _uneven_cases() -> None:
    for mesh, axis in [("1d", "w"), ("2d", "tp"), ("2d", "dp")]:
        at = f"{mesh}.{axis}"
        u = _uneven
        sized = _kw_sizes(u)
        # all_gather(S(i)) with each rank's size along i
        _add(Case(f"uneven.all_gather.S0.R.{at}", mesh, axis, "all_gather", S(0), R,
                  lambda n, c: (u(n)[c], 3), sized))
        _add(Case(f"uneven.all_gather.S1.I.{at}", mesh, axis, "all_gather", S(1), I,
                  lambda n, c: (2, u(n)[c], 2), sized))
        _add(Case(f"uneven.all_gather.S-1.R.{at}", mesh, axis, "all_gather", S(-1), R,
                  lambda n, c: (2, 3, u(n)[c]), sized))
        # reduce_scatter(P, S(i)) with each rank's result size along i
        _add(Case(f"uneven.reduce_scatter.P.S0.{at}", mesh, axis, "reduce_scatter", P, S(0),
                  lambda n, c: (sum(u(n)), 2), sized))
        _add(Case(f"uneven.reduce_scatter.P.S-1.{at}", mesh, axis, "reduce_scatter", P, S(-1),
                  lambda n, c: (2, 3, sum(u(n))), sized))
        # all_to_all(S(i), S(j)): (src sizes along i, dst sizes along j)
        _add(Case(f"uneven.all_to_all.S0.S1.src.{at}", mesh, axis, "all_to_all", S(0), S(1),
                  lambda n, c: (u(n)[c], 2 * n), lambda n, c: {"split_sizes": (u(n), None)}))
        _add(Case(f"uneven.all_to_all.S0.S1.dst.{at}", mesh, axis, "all_to_all", S(0), S(1),
                  lambda n, c: (2, sum(_uneven_b(n)), 2),
                  lambda n, c: {"split_sizes": (None, _uneven_b(n))}))
        _add(Case(f"uneven.all_to_all.S-1.S0.both.{at}", mesh, axis, "all_to_all", S(-1), S(0),
                  lambda n, c: (sum(_uneven_b(n)), 2, u(n)[c]),
                  lambda n, c: {"split_sizes": (u(n), _uneven_b(n))}))
        # i == j: re-split one dim
        _add(Case(f"uneven.all_to_all.S1.S1.resplit.{at}", mesh, axis, "all_to_all", S(1), S(1),
                  lambda n, c: (2, u(n)[c]),
                  lambda n, c: {"split_sizes": (u(n), _uneven_b(n))}))
        _add(Case(f"uneven.all_to_all.S0.S0.even_to_uneven.{at}", mesh, axis, "all_to_all",
                  S(0), S(0), lambda n, c: (3, 2),
                  lambda n, c: {"split_sizes": (None, _resplit_dst(n))}))
        _add(Case(f"uneven.all_to_all.S-2.S-2.uneven_to_even.{at}", mesh, axis, "all_to_all",
                  S(-2), S(-2), lambda n, c: (_uneven_c(n)[c], 2),
                  lambda n, c: {"split_sizes": (_uneven_c(n), None)}))
        # convert to and from S(i)
        _add(Case(f"uneven.convert.R.S0.{at}", mesh, axis, "convert", R, S(0),
                  lambda n, c: (sum(u(n)), 3), sized))
        _add(Case(f"uneven.convert.I.S-1.{at}", mesh, axis, "convert", I, S(-1),
                  lambda n, c: (2, sum(u(n))), sized))
        _add(Case(f"uneven.convert.S1.P.{at}", mesh, axis, "convert", S(1), P,
                  lambda n, c: (2, u(n)[c]), lambda n, c: {"split_sizes": u(n), "expert_mode": True}))
        _add(Case(f"uneven.redistribute.S0.S1.{at}", mesh, axis, "redistribute", S(0), S(1),
                  lambda n, c: (u(n)[c], sum(_uneven_b(n))),
                  lambda n, c: {"split_sizes": (u(n), _uneven_b(n))},
                  ref=("all_to_all", "S(0)", "S(1)")))
    # even re-splits of one dim (no split sizes at all)
    _add(Case("even.all_to_all.S1.S1.2d.tp", "2d", "tp", "all_to_all", S(1), S(1),
              _fixed(2, 4)))
    # the local dim (2) is not a multiple of 4, the re-split full dim (8) is
    _add(Case("even.all_to_all.S0.S0.local_indivisible.1d.w", "1d", "w", "all_to_all",
              S(0), S(0), _fixed(2, 3)))


def _resplit_dst(n: int) -> List[int]:
    return {2: [5, 1], 4: [4, 0, 5, 3]}[n]


# 5. all_to_all(V, V): multi-row blocks, 1-D, explicit sizes, per-rank sizes.
def _a2a_rows_send(n: int, r: int) -> List[int]:
    return [(r + 2 * c) % 3 for c in range(n)]


def _a2a_rows_sizes(n: int) -> Tuple[List[List[int]], List[List[int]]]:
    send = [_a2a_rows_send(n, r) for r in range(n)]
    recv = [[send[r][c] for r in range(n)] for c in range(n)]
    return send, recv


def _alltoall_rows_cases() -> None:
    for mesh, axis in MESH_AXES:
        at = f"{mesh}.{axis}"
        _add(Case(f"a2a.V.V.blocks3.{at}", mesh, axis, "all_to_all", V, V,
                  lambda n, c: (3 * n, 2)))
        _add(Case(f"a2a.V.V.1d_tensor.{at}", mesh, axis, "all_to_all", V, V,
                  lambda n, c: (n,)))
        _add(Case(f"a2a.V.V.explicit_even.{at}", mesh, axis, "all_to_all", V, V,
                  lambda n, c: (2 * n, 3),
                  lambda n, c: {"split_sizes": ([2] * n, [2] * n)},
                  ref_sizes=lambda n: ([[2] * n] * n, [[2] * n] * n)))
        _add(Case(f"a2a.V.V.uneven_per_rank.{at}", mesh, axis, "all_to_all", V, V,
                  lambda n, c: (sum(_a2a_rows_send(n, c)), 2),
                  lambda n, c: {"split_sizes": (_a2a_rows_send(n, c),
                                                _a2a_rows_sizes(n)[1][c])},
                  ref_sizes=_a2a_rows_sizes, per_rank_kwargs=True))


# 6. Several axes at once: ("dp", "tp") is one group of 4, dp major.
def _multi_axis_cases() -> None:
    ax = ("dp", "tp")
    rows: List[Tuple[str, Any, Any, ShapeFn, KwFn]] = [
        ("all_reduce", P, R, _fixed(3, 2), _no_kwargs),
        ("all_reduce", P, I, _fixed(3, 2), _no_kwargs),
        ("all_gather", V, R, _fixed(2, 3), _no_kwargs),
        ("all_gather", V, I, _fixed(2, 3), _no_kwargs),
        ("all_gather", S(0), R, _fixed(2, 3), _no_kwargs),
        ("all_gather", S(-1), I, _fixed(2, 3), _no_kwargs),
        ("all_gather", S(1), R, lambda n, c: (2, _uneven(n)[c]), _kw_sizes(_uneven)),
        ("reduce_scatter", P, V, lambda n, c: (n, 3), _no_kwargs),
        ("reduce_scatter", P, S(1), lambda n, c: (3, 2 * n), _no_kwargs),
        ("reduce_scatter", P, S(0), lambda n, c: (sum(_uneven(n)), 2), _kw_sizes(_uneven)),
        ("convert", R, S(0), lambda n, c: (2 * n, 3), _no_kwargs),
        ("convert", I, V, lambda n, c: (n, 3), _no_kwargs),
        ("all_to_all", S(0), S(1), lambda n, c: (2, 2 * n), _no_kwargs),
        ("all_to_all", V, V, lambda n, c: (2 * n, 3), _no_kwargs),
    ]
    for k, (op, src, dst, shape, kw) in enumerate(rows):
        _add(Case(f"multi.{op}.{src}.{dst}.{k}", "2d", ax, op, src, dst, shape, kw,
                  tags=("multi_axis",)))


# 7. The axis given as a ProcessGroup.
def _group_cases() -> None:
    rows: List[Tuple[str, Any, Any, ShapeFn, KwFn]] = [
        ("all_gather", S(0), R, _fixed(2, 3), _no_kwargs),
        ("all_reduce", P, I, _fixed(2, 3), _no_kwargs),
        ("reduce_scatter", P, S(0), lambda n, c: (sum(_uneven(n)), 2), _kw_sizes(_uneven)),
        ("all_to_all", S(0), S(1), lambda n, c: (2, 2 * n), _no_kwargs),
        ("convert", R, S(1), lambda n, c: (2, 2 * n), _no_kwargs),
        ("convert", V, P, _fixed(2, 3), _expert()),
        ("reinterpret", I, R, _fixed(2, 3), _no_kwargs),
    ]
    for mesh, axis in MESH_AXES:
        for k, (op, src, dst, shape, kw) in enumerate(rows):
            _add(Case(f"group.{op}.{src}.{dst}.{k}.{mesh}.{axis}", mesh, axis, op, src, dst,
                      shape, kw, axis_as="group", tags=("group",)))
    # The world group while the 2-D mesh is set: not a dim of the mesh.
    for k, (op, src, dst, shape, kw) in enumerate(rows):
        _add(Case(f"group.{op}.{src}.{dst}.{k}.world_on_2d", "2d", "world", op, src, dst,
                  shape, kw, axis_as="world", tags=("group",)))


# 8. Rejected forms: CollectiveError before any communication.
def _rejected_cases() -> None:
    def bad(name: str, op: str, src: Any, dst: Any, shape: ShapeFn = _fixed(4, 4),
            kw: KwFn = _no_kwargs, mesh: Optional[str] = "2d", axis: Any = "tp",
            words: Tuple[str, ...] = ()) -> None:
        _add(Case(f"reject.{name}", mesh, axis, op, src, dst, shape, kw, error=words,
                  tags=("rejected",)))

    # not in the table
    bad("all_gather.P.R", "all_gather", P, R)
    bad("all_gather.P.I", "all_gather", P, I, axis="w", mesh="1d")
    bad("all_gather.R.R", "all_gather", R, R)
    bad("reduce_scatter.P.R", "reduce_scatter", P, R)
    bad("reduce_scatter.P.I", "reduce_scatter", P, I, axis="dp")
    bad("reduce_scatter.V.S0", "reduce_scatter", V, S(0))
    bad("all_reduce.V.R", "all_reduce", V, R)
    bad("all_reduce.P.V", "all_reduce", P, V)
    bad("all_to_all.V.S0", "all_to_all", V, S(0))
    bad("all_to_all.P.V", "all_to_all", P, V)
    for dst in (R, I, V, S(0)):
        bad(f"convert.P.{dst}", "convert", P, dst)
    bad("convert.V.R", "convert", V, R)
    bad("reinterpret.P.R", "reinterpret", P, R)
    bad("reinterpret.V.R", "reinterpret", V, R)
    # expert-only without expert_mode
    for op, src, dst in [
        ("reinterpret", R, I), ("reinterpret", R, V), ("reinterpret", R, P),
        ("reinterpret", I, V), ("reinterpret", I, P),
        ("convert", I, P), ("convert", V, P), ("convert", S(0), P), ("convert", R, I),
        ("redistribute", V, P), ("redistribute", R, I),
    ]:
        bad(f"expert.{op}.{src}.{dst}", op, src, dst, words=("expert_mode",))
    # reinterpret does not take S(i)
    bad("reinterpret.V.S0", "reinterpret", V, S(0))
    bad("reinterpret.S1.V", "reinterpret", S(1), V)
    bad("reinterpret.S0.P", "reinterpret", S(0), P, kw=_expert())
    bad("reinterpret.R.S1", "reinterpret", R, S(1), kw=_expert())
    # bad split sizes
    bad("sizes.all_gather.length", "all_gather", S(0), R, kw=_kw(split_sizes=[2, 1, 1]),
        words=("split_sizes",))
    bad("sizes.all_gather.negative", "all_gather", S(0), R, kw=_kw(split_sizes=[5, -1]),
        words=("split_sizes",))
    bad("sizes.reduce_scatter.sum", "reduce_scatter", P, S(0), kw=_kw(split_sizes=[1, 2]),
        words=("split_sizes",))
    bad("sizes.reduce_scatter.length", "reduce_scatter", P, S(1), axis="w", mesh="1d",
        kw=_kw(split_sizes=[2, 2]), words=("split_sizes",))
    bad("sizes.convert.R.S0.sum", "convert", R, S(0), kw=_kw(split_sizes=[3, 3]),
        words=("split_sizes",))
    bad("sizes.convert.S0.P.length", "convert", S(0), P,
        kw=_kw(split_sizes=[4], expert_mode=True), words=("split_sizes",))
    bad("sizes.all_to_all.S.S.not_pair", "all_to_all", S(0), S(1), kw=_kw(split_sizes=[2, 2]))
    bad("sizes.all_to_all.S.S.dst_sum", "all_to_all", S(0), S(1),
        kw=_kw(split_sizes=(None, [1, 1])))
    bad("sizes.all_to_all.S.S.src_length", "all_to_all", S(0), S(1),
        kw=_kw(split_sizes=([4, 4, 4], None)))
    bad("sizes.all_to_all.V.V.half", "all_to_all", V, V, kw=_kw(split_sizes=([2, 2], None)))
    bad("sizes.all_to_all.V.V.sum", "all_to_all", V, V, kw=_kw(split_sizes=([1, 1], [1, 1])))
    bad("sizes.all_gather.V", "all_gather", V, R, kw=_kw(split_sizes=[2, 2]))
    # not divisible, no split_sizes
    bad("indivisible.reduce_scatter.S0", "reduce_scatter", P, S(0), shape=_fixed(3, 4),
        words=("divisible",))
    bad("indivisible.convert.R.S1", "convert", R, S(1), shape=_fixed(4, 3), axis="w",
        mesh="1d", words=("divisible",))
    bad("indivisible.all_to_all.S0.S1", "all_to_all", S(0), S(1), shape=_fixed(4, 3),
        words=("divisible",))
    bad("indivisible.all_to_all.V.V", "all_to_all", V, V, shape=_fixed(3, 4))
    bad("stackdim.reduce_scatter.P.V", "reduce_scatter", P, V, shape=_fixed(3, 4))
    bad("stackdim.convert.R.V", "convert", R, V, shape=_fixed(3, 4), axis="w", mesh="1d")
    bad("stackdim.convert.I.V.scalar", "convert", I, V, shape=_fixed())
    # S(dim) out of range
    bad("dim.all_gather.S2", "all_gather", S(2), R, words=("S(2)",))
    bad("dim.reduce_scatter.S-3", "reduce_scatter", P, S(-3), words=("S(-3)",))
    bad("dim.all_to_all.S0.S5", "all_to_all", S(0), S(5), words=("S(5)",))
    bad("dim.convert.R.S2", "convert", R, S(2), axis="w", mesh="1d", words=("S(2)",))
    # axis problems
    bad("axis.unknown", "all_reduce", P, R, axis="xx")
    bad("axis.unknown_in_tuple", "all_gather", S(0), R, axis=("dp", "xx"))
    bad("axis.out_of_order", "all_reduce", P, R, axis=("tp", "dp"))
    bad("axis.repeated", "all_gather", V, R, axis=("tp", "tp"))
    bad("axis.not_an_axis", "all_reduce", P, R, axis=3)
    bad("axis.no_mesh", "all_reduce", P, R, mesh=None, axis="tp")
    bad("axis.no_mesh_tuple", "reduce_scatter", P, S(0), mesh=None, axis=("dp", "tp"))


# 9. Random uneven splits (seeded, a zero-size piece in each), on the 1-D mesh of 4.
def _random_uneven_cases() -> None:
    rng = random.Random(17)
    base = [2, 3, 2]

    def sizes(total: Optional[int] = None) -> List[int]:
        while True:
            s = [rng.randint(0, 4) for _ in range(WORLD)]
            s[rng.randrange(WORLD)] = 0
            if sum(s) > 0 and (total is None or sum(s) == total):
                return s

    def on(dim: int, length: Callable[[int], int], other: Optional[Tuple[int, int]] = None) -> ShapeFn:
        def f(n: int, c: int) -> Shape:
            s = list(base)
            if other is not None:
                s[other[0]] = other[1]
            s[dim] = length(c)
            return tuple(s)

        return f

    for k in range(4):
        a, i = sizes(), rng.randrange(3)
        j = (i + 1 + rng.randrange(2)) % 3
        b = sizes()
        r = sizes(sum(a))
        tag = f"random{k}"
        _add(Case(f"{tag}.all_gather.S{i}.R", "1d", "w", "all_gather", S(i), R,
                  on(i, lambda c, a=a: a[c]), _kw(split_sizes=a), tags=("random",)))
        _add(Case(f"{tag}.reduce_scatter.P.S{i}", "1d", "w", "reduce_scatter", P, S(i),
                  on(i, lambda c, a=a: sum(a)), _kw(split_sizes=a), tags=("random",)))
        _add(Case(f"{tag}.all_to_all.S{i}.S{j}", "1d", "w", "all_to_all", S(i), S(j),
                  on(i, lambda c, a=a: a[c], (j, sum(b))), _kw(split_sizes=(a, b)),
                  tags=("random",)))
        _add(Case(f"{tag}.all_to_all.S{i}.S{i}.resplit", "1d", "w", "all_to_all", S(i), S(i),
                  on(i, lambda c, a=a: a[c]), _kw(split_sizes=(a, r)), tags=("random",)))


_primitive_cases()
_composite_cases()
_redistribute_cases()
_uneven_cases()
_alltoall_rows_cases()
_multi_axis_cases()
_group_cases()
_rejected_cases()
_random_uneven_cases()

BY_ID: Dict[str, Case] = {c.id: c for c in CASES}
VALID = [c for c in CASES if not c.rejected]
REJECTED = [c for c in CASES if c.rejected]
