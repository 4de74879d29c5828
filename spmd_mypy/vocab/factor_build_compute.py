"""Factor builders of the compute families: pointwise, products (einsum, matmul,
linear, conv), reductions, ops along a dim, norms.

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

import re
from typing import Callable, Final, List, Mapping, Optional, Sequence, Tuple

from .factor_signature import BuildContext, FactorBuilder, Signature, same_dims
from .factor_table import NEED_REPLICATION, PASS, PERMUTATION, REDUCE, SUM
from .globaltype import GlobalType

__all__ = ["FAMILIES"]


def _pointwise(c: BuildContext) -> Signature:
    ranks = [o.ndim if isinstance(o, GlobalType) else 0 for o in c.operands]
    if not any(isinstance(o, GlobalType) for o in c.operands):
        raise c.bad("has no tensor operand")
    rank = max(ranks)
    b = FactorBuilder()
    aligned: List[List[Optional[int]]] = [[] for _ in range(rank)]
    for o in c.operands:
        if isinstance(o, GlobalType):
            for j, s in enumerate(o.sizes):
                aligned[rank - o.ndim + j].append(s)
    res_sizes: List[Optional[int]] = []
    for d in range(rank):
        known = [s for s in aligned[d] if s is not None]
        big = [s for s in known if s != 1]
        if len(set(big)) > 1:
            raise c.bad(f"sizes {sorted(set(big))} do not broadcast at result dim {d}")
        if big:
            res_sizes.append(big[0])
        elif len(known) == len(aligned[d]):
            res_sizes.append(1)
        else:
            res_sizes.append(None)
    fs = [b.new(PASS, res_sizes[d], name=f"d{d}") for d in range(rank)]
    ops: List[Tuple[Tuple[str, ...], ...]] = []
    for o in c.operands:
        if not isinstance(o, GlobalType):
            ops.append(())
            continue
        dims: List[Tuple[str, ...]] = []
        for j, s in enumerate(o.sizes):
            d = rank - o.ndim + j
            dims.append(() if s == 1 and res_sizes[d] != 1 else (fs[d],))
        ops.append(tuple(dims))
    return b.sign(ops, [(f,) for f in fs], res_sizes)


_LABEL = re.compile(r"[A-Za-z]|\.\.\.")


def _einsum_terms(c: BuildContext, eq: str, product: Sequence[int]) -> Tuple[List[List[str]], List[str], int]:
    """The labels of each product operand, the output labels, and the ellipsis rank."""
    text = eq.replace(" ", "")
    if "->" in text:
        lhs, rhs = text.split("->", 1)
        explicit = True
    else:
        lhs, rhs, explicit = text, "", False
    terms = lhs.split(",")
    if len(terms) != len(product):
        raise c.bad(f"equation {eq!r} has {len(terms)} operands, got {len(product)} tensors")
    parsed: List[List[str]] = []
    for term in terms:
        labels = _LABEL.findall(term)
        if "".join(labels) != term or labels.count("...") > 1:
            raise c.bad(f"cannot read einsum term {term!r} of {eq!r}")
        parsed.append(labels)
    n_ell = 0
    for k, labels in zip(product, parsed):
        t = c.tensor(k)
        named = len([x for x in labels if x != "..."])
        if "..." in labels:
            if t.ndim < named:
                raise c.bad(f"term {''.join(labels)!r} needs rank >= {named}, operand {k} has rank {t.ndim}")
            n_ell = max(n_ell, t.ndim - named)
        elif t.ndim != named:
            raise c.bad(f"term {''.join(labels)!r} needs rank {named}, operand {k} has rank {t.ndim}")
    if explicit:
        out = _LABEL.findall(rhs)
        if "".join(out) != rhs:
            raise c.bad(f"cannot read einsum output {rhs!r} of {eq!r}")
    else:
        flat = [x for labels in parsed for x in labels if x != "..."]
        out = (["..."] if any("..." in p for p in parsed) else []) + sorted(
            x for x in set(flat) if flat.count(x) == 1
        )
    return parsed, out, n_ell


def _einsum_operand_dims(
    c: BuildContext, b: FactorBuilder, product: Sequence[int], parsed: List[List[str]], ell: List[str]
) -> List[Tuple[Tuple[str, ...], ...]]:
    """Each product operand's dims as factors (a broadcast batch dim holds none)."""
    ops: List[Tuple[Tuple[str, ...], ...]] = [()] * len(c.operands)
    for k, labels in zip(product, parsed):
        t = c.tensor(k)
        mine = t.ndim - len([x for x in labels if x != "..."])
        factors: List[str] = []
        for x in labels:
            factors.extend(ell[len(ell) - mine :] if x == "..." else [x])
        dims: List[Tuple[str, ...]] = []
        for f, s in zip(factors, t.sizes):
            if f.startswith("*") and s == 1:
                dims.append(())  # a broadcast batch dim
            else:
                dims.append((f,))
                b.learn((f,), s)
        ops[k] = tuple(dims)
    return ops


