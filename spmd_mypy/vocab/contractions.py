"""Which dims a product contracts: local mode's contraction rule.

A product whose contracted dim is sharded on an axis in two operands (a
row-parallel `h @ w2`, `F.linear(h, w)` with h: S(-1) and w: S(1)) leaves on
each rank its partial sum of the product.  The per-axis rule of a
multilinear op (opclasses.combine) types that result V, so a forgotten
reduction would go unnoticed; the checker reports it unless the code says
the value is a pending sum (`spmd.matmul(..., out_partial_axes=...)`, or
`spmd.reinterpret(..., src=V, dst=P)` on the product).

`CONTRACTIONS` gives, per op and product operand (in source order), the dim
that operand contracts for each rank the op admits; `EINSUM` ops read it
from the equation.  An operand's S(i) is, on its own:

  certain  the contracted dim at every rank S(i) and the op allow (S(-1) on
           the left of `@`, S(1) of F.linear's 2-D weight, S(2) in bmm, a
           spec-form operand whose spec gives the rank);
  read     the contracted dim when the operand is read as a matrix (rank
           max(2, i + 1)) though the op allows other ranks (`h: S(1)` in
           `h @ w2`);
  no       otherwise.

The product is a partial sum on the axis when two operands are certain, or
certain and read, or both read; or when one is certain and another is V
(a V operand whose contracted dim meets a shard must be that dim's shard
too, or the shapes would not agree).  Pure Python.
"""

from __future__ import annotations

from typing import Final, Mapping, Optional, Sequence, Tuple

from .localtype import AxisType, Shard, V, normalize_dim

__all__ = ["CONTRACTIONS", "EINSUM", "ONE_CALL", "TRANSPOSES", "partial_operands", "einsum_letters", "transposed_dim"]

# (lowest rank, highest rank or None, contracted dim) for one product operand
Alternative = Tuple[int, Optional[int], int]

_MATMUL: Final = (((1, None, -1),), ((1, 1, 0), (2, None, -2)))
_MM: Final = (((2, 2, 1),), ((2, 2, 0),))
_BMM: Final = (((3, 3, 2),), ((3, 3, 1),))
_MV: Final = (((2, 2, 1),), ((1, 1, 0),))
_DOT: Final = (((1, 1, 0),), ((1, 1, 0),))

# op name (torch function, Tensor method, operator dunder) -> per product
# operand in source order (affine ops: their product operands, opclasses.AFFINE)
CONTRACTIONS: Final[Mapping[str, Tuple[Tuple[Alternative, ...], ...]]] = {
    "matmul": _MATMUL,
    "__matmul__": _MATMUL,
    "__rmatmul__": _MATMUL,  # operands in source order (opclasses.REFLECTED)
    "linalg.matmul": _MATMUL,
    "mm": _MM,
    "addmm": _MM,
    "bmm": _BMM,
    "baddbmm": _BMM,
    "addbmm": _BMM,
    "mv": _MV,
    "addmv": _MV,
    "dot": _DOT,
    "vdot": _DOT,
    "inner": (((1, None, -1),), ((1, None, -1),)),
    "linear": (((1, None, -1),), ((1, 1, 0), (2, 2, 1))),  # F.linear(input, weight)
    # F.conv{n}d(input [b, c_in, *s], weight [c_out, c_in, *k]); conv_transpose's
    # weight is [c_in, c_out, *k].  The input is read batched: its S(1) is c_in
    # (an unbatched input's S(0) beside a sharded weight is not flagged)
    **{f"conv{kind}{n}d": (((n + 2, n + 2, 1),), ((n + 2, n + 2, w),))
       for kind, w in (("", 1), ("_transpose", 0)) for n in (1, 2, 3)},
}

EINSUM: Final = frozenset({"einsum"})

# op -> the spmd function that takes out_partial_axes and computes the same
# product (the one-call fix); ops absent here are fixed with reinterpret.
ONE_CALL: Final[Mapping[str, str]] = {
    "matmul": "matmul", "__matmul__": "matmul", "__rmatmul__": "matmul", "linalg.matmul": "matmul",
    "mm": "matmul", "bmm": "matmul", "mv": "matmul", "dot": "matmul",
    "linear": "linear", "einsum": "einsum",
}

_MAX_RANK: Final = 8  # ranks tried for an operand whose rank the op leaves open

CERTAIN, READ, NO = "certain", "read", "no"


def _ranks(alt: Alternative, dim: int, ndim: Optional[int]) -> range:
    low, high, _ = alt
    least = dim + 1 if dim >= 0 else -dim
    if ndim is not None:
        return range(ndim, ndim + 1) if low <= ndim <= (high or ndim) and least <= ndim else range(0)
    return range(max(low, least), (high or _MAX_RANK) + 1)


