"""Factor builders of the layout families: reshape/view, flatten, unflatten,
permutes, squeeze, unsqueeze, expand, cat, stack.

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

import math
from typing import Callable, Final, List, Mapping, Optional, Sequence, Tuple

from .factor_signature import BuildContext, FactorBuilder, Signature, same_dims
from .factor_table import NEED_REPLICATION, PASS, UNKNOWN_RESHAPE, FactorError, Row
from .globaltype import GlobalType

__all__ = ["FAMILIES"]


def _reshape_shape(c: BuildContext, t: GlobalType, shape: Sequence[object]) -> Optional[List[int]]:
    """The target shape with -1 resolved, or None if sizes are missing."""
    out: List[Optional[int]] = []
    for s in shape:
        if s is None:
            out.append(None)
        elif isinstance(s, bool) or not isinstance(s, int) or s < -1:
            raise c.bad(f"shape entries are literal ints, -1 or None (not literal), got {s!r}")
        else:
            out.append(s)
    if out.count(-1) > 1:
        raise c.bad("shape has more than one -1")
    ins = list(t.sizes)
    if None in out:
        return None
    if -1 in out:
        if None in ins:
            return None
        known = math.prod(s for s in out if s != -1)  # type: ignore[misc]
        total = math.prod(ins)  # type: ignore[arg-type]
        if known == 0 or total % known:
            raise c.bad(f"cannot view {total} elements as {tuple(shape)}")
        out[out.index(-1)] = total // known
    return out  # type: ignore[return-value]


def _walk(c: BuildContext, ins: List[int], outs: List[int]) -> Tuple[FactorBuilder, List[List[str]], List[List[str]]]:
    """Shardy's factor walk over two fully known shapes of equal volume."""
    if math.prod(ins) != math.prod(outs):
        raise c.bad(f"cannot view a tensor of shape {tuple(ins)} as {tuple(outs)}")
    b = FactorBuilder()
    fin: List[List[str]] = [[] for _ in ins]
    fout: List[List[str]] = [[] for _ in outs]
    i = j = 0
    ra = ins[0] if ins else 1
    rb = outs[0] if outs else 1
    while True:
        if i < len(ins) and ra == 1:
            i += 1
            ra = ins[i] if i < len(ins) else 1
            continue
        if j < len(outs) and rb == 1:
            j += 1
            rb = outs[j] if j < len(outs) else 1
            continue
        if i >= len(ins) or j >= len(outs):
            break
        g = math.gcd(ra, rb)
        if g > 1:
            f = b.new(PASS, g)
            fin[i].append(f)
            fout[j].append(f)
            ra //= g
            rb //= g
            continue
        # coprime remainders: the dims up to the next common boundary mix
        why = "the reshape mixes it with another dim"
        fin[i].append(b.new(NEED_REPLICATION, None, why))
        fout[j].append(b.new(PASS))
        pa, pb = ra, rb
        while pa != pb:
            if pa < pb:
                i += 1
                pa *= ins[i]
                fin[i].append(b.new(NEED_REPLICATION, None, why))
            else:
                j += 1
                pb *= outs[j]
                fout[j].append(b.new(PASS))
        ra = rb = 1
    return b, fin, fout


def _reshape(c: BuildContext) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    shape = c.param("shape", "size", required=True)
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise c.bad(f"shape must be a literal tuple, got {shape!r}")
    outs = _reshape_shape(c, t, shape)
    ins = list(t.sizes)
    if outs is not None and None in ins and -1 not in shape:
        missing = [d for d, s in enumerate(ins) if s is None]
        if len(missing) == 1:
            known = math.prod(s for s in ins if s is not None)
            total = math.prod(outs)
            if known and total % known == 0:
                ins[missing[0]] = total // known
    if outs is None or None in ins or 0 in ins or 0 in outs:
        # sizes unknown: a view to rank 1 merges every dim, a view of rank 1 splits it
        if len(shape) == 1:
            return _flatten(BuildContext(c.op, Row("flatten", "all"), c.operands, {}, c.names))
        if t.ndim == 1:
            return _unflatten(BuildContext(c.op, Row("unflatten"), c.operands, {"dim": 0, "sizes": tuple(shape)}, c.names))
        # otherwise only an unsharded tensor can be viewed
        b = FactorBuilder()
        src = same_dims(c, b, t, {d: (UNKNOWN_RESHAPE, "") for d in range(t.ndim)})
        res = [(b.new(PASS),) for _ in shape]
        sizes = [s if isinstance(s, int) and s >= 0 else None for s in shape]
        return b.sign([src], res, sizes)
    b, fin, fout = _walk(c, ins, outs)  # type: ignore[arg-type]
    return b.sign([fin], fout, outs)


