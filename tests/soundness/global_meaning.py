"""The single-device meaning of a global program, and its judge on simulated ranks.

Global meaning (the design seed's "Global SPMD"): a global program means
what its body computes on ONE process on the full tensors, with every spmd.*
call replaced by the identity (`out_partial_axes` ignored: spmd.matmul
is torch.matmul, spmd.sum torch.sum, spmd.mean torch.mean, likewise linear and einsum).  No spmd_mypy code takes part in it:
`IDENTITY_SPMD` stands in for the module.

Full tensors and rank tensors (mesh 2 x 2, dims ("dp", "tp"), rank = 2*dp + tp)
under a global type GType(spec, partial) (global_programs.py):

  embed   rank r holds, of the full tensor X, the block of its coordinates:
          dim d is cut into 2**len(spec[d]) equal pieces indexed by the axes of
          spec[d] major to minor; on the P axes the ranks hold addends, X - (sum
          of fixed noise) on coordinate 0 of those axes and the noise elsewhere
          (the same on ranks differing only on an R axis)
  decode  the inverse: ranks differing only on R axes must hold the same block
          (checked), the blocks are placed by the spec and the P addends summed

The gradient of a value of type (spec, partial) has type (spec, its R axes):
R -> P, P -> R, S(i) -> S(i) per axis.  The loss is sum(output * W) with a
fixed random W shaped like the single-device output; the ranks' output seed is
embed(grad(declared return type), W).

Agreement of a program: the ranks' output decodes under the declared return
type to the single-device output, and each input's per-rank gradient decodes
under grad(input type) to the single-device gradient d loss / d X.
"""

from __future__ import annotations

import itertools
import traceback
import types as pytypes
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import torch
from torch import Tensor

from .global_programs import AXES, SIZE, GProgram, GType

WORLD = SIZE ** len(AXES)
Grid = Dict[int, Tensor]


class Mismatch(Exception):
    """Per-rank tensors inconsistent with their declared global type."""


def coords(rank: int) -> Dict[str, int]:
    return {"dp": rank // SIZE, "tp": rank % SIZE}


def _block(gt: GType, co: Mapping[str, int], local: Tuple[int, ...]) -> Tuple[slice, ...]:
    out = []
    for axes, n in zip(gt.spec, local):
        idx = 0
        for a in axes:  # major to minor
            idx = idx * SIZE + co[a]
        out.append(slice(idx * n, (idx + 1) * n))
    return tuple(out)


def _pkey(gt: GType, co: Mapping[str, int]) -> Tuple[int, ...]:
    return tuple(co[a] for a in AXES if a in gt.partial)


def embed(gt: GType, full: Tensor, gen: torch.Generator) -> Grid:
    local = gt.local_shape(tuple(full.shape))
    if local is None:
        raise Mismatch(f"{tuple(full.shape)} does not divide by {gt}")
    keys = list(itertools.product(range(SIZE), repeat=len(gt.partial)))
    noise = {k: torch.randn(tuple(full.shape), generator=gen, dtype=full.dtype) for k in keys[1:]}
    addends = {keys[0]: full - sum(noise.values(), torch.zeros_like(full)), **noise}
    grid = {}
    for r in range(WORLD):
        co = coords(r)
        grid[r] = addends[_pkey(gt, co)][_block(gt, co, local)].detach().clone()
    return grid


def decode(gt: GType, grid: Mapping[int, Tensor], check: bool = True) -> Tensor:
    local = tuple(grid[0].shape)
    if len(local) != len(gt.spec):
        raise Mismatch(f"rank 0 holds a {len(local)}-d tensor, the type has {len(gt.spec)} dims")
    if any(tuple(grid[r].shape) != local for r in range(WORLD)):
        raise Mismatch("the ranks hold tensors of different shapes")
    full_shape = gt.global_shape(local)
    seen: Dict[Tuple[Tuple[int, ...], Tuple[slice, ...]], Tensor] = {}
    for r in range(WORLD):
        co = coords(r)
        key = (_pkey(gt, co), _block(gt, co, local))
        key_h = (key[0], tuple((s.start, s.stop) for s in key[1]))
        if key_h in seen:  # type: ignore[comparison-overlap]
            if check and not close(grid[r], seen[key_h], rtol=1e-9):  # type: ignore[index]
                raise Mismatch(f"ranks differing only on a replicated axis hold different values ({gt})")
            continue
        seen[key_h] = grid[r]  # type: ignore[index]
    terms: Dict[Tuple[int, ...], Tensor] = {}
    for (pk, blk), t in seen.items():
        full = terms.setdefault(pk, torch.zeros(full_shape, dtype=t.dtype))
        full[tuple(slice(a, b) for a, b in blk)] = t.detach()
    return sum(terms.values(), torch.zeros(full_shape, dtype=torch.float64))


def close(a: Tensor, b: Tensor, rtol: float = 1e-7) -> bool:
    if tuple(a.shape) != tuple(b.shape):
        return False
    if not a.numel():
        return True
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max()) <= rtol * (1.0 + float(b.abs().max()))


# -- the single-device run ------------------------------------------------------------------