def _einsum_core(c: BuildContext, eq: str, product: Sequence[int], bias: Optional[int]) -> Signature:
    parsed, out, n_ell = _einsum_terms(c, eq, product)
    ell = [f"*{j}" for j in range(n_ell)]
    b = FactorBuilder()
    for labels in parsed:
        for x in labels:
            if x != "..." and x not in b.kinds:
                b.new(SUM if x not in out else PASS, name=x)
    for e in ell:
        b.new(PASS if "..." in out else SUM, name=e)
    for x in out:
        if x != "..." and x not in b.kinds:
            raise c.bad(f"output label {x!r} of {eq!r} is in no operand")
    ops = _einsum_operand_dims(c, b, product, parsed, ell)
    result: List[Tuple[str, ...]] = []
    for x in out:
        for f in ell if x == "..." else [x]:
            result.append((f,))
    res_sizes = [b.size_of(d) for d in result]
    for d, f in enumerate(result):
        if f[0].startswith("*") and f[0] not in b.sizes:
            # every operand broadcasts this batch dim: size 1 if all said so
            if any(f[0] in dd for k in product for dd in ops[k]):
                continue
            res_sizes[d] = 1
    if bias is not None:
        t = c.tensor(bias)
        if t.ndim > len(result):
            raise c.bad(f"the bias has rank {t.ndim}, more than the result's {len(result)}")
        bias_dims: List[Tuple[str, ...]] = []
        for j, s in enumerate(t.sizes):
            f = result[len(result) - t.ndim + j]
            bias_dims.append(() if s == 1 and res_sizes[len(result) - t.ndim + j] != 1 else f)
        ops[bias] = tuple(bias_dims)
    return b.sign(ops, result, res_sizes)


def _einsum(c: BuildContext) -> Signature:
    if c.row.arg is not None:
        bias = c.row.bias
        n = 2 if bias is None else 3
        c.count(n, n)
        product = [k for k in range(n) if k != bias]
        return _einsum_core(c, str(c.row.arg), product, bias)
    eq = c.param("equation", required=True)
    if not isinstance(eq, str):
        raise c.bad(f"the equation must be a literal string, got {eq!r}")
    c.count(1)
    return _einsum_core(c, eq, list(range(len(c.operands))), None)


def _matmul_eq(p: int, q: int) -> Optional[str]:
    if p == 0 or q == 0:
        return None
    if p == 1 and q == 1:
        return "k,k->"
    if q == 1:
        return "...ik,k->...i"
    if p == 1:
        return "k,...kj->...j"
    return "...ik,...kj->...ij"


def _matmul(c: BuildContext) -> Signature:
    c.count(2, 2)
    eq = _matmul_eq(c.tensor(0).ndim, c.tensor(1).ndim)
    if eq is None:
        raise c.bad("does not take rank-0 operands")
    return _einsum_core(c, eq, [0, 1], None)


def _linear(c: BuildContext) -> Signature:
    c.count(2, 3)
    x, w = c.tensor(0), c.tensor(1)
    if x.ndim < 1 or w.ndim not in (1, 2):
        raise c.bad(f"takes an input of rank >= 1 and a weight of rank 1 or 2, got {x.ndim} and {w.ndim}")
    eq = "...i,oi->...o" if w.ndim == 2 else "...i,i->..."
    return _einsum_core(c, eq, [0, 1], 2 if len(c.operands) == 3 else None)


def _reduce_dims(c: BuildContext, t: GlobalType, key: str = "dim") -> Tuple[int, ...]:
    dim = c.param(key, "axis", default=None)
    if dim is None or dim == () or dim == []:
        return tuple(range(t.ndim))
    return c.dims(dim, t.ndim)


def _reduce(c: BuildContext) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    how = str(c.row.arg)
    dims = _reduce_dims(c, t)
    if c.param("dim", "axis") is None and how in ("argmax", "argmin"):
        keep = False
    else:
        keep = bool(c.param("keepdim", default=False))
    b = FactorBuilder()
    kinds = {d: (SUM, "sum") if how == "sum" else (REDUCE, how) for d in dims}
    src = same_dims(c, b, t, kinds)
    result: List[Tuple[str, ...]] = []
    sizes: List[Optional[int]] = []
    for d in range(t.ndim):
        if d in dims:
            if keep:
                result.append(())
                sizes.append(1)
        else:
            result.append(src[d])
            sizes.append(t.sizes[d])
    return b.sign([src], result, sizes)


