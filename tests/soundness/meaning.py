"""The global meaning of a program over the dp x tp mesh, from its SPMD types.

This is what the differential test holds the runtime's gradients against.  It
computes with torch and the reference semantics (tests/runtime/reference.py)
only; spmd_mypy's vocabulary is imported just to define a program's helper
functions (their annotations), and none of its collectives or rules is used.

The mesh is 2 x 2 with dims ("dp", "tp"); rank = 2 * dp + tp.  A *grid* is
the per-rank tensors of one value: a dict rank -> tensor.

Denotation of a grid of SPMD type T (T gives one local type per axis)
-------------------------------------------------------------------------
A per-rank family of tensors stands for a *tree*: a tensor, or a list of
trees, one per coordinate of a Varying axis.  Decoding takes the axes minor
first (tp, then dp), each step combining the trees of the ranks of one group
(the two ranks that differ only on that axis) into one tree:

  R, I   the group holds one value: every rank's tree must be equal (checked),
         the combined tree is their mean (the value itself when they agree)
  P      the pending sum: the leaf-wise sum of the group's trees
  V      a list of the group's trees, in coordinate order
  S(i)   the shards of one tensor: leaf-wise concatenation along dim i

So a dim sharded on both axes is dp-major, as in PartitionSpec(("dp", "tp")),
and S(i) is V up to a bijection (in local SPMD the two type alike).

Embedding is the inverse, axes major first (dp, then tp): R and I copy the
tree to each rank of the group, V hands out the list's items, S(i) hands out
the chunks along dim i, and P hands out addends that sum to the tree: rank 0
of the group gets t - (e_1 + ...), rank c > 0 the fixed noise e_c.

The meaning of a program
------------------------
A program takes inputs x_k of declared types T_k and returns a value of
declared type T_out.  Its global meaning is the function of the inputs'
denotations

    F(X_1, ..., X_m) = decode(T_out, run(embed(T_1, X_1), ..., embed(T_m, X_m)))

where `run` executes the program rank by rank: every non-collective line is
evaluated on each rank's own tensors (the same Python expression), and every
collective on each group with the seed's spec function for it (reference.py;
`redistribute` is routed here to the value-preserving primitive that what the
ranks hold calls for, `redistribute_route`, and to `convert` otherwise).  Everything in `run` is
plain differentiable torch on one process, so torch's autograd gives the true
gradient of F.

The scalar loss is L = sum over the leaves of <G, F(X)> for a fixed random
tree G shaped like the output's denotation.  On the ranks, the output's
gradient seed is embed(grad(T_out), G) with grad R->P, P->R, I->I, V->V,
S(i)->S(i): for an I or P output each rank gets G itself, which is exactly
the implicit seed of loss.backward() on an I or P scalar.

Inputs may be R, I, V, S(i) or P and the output of any type: an R output's
seed is a P gradient (addends of G split with fixed noise), a V or S(i)
output's seed is G's pieces.  With an I or P output the loss is a scalar
loss in the usual sense.

Soundness of an accepted program, checked against this meaning:
  * forward: the runtime's per-rank output decodes under T_out (R/I equal
    across each group, S(i) shards that concatenate) to F(X);
  * backward: for each input, the runtime's per-rank gradients decode under
    grad(T_k) (so an R input's gradient is the sum over the axis, an I input's
    must be equal on every rank of the axis) to dL/dX_k;
  * a P input's meaning must not depend on how its sum was split: F is
    evaluated with two different noises and must agree.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F  # noqa: N812 - evaluated program lines use F
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
import reference  # noqa: E402  (tests/runtime/reference.py)

AXES: Tuple[str, ...] = ("dp", "tp")
SIZE = 2  # ranks per axis
WORLD = SIZE * SIZE

Tree = Union[Tensor, List["Tree"]]
Grid = Dict[int, Any]  # rank -> tensor (or tree, inside decode/embed)
Types = Mapping[str, str]  # axis -> "R", "I", "V", "P" or "S(i)"

GRAD_OF = {"R": "P", "P": "R", "I": "I", "V": "V"}


def grad_type(t: str) -> str:
    return t if t.startswith("S(") else GRAD_OF[t]


def grad_types(types: Types) -> Dict[str, str]:
    return {a: grad_type(t) for a, t in types.items()}


def rank_of(coords: Mapping[str, int]) -> int:
    return coords["dp"] * SIZE + coords["tp"]


def coords_of(rank: int) -> Dict[str, int]:
    return {"dp": rank // SIZE, "tp": rank % SIZE}


def groups(axis: Union[str, Tuple[str, ...]]) -> List[List[int]]:
    """The communicator groups of an axis (or a tuple of axes, mesh order): ranks by coordinate."""
    axes = axis if isinstance(axis, tuple) else (axis,)
    out: Dict[Tuple[int, ...], List[Tuple[int, int]]] = {}
    for r in range(WORLD):
        co = coords_of(r)
        key = tuple(co[a] for a in AXES if a not in axes)
        c = 0
        for a in axes:  # major to minor
            c = c * SIZE + co[a]
        out.setdefault(key, []).append((c, r))
    return [[r for _, r in sorted(members)] for _, members in sorted(out.items())]


def shard_dim(t: str) -> Optional[int]:
    return int(t[2:-1]) if t.startswith("S(") else None


# -- trees ------------------------------------------------------------------------------


def tree_map(fn: Callable[[List[Tensor]], Tensor], trees: Sequence[Tree]) -> Tree:
    """Apply fn leaf-wise across trees of one structure."""
    first = trees[0]
    if isinstance(first, Tensor):
        if not all(isinstance(t, Tensor) for t in trees):
            raise Mismatch("trees of different structure")
        return fn(list(trees))  # type: ignore[arg-type]
    if not all(isinstance(t, list) and len(t) == len(first) for t in trees):
        raise Mismatch("trees of different structure")
    return [tree_map(fn, [t[k] for t in trees]) for k in range(len(first))]  # type: ignore[index]


def leaves(tree: Tree) -> List[Tensor]:
    if isinstance(tree, Tensor):
        return [tree]
    return [leaf for t in tree for leaf in leaves(t)]


def tree_like(tree: Tree, fn: Callable[[Tensor], Tensor]) -> Tree:
    return tree_map(lambda ts: fn(ts[0]), [tree])


class Mismatch(Exception):
    """Per-rank values inconsistent with their declared type."""


def close(a: Tensor, b: Tensor, rtol: float = 1e-7) -> bool:
    if a.shape != b.shape:
        return False
    a, b = a.detach(), b.detach()
    scale = 1.0 + float(b.abs().max()) if b.numel() else 1.0
    return b.numel() == 0 or float((a - b).abs().max()) <= rtol * scale


def trees_close(a: Tree, b: Tree, rtol: float = 1e-7) -> bool:
    try:
        la, lb = leaves(a), leaves(b)
        tree_map(lambda ts: ts[0], [a, b])  # same structure
    except Mismatch:
        return False
    return len(la) == len(lb) and all(close(x, y, rtol) for x, y in zip(la, lb))


# -- decode / embed ------------------------------------------------------------------------


def _combine(t: str, items: List[Tree], check: bool) -> Tree:
    k = t[0]
    if k == "V":
        return list(items)
    if k == "S":
        i = shard_dim(t)

        def cat(ts: List[Tensor]) -> Tensor:
            try:
                return torch.cat(ts, i)  # type: ignore[arg-type]
            except (RuntimeError, IndexError) as e:
                raise Mismatch(f"shards do not concatenate on dim {i}: {e}") from None

        return tree_map(cat, items)
    if k == "P":
        return tree_map(_sum, items)
    # R or I: one value per group
    if check:
        for other in items[1:]:
            if not trees_close(other, items[0], rtol=1e-9):
                raise Mismatch(f"{t} value differs between the ranks of a group")
    return tree_map(lambda ts: torch.stack(ts).mean(0), items)


def _sum(ts: List[Tensor]) -> Tensor:
    if any(t.shape != ts[0].shape for t in ts):
        raise Mismatch("the addends of a P value differ in shape")
    return torch.stack(ts).sum(0)


def decode(types: Types, grid: Mapping[int, Tensor], check: bool = True) -> Tree:
    """The denotation of per-rank tensors under types (Mismatch if inconsistent)."""
    # tp first: one tree per dp coordinate
    per_dp = []
    for d in range(SIZE):
        items = [grid[rank_of({"dp": d, "tp": t})] for t in range(SIZE)]
        per_dp.append(_combine(types["tp"], items, check))
    return _combine(types["dp"], per_dp, check)


def _split(
    t: str, tree: Tree, noise: Callable[[Tensor], Tensor], memo: Dict[int, List[Tensor]]
) -> List[Tree]:
    k = t[0]
    if k == "V":
        if not isinstance(tree, list) or len(tree) != SIZE:
            raise Mismatch("a V denotation is a list with one entry per rank")
        return list(tree)
    if k == "S":
        i = shard_dim(t)
        return [tree_like(tree, lambda x, c=c: x.chunk(SIZE, i)[c]) for c in range(SIZE)]  # type: ignore[misc]
    if k == "P":
        # memo by leaf: the copies an R or I axis made of one tree get the same
        # addends, so the value stays replicated over that axis

        def addend(x: Tensor, c: int) -> Tensor:
            if id(x) not in memo:
                es = [noise(x) for _ in range(SIZE - 1)]
                memo[id(x)] = [x - sum(es)] + es
            return memo[id(x)][c]

        return [tree_like(tree, lambda x, c=c: addend(x, c)) for c in range(SIZE)]  # type: ignore[misc]
    return [tree for _ in range(SIZE)]


def embed(types: Types, tree: Tree, noise: Callable[[Tensor], Tensor]) -> Grid:
    """Per-rank tensors that decode to tree under types (dp first, then tp)."""
    grid: Grid = {}
    memo: Dict[int, List[Tensor]] = {}
    for d, sub in enumerate(_split(types["dp"], tree, noise, memo)):
        for t, leaf in enumerate(_split(types["tp"], sub, noise, memo)):
            grid[rank_of({"dp": d, "tp": t})] = leaf
    return grid


def make_noise(seed: int) -> Callable[[Tensor], Tensor]:
    """A source of fixed random addends for P splits, deterministic in seed and call order."""
    gen = torch.Generator().manual_seed(seed)
    return lambda x: torch.randn(tuple(x.shape), generator=gen, dtype=torch.float64)


def random_tree(like: Tree, gen: torch.Generator) -> Tree:
    return tree_like(like, lambda x: torch.randn(tuple(x.shape), generator=gen, dtype=x.dtype))


# -- the reference run -----------------------------------------------------------------------

NAMESPACE = {"torch": torch, "F": F, "ACT": F.silu}  # ACT: programs.HEADER's activation

# What one rank holds of a value under each per-axis type (the seed's meanings):
# the whole value (R, I), a piece of it (S(i): a slice of dim i; V: some piece),
# or an addend of a pending sum (P).
_HOLDS = {"R": "whole", "I": "whole", "S": "piece", "V": "piece", "P": "addend"}


def redistribute_route(src: str, dst: str) -> str:
    """The primitive a value-preserving redistribute(src -> dst) runs on one axis.

    Derived from what the ranks hold, not from the package's routing table:
    an addend becomes whole by summing over the group (all_reduce) or a piece
    by summing and keeping one's own part (reduce_scatter); a piece becomes
    whole by collecting the others' pieces (all_gather); a slice of one dim
    becomes a slice of another by trading parts with every other rank
    (all_to_all).  Anything else each rank computes from what it holds alone,
    with no communication: the value-preserving convert.  (The seed's
    per-mesh-dim redistribute table lists the S(i) and P rows; V routes as the
    piece it is, as all_gather and reduce_scatter take it.)
    """
    have, need = _HOLDS[src[0]], _HOLDS[dst[0]]
    if have == "addend" and need != "addend":
        return "all_reduce" if need == "whole" else "reduce_scatter"
    if have == "piece" and need == "whole":
        return "all_gather"
    if src[0] == dst[0] == "S" and src != dst:
        return "all_to_all"
    return "convert"


class NoReference(Exception):
    """The reference has no meaning for this collective (no spec function)."""


def collective(op: str, src: str, dst: str, xs: List[Tensor]) -> List[Tensor]:
    """One group's outputs of op(src -> dst), by the seed's spec functions."""
    if op in ("reinterpret", "convert", "redistribute") and src == dst:
        return list(xs)
    if op == "redistribute":
        op = redistribute_route(src, dst)
    try:
        return reference.forward(op, src, dst, xs)
    except KeyError as e:
        raise NoReference(str(e)) from None


def run(program: Any, inputs: Mapping[str, Grid]) -> Grid:
    """Execute a program's statements rank by rank; return the output grid.

    `program` has `.statements`, each either a local line (`.name`, `.expr`)
    evaluated per rank, or a collective (`.name`, `.op`, `.arg`, `.axis`,
    `.src`, `.dst`) run per group by the reference; and `.result`.
    """
    namespace = dict(NAMESPACE)
    prelude = getattr(program, "prelude", "")
    if prelude:  # helpers the lines call; their bodies are plain torch
        exec(compile(program.header + prelude, "<prelude>", "exec"), namespace)  # noqa: S102
    env: Dict[int, Dict[str, Any]] = {r: {} for r in range(WORLD)}
    for name, grid in inputs.items():
        for r in range(WORLD):
            env[r][name] = grid[r]
    for st in program.statements:
        if st.op is None:
            code = compile(st.expr, "<line>", "eval")
            write = compile(f"{st.name}{st.write}", "<write>", "exec") if getattr(st, "write", "") else None
            for r in range(WORLD):
                env[r][st.name] = eval(code, namespace, env[r])  # noqa: S307 - our own lines
                if write is not None:  # an item write into the new value
                    exec(write, namespace, env[r])  # noqa: S102 - our own lines
        else:
            for members in groups(st.axis):
                outs = collective(st.op, st.src, st.dst, [env[r][st.arg] for r in members])
                for r, o in zip(members, outs):
                    env[r][st.name] = o
    return {r: env[r][program.result] for r in range(WORLD)}


def meaning(
    program: Any, in_types: Mapping[str, Types], out_types: Types, denot: Mapping[str, Tree],
    noise: Callable[[Tensor], Tensor],
) -> Tree:
    """F(X): embed the denotations, run rank by rank, decode (differentiable)."""
    grids = {name: embed(in_types[name], denot[name], noise) for name in in_types}
    return decode(out_types, run(program, grids), check=False)