def _flatten(c: BuildContext) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    if c.row.arg == "all" or t.ndim == 0:
        lo, hi = 0, t.ndim - 1
    else:
        lo = c.dim(c.param("start_dim", default=0), t.ndim, "start_dim")
        hi = c.dim(c.param("end_dim", default=-1), t.ndim, "end_dim")
        if lo > hi:
            raise c.bad(f"start_dim {lo} comes after end_dim {hi}")
    b = FactorBuilder()
    src = same_dims(c, b, t)
    if t.ndim == 0:
        return b.sign([src], [()], [1])
    merged = tuple(f for d in range(lo, hi + 1) for f in src[d])
    result = src[:lo] + [merged] + src[hi + 1 :]
    return b.sign([src], result)


def _unflatten(c: BuildContext) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    d = c.dim(c.param("dim", required=True), t.ndim)
    sizes = c.param("sizes", "unflattened_size", required=True)
    if not isinstance(sizes, (tuple, list)) or not sizes:
        raise c.bad(f"sizes must be a literal non-empty tuple, got {sizes!r}")
    parts: List[Optional[int]] = []
    for s in sizes:
        if s is None or s == -1:
            parts.append(None)
        elif isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise c.bad(f"sizes entries are literal ints or -1, got {s!r}")
        else:
            parts.append(s)
    if list(sizes).count(-1) > 1:
        raise c.bad("sizes has more than one -1")
    n = t.sizes[d]
    if -1 in sizes and n is not None and all(p is not None for k, p in enumerate(parts) if sizes[k] != -1):
        known = math.prod(p for k, p in enumerate(parts) if sizes[k] != -1)  # type: ignore[misc]
        if known == 0 or n % known:
            raise c.bad(f"cannot unflatten a dim of size {n} into {tuple(sizes)}")
        parts[list(sizes).index(-1)] = n // known
    b = FactorBuilder()
    src = same_dims(c, b, t)
    new = [b.new(PASS, p) for p in parts]
    # dims of size 1 carry no factor
    ins = list(src)
    ins[d] = tuple(f for f, p in zip(new, parts) if p != 1)
    result = src[:d] + [(f,) if p != 1 else () for f, p in zip(new, parts)] + src[d + 1 :]
    sizes_out = list(t.sizes[:d]) + parts + list(t.sizes[d + 1 :])
    return b.sign([ins], result, sizes_out)


def _permute(c: BuildContext) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    n = t.ndim
    how = c.row.arg
    if how == "t":
        if n > 2:
            raise c.bad(f"takes a tensor of rank <= 2, got rank {n}")
        order = list(range(n))[::-1]
    elif how in ("transpose", "swapaxes", "swapdims"):
        a = c.dim(c.param("dim0", "axis0", required=True), n, "dim0")
        z = c.dim(c.param("dim1", "axis1", required=True), n, "dim1")
        order = list(range(n))
        order[a], order[z] = order[z], order[a]
    elif how == "permute":
        dims = c.param("dims", required=True)
        order = list(c.dims(dims, n, "dims"))
        if len(order) != n:
            raise c.bad(f"dims {dims!r} is not a permutation of {n} dims")
    else:  # movedim / moveaxis
        src = c.dims(c.param("source", required=True), n, "source")
        dst = c.dims(c.param("destination", required=True), n, "destination")
        if len(src) != len(dst):
            raise c.bad("source and destination have different lengths")
        order = [-1] * n
        for s, d in zip(src, dst):
            order[d] = s
        rest = iter(k for k in range(n) if k not in src)
        order = [o if o >= 0 else next(rest) for o in order]
    b = FactorBuilder()
    src_dims = same_dims(c, b, t)
    return b.sign([src_dims], [src_dims[k] for k in order], [t.sizes[k] for k in order])