def _status(alts: Tuple[Alternative, ...], dim: int, ndim: Optional[int]) -> str:
    hits = []
    for alt in alts:
        for r in _ranks(alt, dim, ndim):
            hits.append((r, normalize_dim(dim, r) == normalize_dim(alt[2], r)))
    if not hits:
        return NO
    if all(hit for _, hit in hits):
        return CERTAIN
    least = max(2, dim + 1) if dim >= 0 else -dim  # read as a matrix
    matrix = [hit for r, hit in hits if r == least]
    return READ if matrix and all(matrix) else NO


def partial_operands(
    name: str, operands: Sequence[Tuple[Optional[AxisType], Optional[int]]], equation: Optional[str] = None
) -> Optional[Tuple[int, ...]]:
    """The product operands (indices) whose shards of a contracted dim make
    the result a partial sum on one axis; None when it is not one.
    `operands`: each product operand's type on the axis and its rank if known."""
    if name in EINSUM:
        return _einsum_partial(operands, equation)
    table = CONTRACTIONS.get(name)
    if table is None or len(operands) < len(table):
        return None
    statuses = []
    for alts, (t, ndim) in zip(table, operands):
        if isinstance(t, Shard):
            statuses.append(_status(alts, t.dim, ndim))
        else:
            statuses.append("V" if t is V else NO)
    sharded = [k for k, s in enumerate(statuses) if s in (CERTAIN, READ)]
    if CERTAIN in statuses and len(sharded) + statuses.count("V") >= 2:
        return tuple(k for k, s in enumerate(statuses) if s != NO)
    if len(sharded) >= 2:
        return tuple(sharded)
    return None


def einsum_letters(equation: str) -> Optional[Tuple[Tuple[str, ...], str]]:
    """(each operand's subscripts, the output's subscripts) of an einsum
    equation ("..." kept as the one letter "."); None if it does not parse."""
    eq = equation.replace(" ", "").replace("...", ".")
    inputs, arrow, output = eq.partition("->")
    parts = tuple(inputs.split(","))
    if not all(p and all(c.isalpha() or c == "." for c in p) for p in parts):
        return None
    if not arrow:  # implicit output: the letters written once, sorted
        letters = "".join(parts)
        output = "".join(sorted(c for c in set(letters) if c != "." and letters.count(c) == 1))
        output = ("." if "." in letters else "") + output
    return parts, output


def _letter(subscripts: str, dim: int, ndim: Optional[int]) -> Optional[str]:
    """The letter of dim `dim` of an operand with these subscripts."""
    if "." not in subscripts:
        if ndim is not None and ndim != len(subscripts):
            return None
        if not -len(subscripts) <= dim < len(subscripts):
            return None
        return subscripts[dim]
    before, _, after = subscripts.partition(".")
    if 0 <= dim < len(before):
        return before[dim]
    if dim < 0 and -dim <= len(after):
        return after[dim]
    return None  # a dim under the ellipsis: a batch dim


def _einsum_partial(
    operands: Sequence[Tuple[Optional[AxisType], Optional[int]]], equation: Optional[str]
) -> Optional[Tuple[int, ...]]:
    parsed = einsum_letters(equation) if equation is not None else None
    if parsed is None or len(parsed[0]) != len(operands):
        return None
    parts, output = parsed
    for letter in sorted({c for p in parts for c in p if c != "." and c not in output}):
        holders = [k for k, p in enumerate(parts) if letter in p]
        certain = [k for k in holders if isinstance(operands[k][0], Shard)
                   and _letter(parts[k], operands[k][0].dim, operands[k][1]) == letter]  # type: ignore[union-attr]
        varying = [k for k in holders if operands[k][0] is V]
        if len(certain) >= 2 or (certain and varying):
            return tuple(sorted(certain + varying))
    return None


# -- transposing views: where a shard's dim goes ------------------------------------
# Local mode follows S(i) through these (the other linear ops make it V), so
# that the product after `w.t()` or `k.transpose(-2, -1)` still sees which
# dim is sharded.  name -> how it moves dims.
TRANSPOSES: Final[Mapping[str, str]] = {
    "t": "reverse", "T": "reverse", "H": "reverse",  # dim i -> -1 - i at any rank
    "mT": "last two", "mH": "last two", "adjoint": "last two",
    "transpose": "swap", "swapaxes": "swap", "swapdims": "swap",
}


def transposed_dim(name: str, dim: int, dims: Sequence[int]) -> Optional[int]:
    """The dim a shard of `dim` is on after the transposing view `name` with
    the literal dims `dims` (for transpose); None when the rank would decide."""
    how = TRANSPOSES.get(name)
    if how == "reverse":
        return -1 - dim
    if how == "last two":
        swap = {-1: -2, -2: -1}
        return swap.get(dim, dim) if dim < 0 else None
    if how == "swap" and len(dims) == 2:
        d0, d1 = dims
        if len({d >= 0 for d in (dim, d0, d1)}) != 1:
            return None  # a negative and a non-negative dim: the rank decides
        return d1 if dim == d0 else d0 if dim == d1 else dim
    return None