def _identity(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    return x


def _matmul(a: Tensor, b: Tensor, **kwargs: Any) -> Tensor:
    return torch.matmul(a, b)


def _linear(a: Tensor, b: Tensor, bias: Any = None, **kwargs: Any) -> Tensor:
    return torch.nn.functional.linear(a, b, bias)


def _einsum(eq: str, *ops: Tensor, **kwargs: Any) -> Tensor:
    return torch.einsum(eq, *ops)


def _mean(x: Tensor, dim: Any = None, keepdim: bool = False, **kwargs: Any) -> Tensor:
    return torch.mean(x) if dim is None else torch.mean(x, dim, keepdim=keepdim)


def _sum(x: Tensor, dim: Any = None, keepdim: bool = False, **kwargs: Any) -> Tensor:
    return torch.sum(x) if dim is None else torch.sum(x, dim, keepdim=keepdim)


IDENTITY_SPMD = pytypes.SimpleNamespace(
    all_gather=_identity, all_reduce=_identity, reduce_scatter=_identity, all_to_all=_identity,
    redistribute=_identity, reinterpret=_identity, convert=_identity,
    matmul=_matmul, sum=_sum, mean=_mean, linear=_linear, einsum=_einsum, global_spmd=lambda fn: fn,
)


def load(source: str, name: str) -> Callable[..., Tensor]:
    ns: Dict[str, Any] = {"__name__": name}
    exec(compile(source, f"<{name}>", "exec"), ns)  # noqa: S102 - generated test code
    return ns["program"]


def single_device(source: str, name: str, full: List[Tensor]) -> Tensor:
    """The program's body on one process, spmd.* the identity (looked up at call time)."""
    fn = load(source, name)
    fn.__globals__["spmd"] = IDENTITY_SPMD
    return fn(*full)


def _local(t: Tensor, rank: int) -> Tensor:
    lt = getattr(t, "_local_tensors", None)
    return t if lt is None else lt[rank]


def run_on_ranks(
    source: str, name: str, mesh: Any, in_grids: List[Grid], seed_for: Callable[[Grid], Optional[Grid]]
) -> Optional[List[Grid]]:
    """Run the program on the simulated ranks: forward, then (if seed_for gives a seed for the
    per-rank output) backward; the per-rank gradients of the inputs, or None."""
    from torch.distributed._local_tensor import LocalTensorMode

    import spmd_mypy as spmd

    fn = load(source, name)
    with LocalTensorMode(WORLD) as mode, spmd.set_mesh(mesh):
        xs = [mode.rank_map(lambda r, g=grid: g[r].detach().clone()).requires_grad_() for grid in in_grids]
        y = fn(*xs)
        with mode.disable():  # plain torch here: tensors made in the mode are one per rank
            seed = seed_for({r: _local(y, r).detach().clone() for r in range(WORLD)})
        if seed is None:
            return None
        y.backward(mode.rank_map(lambda r: seed[r].detach().clone()))
    grads = []  # outside the mode: a tensor made inside it is one per rank
    for x in xs:
        g = x.grad
        grads.append(
            {r: torch.zeros(tuple(_local(x, r).shape), dtype=torch.float64) if g is None else _local(g, r).detach().clone()
             for r in range(WORLD)}
        )
    return grads


# -- the judge -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    verdict: str  # agree | unsound | runtime-error
    detail: str = ""


def judge(program: GProgram, index: int, mesh: Any) -> Outcome:
    gen = torch.Generator().manual_seed(5000 + index)
    src = program.source()
    full = [torch.randn(x.shape, generator=gen, dtype=torch.float64).requires_grad_() for x in program.inputs]
    try:
        y_ref = single_device(src, f"gref{index}", full)
    except Exception as e:  # noqa: BLE001 - any failure: the body has no single-device meaning
        return Outcome("unsound", f"no single-device meaning: {type(e).__name__}: {str(e)[:200]}")
    w = torch.randn(tuple(y_ref.shape), generator=gen, dtype=torch.float64)
    loss = (y_ref * w).sum()
    ref_grads = torch.autograd.grad(loss, full, allow_unused=True)
    ref_grads = tuple(torch.zeros_like(x) if g is None else g for x, g in zip(full, ref_grads))
    out_t = program.out_type
    grids = [embed(x.gtype, f.detach(), gen) for x, f in zip(program.inputs, full)]
    problems: List[str] = []

    def seed_for(out: Grid) -> Optional[Grid]:
        """Check the forward; the output's gradient seed, None if the output has no place for it."""
        try:
            got = decode(out_t, out)
        except Mismatch as e:
            problems.append(f"forward: {e}")
            return None
        if tuple(got.shape) != tuple(y_ref.shape):
            problems.append(f"forward: the ranks' output reassembles to shape {tuple(got.shape)}, "
                            f"the single-device one is {tuple(y_ref.shape)}")
            return None
        if not close(got, y_ref):
            problems.append("forward: the ranks' output reassembles to another value than the single-device one")
        return embed(out_t.grad(), w, gen)

    try:
        grads = run_on_ranks(src, f"grank{index}", mesh, grids, seed_for)
    except Exception as e:  # noqa: BLE001 - every failure is reported with its kind
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return Outcome("runtime-error", last[:400])
    if grads is None:
        return Outcome("unsound", "; ".join(problems))
    for x, g, ref in zip(program.inputs, grads, ref_grads):
        try:
            got_g = decode(x.gtype.grad(), g)
        except Mismatch as e:
            problems.append(f"gradient of {x.name}: {e}")
            continue
        if not close(got_g, ref, rtol=1e-6):
            problems.append(f"gradient of {x.name} ({x.gtype.render()}): differs from d loss / d {x.name}")
    if problems:
        return Outcome("unsound", "; ".join(problems))
    return Outcome("agree")