def _along(c: BuildContext) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    arg: Tuple[str, str, object, str] = c.row.arg  # type: ignore[assignment]
    kind, key, default, why = arg
    value = c.param(key, default=default)
    if value is None:
        if key == "dims":  # roll without dims flattens: every dim moves
            dims: Tuple[int, ...] = tuple(range(t.ndim))
        else:
            raise c.bad(f"needs the literal argument {key!r}")
    else:
        dims = c.dims(value, t.ndim, key)
    b = FactorBuilder()
    src = same_dims(c, b, t, {d: (kind, why) for d in dims})
    sizes = list(t.sizes)
    if c.op == "topk":
        k = c.param("k", required=True)
        for d in dims:
            sizes[d] = k if isinstance(k, int) and not isinstance(k, bool) else None
    return b.sign([src], src, sizes)


def _norm(c: BuildContext) -> Signature:
    c.count(1, 3)
    t = c.tensor(0)
    shape = c.param("normalized_shape", default=None)
    if shape is None:
        if len(c.operands) < 2:
            raise c.bad("needs the literal argument 'normalized_shape' (or a weight)")
        n = c.tensor(1).ndim
    else:
        n = len(shape) if isinstance(shape, (tuple, list)) else 1
    if n > t.ndim or n < 1:
        raise c.bad(f"normalizes {n} trailing dims of a rank-{t.ndim} input")
    b = FactorBuilder()
    why = f"{c.op} normalises over it"
    src = same_dims(c, b, t, {d: (NEED_REPLICATION, why) for d in range(t.ndim - n, t.ndim)})
    ops = [src]
    for k in range(1, len(c.operands)):
        w = c.tensor(k)
        if w.ndim != n:
            raise c.bad(f"operand {k} has rank {w.ndim}, not the {n} normalized dims")
        ops.append(src[t.ndim - n :])
    return b.sign(ops, src, t.sizes)


def _conv(c: BuildContext) -> Signature:
    c.count(2, 3)
    n = int(c.row.arg)  # type: ignore[call-overload]
    x, w = c.tensor(0), c.tensor(1)
    if x.ndim not in (n + 1, n + 2) or w.ndim != n + 2:
        raise c.bad(f"takes an input of rank {n + 1} or {n + 2} and a weight of rank {n + 2}")
    groups = c.param("groups", default=1)
    batched = x.ndim == n + 2
    b = FactorBuilder()
    window = "the convolution window crosses shard boundaries"
    batch = [(b.new(PASS, x.sizes[0], name="batch"),)] if batched else []
    off = 1 if batched else 0
    if groups == 1:
        cin = b.new(SUM, x.sizes[off], name="cin")
        wcin = cin
    else:
        why = "a grouped convolution splits channels by group"
        cin = b.new(NEED_REPLICATION, x.sizes[off], why, name="cin")
        wcin = b.new(NEED_REPLICATION, w.sizes[1], why, name="cin_per_group")
    cout = b.new(PASS, w.sizes[0], name="cout")
    space = [b.new(PERMUTATION, None, window, name=f"s{k}") for k in range(n)]
    kernel = [b.new(NEED_REPLICATION, w.sizes[2 + k], "it is the convolution window", name=f"k{k}") for k in range(n)]
    xs = batch + [(cin,)] + [(s,) for s in space]
    ws = [(cout,), (wcin,)] + [(k,) for k in kernel]
    res = batch + [(cout,)] + [(s,) for s in space]
    sizes = ([x.sizes[0]] if batched else []) + [w.sizes[0]] + [None] * n
    ops = [xs, ws]
    if len(c.operands) == 3:
        bias = c.tensor(2)
        if bias.ndim != 1:
            raise c.bad(f"takes a rank-1 bias, got rank {bias.ndim}")
        ops.append([(cout,)])
    return b.sign(ops, res, sizes)


FAMILIES: Final[Mapping[str, Callable[[BuildContext], Signature]]] = {
    "pointwise": _pointwise,
    "einsum": _einsum,
    "matmul": _matmul,
    "linear": _linear,
    "reduce": _reduce,
    "along": _along,
    "norm": _norm,
    "conv": _conv,
}