def _squeeze(c: BuildContext) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    dim = c.param("dim", default=None)
    if dim is None:
        if None in t.sizes:
            raise FactorError(
                f"{c.op}: squeeze() without a dim on {c.names[0]}: {t} needs known sizes",
                code="bad-param",
            )
        dims = tuple(d for d, s in enumerate(t.sizes) if s == 1)
    else:
        dims = tuple(d for d in c.dims(dim, t.ndim) if t.sizes[d] in (None, 1))
    b = FactorBuilder()
    why = "squeeze removes it (a sharded dim has a different local size)"
    src = same_dims(c, b, t, {d: (NEED_REPLICATION, why) for d in dims})
    keep = [d for d in range(t.ndim) if d not in dims]
    return b.sign([src], [src[d] for d in keep], [t.sizes[d] for d in keep])


def _unsqueeze(c: BuildContext) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    d = c.dim(c.param("dim", required=True), t.ndim + 1)
    b = FactorBuilder()
    src = same_dims(c, b, t)
    return b.sign([src], src[:d] + [()] + src[d:], list(t.sizes[:d]) + [1] + list(t.sizes[d:]))


def _expand(c: BuildContext) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    size = c.param(str(c.row.arg), "size", "shape", required=True)
    if not isinstance(size, (tuple, list)):
        raise c.bad(f"{c.row.arg} must be a literal tuple, got {size!r}")
    if len(size) < t.ndim:
        raise c.bad(f"cannot expand rank {t.ndim} to {len(size)} dims")
    b = FactorBuilder()
    src = same_dims(c, b, t)
    lead = len(size) - t.ndim
    result: List[Tuple[str, ...]] = []
    sizes: List[Optional[int]] = []
    ins = list(src)
    for e, s in enumerate(size):
        literal = s if isinstance(s, int) and not isinstance(s, bool) and s >= 0 else None
        if e < lead:
            result.append((b.new(PASS, literal),))
            sizes.append(literal)
            continue
        d = e - lead
        if s == -1 or literal is None or t.sizes[d] in (None, literal):
            result.append(src[d])
            sizes.append(t.sizes[d] if literal is None else literal)
        elif t.sizes[d] == 1:
            ins[d] = ()  # broadcast: the expanded dim is a new factor
            result.append((b.new(PASS, literal),))
            sizes.append(literal)
        else:
            raise c.bad(f"cannot expand dim {d} of size {t.sizes[d]} to {literal}")
    return b.sign([ins], result, sizes)


def _common_rank(c: BuildContext) -> int:
    """The rank all of cat's / stack's tensor operands share."""
    c.count(1)
    ranks = {c.tensor(k).ndim for k in range(len(c.operands))}
    if len(ranks) != 1:
        raise c.bad(f"takes tensors of one rank, got ranks {sorted(ranks)}")
    return ranks.pop()


def _cat(c: BuildContext) -> Signature:
    n = _common_rank(c)
    d = c.dim(c.param("dim", "axis", default=0), n)
    b = FactorBuilder()
    why = f"{c.op} concatenates along it"
    fs = [b.new(NEED_REPLICATION if e == d else PASS, None, why if e == d else "", name=f"d{e}") for e in range(n)]
    sizes: List[Optional[int]] = []
    for e in range(n):
        known = [c.tensor(k).sizes[e] for k in range(len(c.operands))]
        if e == d:
            sizes.append(sum(known) if None not in known else None)  # type: ignore[arg-type]
        else:
            sizes.append(next((s for s in known if s is not None), None))
            if sizes[-1] is not None:
                b.sizes[fs[e]] = sizes[-1]
    ops = [[(f,) for f in fs] for _ in c.operands]
    return b.sign(ops, [(f,) for f in fs], sizes)


def _stack(c: BuildContext) -> Signature:
    n = _common_rank(c)
    d = c.dim(c.param("dim", "axis", default=0), n + 1)
    b = FactorBuilder()
    fs = [b.new(PASS, name=f"d{e}") for e in range(n)]
    sizes: List[Optional[int]] = []
    for e in range(n):
        known = [c.tensor(k).sizes[e] for k in range(len(c.operands))]
        sizes.append(next((s for s in known if s is not None), None))
    new = b.new(PASS, len(c.operands), name="stacked")
    result = [(f,) for f in fs]
    result.insert(d, (new,))
    sizes.insert(d, len(c.operands))
    return b.sign([[(f,) for f in fs] for _ in c.operands], result, sizes)


FAMILIES: Final[Mapping[str, Callable[[BuildContext], Signature]]] = {
    "reshape": _reshape,
    "flatten": _flatten,
    "unflatten": _unflatten,
    "permute": _permute,
    "squeeze": _squeeze,
    "unsqueeze": _unsqueeze,
    "expand": _expand,
    "cat": _cat,
    "stack": _stack,
}
