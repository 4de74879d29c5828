"""The factor table of global SPMD: op families as data, and their builders.

Each torch name maps to a `Row` (a builder family and its fixed data); a
builder turns the operand ranks, known sizes and literal arguments into a
`Signature`: the factors of every operand dim and result dim, each with its
kind.  `factors.py` checks a signature (see its docstring for the rules).

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Dict, Final, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union

from .collectives import fix_call
from .globaltype import GlobalType, dtype_name
from .localtype import I, LocalType, P, R, V, normalize_dim
from .opclasses import (
    LINEAR,
    MULTILINEAR,
    NO_GRAD_RESULTS,
    NONLINEAR,
    RANDOM,
    SCALAR,
    OpRuleError,
    combine,
    op_class_or_none,
)
from .spec import SpecError

__all__ = [
    "PASS",
    "SUM",
    "REDUCE",
    "NEED_REPLICATION",
    "PERMUTATION",
    "FactorError",
    "Row",
    "Signature",
    "FACTOR_TABLE",
    "has_rule",
]

PASS: Final = "pass-through"
SUM: Final = "sum"
REDUCE: Final = "reduction"
NEED_REPLICATION: Final = "need-replication"
PERMUTATION: Final = "permutation"


class FactorError(TypeError):
    """A global SPMD rule violated by an op: `message`, and `fix`, the call to write.

    `code` is a stable short name of the rule (see RULES).
    """

    def __init__(self, message: str, fix: str = "", *, code: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.code = code


# Every rule's code and what it says (the checker's error list).
RULES: Final[Mapping[str, str]] = {
    "sharded-replicated": "operands sharing a dim must all be sharded on it alike (no implicit slicing or all-reduce)",
    "conflicting-axes": "operands sharing a dim must carry identical axes",
    "need-replication": "the op needs the whole dim on every rank",
    "permutation": "the op moves elements along the dim, across shard boundaries",
    "reduce-sharded": "a non-sum reduction over a sharded dim has no partial type",
    "needs-out-partial": "a sharded contracted/summed dim needs out_partial_axes",
    "out-partial-mismatch": "out_partial_axes must equal the axes of the sharded summed dims",
    "axis-twice": "no mesh axis may shard two dims of the result (or shard one and be partial)",
    "broadcast-sharded": "a broadcast (size-1) dim cannot be sharded",
    "reshape-minor": "a merged dim can be sharded on its major part only",
    "sub-axis": "the reshape would need a sub-axis, which a PartitionSpec cannot express",
    "not-divisible": "the reshape splits a sharded dim where the axis size does not divide",
    "unknown-sizes": "a reshape of a sharded tensor needs known sizes",
    "local-global-mixed": "an axis is sharded in one operand and Varying (local mode) in another",
    "partial-index": "an index operand cannot be Partial",
    "partial-nonlinear": "(opclasses) a Partial operand enters a nonlinear op",
    "partial-mixed": "(opclasses) a Partial operand is added to / multiplied by a non-Replicate one",
    "partial-scalar": "(opclasses) a Python scalar is added to a Partial operand",
    "partial-product": "(opclasses) two Partial operands are multiplied",
    "partial-denominator": "(opclasses) a Partial value is a denominator",
    "invariant-mixed": "(opclasses) an Invariant operand is mixed with other types",
    "bad-param": "a literal argument or an operand's rank does not fit the op",
    "no-rule": "the op has no global propagation rule",
    # collectives on global types (spec_collectives.py)
    "collective": "(collectives) src/dst is not a valid pair for the op",
    "src-mismatch": "a collective's src does not match the value's type on the axis",
    "not-minor": "a per-axis collective acts only on the minor axes of a dim",
    "varying-form": "the V forms of collectives have no global rule",
    "reinterpret-global": "a reinterpret that changes the global value has no global rule",
}


# -- the table -------------------------------------------------------------------


class Row(NamedTuple):
    """One op: its builder family and fixed arguments.

    cls:    class for the per-axis rule (default: opclasses' class of the name)
    bias:   operand index of an affine bias (result = product + bias)
    indices: operands that are indices (never Partial; the op is linear in the rest)
    values: operand indices whose values enter the result (default: all)
    """

    family: str
    arg: object = None
    cls: Optional[str] = None
    bias: Optional[int] = None
    indices: Tuple[int, ...] = ()
    values: Optional[Tuple[int, ...]] = None


def _names(text: str) -> Tuple[str, ...]:
    return tuple(text.split())


# Elementwise ops (broadcasting right-aligned dims).  Their per-axis class comes
# from opclasses (add: linear, mul: multilinear, div: divide, the rest nonlinear).
_POINTWISE = _names(
    """
    add sub subtract neg negative positive mul multiply div divide true_divide rsub
    __add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __neg__ __pos__
    __mul__ __rmul__ __imul__ __truediv__ __rtruediv__ __itruediv__
    clone contiguous detach to float double half bfloat16 long int bool type
    relu gelu silu sigmoid tanh exp exp2 log log2 log10 log1p expm1 sqrt rsqrt abs pow
    square reciprocal sign sin cos erf clamp clip clamp_min clamp_max maximum minimum
    where lerp addcmul addcdiv masked_fill nan_to_num softplus mish hardtanh leaky_relu
    elu selu celu hardswish hardsigmoid logit floor ceil round trunc frac fmod remainder
    eq ne lt le gt ge __eq__ __ne__ __lt__ __le__ __gt__ __ge__
    logical_not logical_and logical_or logical_xor isnan isinf isfinite
    dropout alpha_dropout feature_alpha_dropout rand_like randn_like bernoulli
    zeros_like ones_like empty_like full_like
    special.expit special.erf special.erfc special.erfcx special.erfinv special.exp2
    special.expm1 special.log1p special.logit special.ndtr special.ndtri special.log_ndtr
    special.i0 special.i0e special.i1 special.i1e special.digamma special.psi
    special.gammaln special.entr special.sinc special.round special.xlogy special.xlog1py
    """
)

# einsum equations of the fixed-rank products; the bias operand of affine ops.
_EINSUM_FIXED: Final[Mapping[str, Tuple[str, Optional[int]]]] = {
    "mm": ("ij,jk->ik", None),
    "bmm": ("bij,bjk->bik", None),
    "mv": ("ij,j->i", None),
    "dot": ("i,i->", None),
    "vdot": ("i,i->", None),
    "outer": ("i,j->ij", None),
    "ger": ("i,j->ij", None),
    "addmm": ("ij,jk->ik", 0),
    "addmv": ("ij,j->i", 0),
    "addbmm": ("bij,bjk->ik", 0),
    "baddbmm": ("bij,bjk->bik", 0),
    "addr": ("i,j->ij", 0),
}

# Reductions: name -> how the reduced dims combine ("sum" may become P).
_REDUCTIONS: Final[Mapping[str, str]] = {
    "sum": "sum",
    "nansum": "sum",
    "mean": "mean",
    "nanmean": "mean",
    "amax": "max",
    "amin": "min",
    "prod": "product",
    "logsumexp": "logsumexp",
    "std": "standard deviation",
    "var": "variance",
    "argmax": "argmax",
    "argmin": "argmin",
    "all": "logical and",
    "any": "logical or",
}

# Ops along one or more dims that must be whole: name -> (kind, param, default, why).
_ALONG: Final[Mapping[str, Tuple[str, str, object, str]]] = {
    "softmax": (NEED_REPLICATION, "dim", None, "softmax normalises over it"),
    "log_softmax": (NEED_REPLICATION, "dim", None, "log_softmax normalises over it"),
    "cumsum": (NEED_REPLICATION, "dim", None, "a cumulative op runs along it"),
    "cumprod": (NEED_REPLICATION, "dim", None, "a cumulative op runs along it"),
    "logcumsumexp": (NEED_REPLICATION, "dim", None, "a cumulative op runs along it"),
    "cummax": (NEED_REPLICATION, "dim", None, "a cumulative op runs along it"),
    "cummin": (NEED_REPLICATION, "dim", None, "a cumulative op runs along it"),
    "sort": (NEED_REPLICATION, "dim", -1, "sort orders along it"),
    "argsort": (NEED_REPLICATION, "dim", -1, "argsort orders along it"),
    "topk": (NEED_REPLICATION, "dim", -1, "topk ranks along it"),
    "flip": (PERMUTATION, "dims", None, "flip reverses it"),
    "roll": (PERMUTATION, "dims", None, "roll shifts along it"),
}

_DTYPE_RESULT: Final[Mapping[str, str]] = {
    "float": "f32",
    "double": "f64",
    "half": "f16",
    "bfloat16": "bf16",
    "long": "i64",
    "int": "i32",
    "bool": "bool",
    "argmax": "i64",
    "argmin": "i64",
    "argsort": "i64",
    **{n: "bool" for n in _names("eq ne lt le gt ge __eq__ __ne__ __lt__ __le__ __gt__ __ge__")},
    **{n: "bool" for n in _names("logical_not logical_and logical_or logical_xor isnan isinf isfinite all any")},
}


def _table() -> Dict[str, Row]:
    t: Dict[str, Row] = {n: Row("pointwise") for n in _POINTWISE}
    t["expand_as"] = Row("pointwise", values=(0,))
    t["matmul"] = Row("matmul")
    t["linalg.matmul"] = Row("matmul")
    t["__matmul__"] = Row("matmul")
    t["__rmatmul__"] = Row("matmul")
    t["einsum"] = Row("einsum")
    for name, (eq, bias) in _EINSUM_FIXED.items():
        t[name] = Row("einsum", eq, bias=bias)
    t["linear"] = Row("linear", bias=2)
    for name, how in _REDUCTIONS.items():
        t[name] = Row("reduce", how)
    for name, arg in _ALONG.items():
        t[name] = Row("along", arg)
    for name in ("view", "reshape"):
        t[name] = Row("reshape")
    t["flatten"] = Row("flatten")
    t["ravel"] = Row("flatten", "all")
    t["unflatten"] = Row("unflatten")
    for name in ("transpose", "swapaxes", "swapdims", "t", "permute", "movedim", "moveaxis"):
        t[name] = Row("permute", name)
    t["squeeze"] = Row("squeeze")
    t["unsqueeze"] = Row("unsqueeze")
    t["expand"] = Row("expand", "size")
    t["broadcast_to"] = Row("expand", "shape")
    for name in ("cat", "concat", "concatenate"):
        t[name] = Row("cat")
    t["stack"] = Row("stack")
    for name in ("narrow", "select", "split", "chunk", "tensor_split", "unbind"):
        t[name] = Row("slice", name)
    t["__getitem__"] = Row("getitem")
    t["index_select"] = Row("index_select", cls=MULTILINEAR, indices=(1,))
    t["gather"] = Row("gather", cls=MULTILINEAR, indices=(1,))
    t["take_along_dim"] = Row("gather", cls=MULTILINEAR, indices=(1,))
    t["embedding"] = Row("embedding", cls=MULTILINEAR, indices=(0,))
    t["layer_norm"] = Row("norm")
    t["rms_norm"] = Row("norm")
    for name, n in (("conv1d", 1), ("conv2d", 2), ("conv3d", 3)):
        t[name] = Row("conv", n, bias=2)
    return t


FACTOR_TABLE: Final[Mapping[str, Row]] = _table()


def has_rule(op: str) -> bool:
    """Whether `op` has a global propagation rule."""
    return op in FACTOR_TABLE


# -- signatures --------------------------------------------------------------------

Dims = Tuple[Tuple[str, ...], ...]


class Signature(NamedTuple):
    """Factors of one op application: operand dims, result dims, kinds and sizes."""

    operands: Tuple[Dims, ...]  # per operand (scalars: ()), per dim, factors major to minor
    result: Dims
    kinds: Mapping[str, str]
    sizes: Mapping[str, int]  # known factor sizes
    result_sizes: Tuple[Optional[int], ...]
    why: Mapping[str, str]  # factor -> why it must stay whole / how it is reduced


Operand = Union[GlobalType, object]  # a GlobalType or a Python scalar (SCALAR, int, float)


def _is_scalar(x: object) -> bool:
    return x is SCALAR or (isinstance(x, (int, float, complex)) and not isinstance(x, bool))


class _Ctx:
    """What a builder sees: the op, its row, operands, literal params, names."""

    def __init__(
        self, op: str, row: Row, operands: Sequence[Operand], params: Mapping[str, object], names: Sequence[str]
    ) -> None:
        self.op = op
        self.row = row
        self.operands = operands
        self.params = params
        self.names = names

    def tensor(self, k: int) -> GlobalType:
        if k >= len(self.operands) or not isinstance(self.operands[k], GlobalType):
            raise self.bad(f"expects a tensor as operand {k}")
        return self.operands[k]  # type: ignore[return-value]

    def count(self, lo: int, hi: Optional[int] = None) -> None:
        n = len(self.operands)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if hi == lo else f"{lo} to {hi}" if hi is not None else f"at least {lo}"
            raise self.bad(f"takes {want} tensor operands, got {n}")
        for k in range(n):
            self.tensor(k)

    def bad(self, why: str) -> FactorError:
        return FactorError(f"{self.op}: {why}", code="bad-param")

    def param(self, *keys: str, default: object = None, required: bool = False) -> object:
        for k in keys:
            if k in self.params:
                return self.params[k]
        if required:
            raise self.bad(f"needs the literal argument {keys[0]!r}")
        return default

    def dim(self, value: object, rank: int, what: str = "dim") -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.bad(f"{what} must be a literal int, got {value!r}")
        try:
            return normalize_dim(value, rank)
        except IndexError as e:
            raise self.bad(str(e)) from None

    def dims(self, value: object, rank: int, what: str = "dim") -> Tuple[int, ...]:
        items = value if isinstance(value, (tuple, list)) else (value,)
        out = tuple(self.dim(v, rank, what) for v in items)
        if len(set(out)) != len(out):
            raise self.bad(f"{what} repeats a dim: {value!r}")
        return out


class _Builder:
    """Accumulates factors, their kinds and sizes."""

    def __init__(self) -> None:
        self.kinds: Dict[str, str] = {}
        self.sizes: Dict[str, int] = {}
        self.why: Dict[str, str] = {}
        self._n = 0

    def new(self, kind: str, size: Optional[int] = None, why: str = "", name: Optional[str] = None) -> str:
        if name is None:
            name = f"f{self._n}"
            self._n += 1
        self.kinds[name] = kind
        if size is not None:
            self.sizes[name] = size
        if why:
            self.why[name] = why
        return name

    def sign(
        self,
        operands: Sequence[Sequence[Sequence[str]]],
        result: Sequence[Sequence[str]],
        result_sizes: Optional[Sequence[Optional[int]]] = None,
    ) -> Signature:
        res = tuple(tuple(d) for d in result)
        if result_sizes is None:
            result_sizes = [self.size_of(d) for d in res]
        return Signature(
            tuple(tuple(tuple(d) for d in o) for o in operands),
            res,
            dict(self.kinds),
            dict(self.sizes),
            tuple(result_sizes),
            dict(self.why),
        )

    def size_of(self, factors: Sequence[str]) -> Optional[int]:
        n = 1
        for f in factors:
            s = self.sizes.get(f)
            if s is None:
                return None
            n *= s
        return n

    def learn(self, factors: Sequence[str], size: Optional[int]) -> None:
        """Record the size of a single-factor dim."""
        if size is not None and len(factors) == 1 and factors[0] not in self.sizes:
            self.sizes[factors[0]] = size


def _same_dims(c: _Ctx, b: _Builder, t: GlobalType, kind_of: Mapping[int, Tuple[str, str]] = {}) -> List[Tuple[str, ...]]:
    """One factor per dim of t (pass-through unless kind_of[d] = (kind, why))."""
    dims: List[Tuple[str, ...]] = []
    for d in range(t.ndim):
        kind, why = kind_of.get(d, (PASS, ""))
        f = b.new(kind, t.sizes[d], why, name=f"d{d}")
        dims.append((f,))
    return dims


# -- builders --------------------------------------------------------------------------


def _pointwise(c: _Ctx) -> Signature:
    ranks = [o.ndim if isinstance(o, GlobalType) else 0 for o in c.operands]
    if not any(isinstance(o, GlobalType) for o in c.operands):
        raise c.bad("has no tensor operand")
    rank = max(ranks)
    b = _Builder()
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


def _einsum_core(c: _Ctx, eq: str, product: Sequence[int], bias: Optional[int]) -> Signature:
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
    ell = [f"*{j}" for j in range(n_ell)]
    if explicit:
        out = _LABEL.findall(rhs)
        if "".join(out) != rhs:
            raise c.bad(f"cannot read einsum output {rhs!r} of {eq!r}")
    else:
        flat = [x for labels in parsed for x in labels if x != "..."]
        out = (["..."] if any("..." in p for p in parsed) else []) + sorted(
            x for x in set(flat) if flat.count(x) == 1
        )
    b = _Builder()
    for labels in parsed:
        for x in labels:
            if x != "..." and x not in b.kinds:
                b.new(SUM if x not in out else PASS, name=x)
    for e in ell:
        b.new(PASS if "..." in out else SUM, name=e)
    for x in out:
        if x != "..." and x not in b.kinds:
            raise c.bad(f"output label {x!r} of {eq!r} is in no operand")
    ops: List[Tuple[Tuple[str, ...], ...]] = [()] * len(c.operands)
    for k, labels in zip(product, parsed):
        t = c.tensor(k)
        mine = t.ndim - len([x for x in labels if x != "..."])
        factors: List[str] = []
        for x in labels:
            factors.extend(ell[n_ell - mine :] if x == "..." else [x])
        dims: List[Tuple[str, ...]] = []
        for f, s in zip(factors, t.sizes):
            if f.startswith("*") and s == 1:
                dims.append(())  # a broadcast batch dim
            else:
                dims.append((f,))
                b.learn((f,), s)
        ops[k] = tuple(dims)
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


def _einsum(c: _Ctx) -> Signature:
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


def _matmul(c: _Ctx) -> Signature:
    c.count(2, 2)
    eq = _matmul_eq(c.tensor(0).ndim, c.tensor(1).ndim)
    if eq is None:
        raise c.bad("does not take rank-0 operands")
    return _einsum_core(c, eq, [0, 1], None)


def _linear(c: _Ctx) -> Signature:
    c.count(2, 3)
    x, w = c.tensor(0), c.tensor(1)
    if x.ndim < 1 or w.ndim not in (1, 2):
        raise c.bad(f"takes an input of rank >= 1 and a weight of rank 1 or 2, got {x.ndim} and {w.ndim}")
    eq = "...i,oi->...o" if w.ndim == 2 else "...i,i->..."
    return _einsum_core(c, eq, [0, 1], 2 if len(c.operands) == 3 else None)


def _reduce_dims(c: _Ctx, t: GlobalType, key: str = "dim") -> Tuple[int, ...]:
    dim = c.param(key, "axis", default=None)
    if dim is None or dim == () or dim == []:
        return tuple(range(t.ndim))
    return c.dims(dim, t.ndim)


def _reduce(c: _Ctx) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    how = str(c.row.arg)
    dims = _reduce_dims(c, t)
    if c.param("dim", "axis") is None and how in ("argmax", "argmin"):
        keep = False
    else:
        keep = bool(c.param("keepdim", default=False))
    b = _Builder()
    kinds = {d: (SUM, "sum") if how == "sum" else (REDUCE, how) for d in dims}
    src = _same_dims(c, b, t, kinds)
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


def _along(c: _Ctx) -> Signature:
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
    b = _Builder()
    src = _same_dims(c, b, t, {d: (kind, why) for d in dims})
    sizes = list(t.sizes)
    if c.op == "topk":
        k = c.param("k", required=True)
        for d in dims:
            sizes[d] = k if isinstance(k, int) and not isinstance(k, bool) else None
    return b.sign([src], src, sizes)


def _norm(c: _Ctx) -> Signature:
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
    b = _Builder()
    why = f"{c.op} normalises over it"
    src = _same_dims(c, b, t, {d: (NEED_REPLICATION, why) for d in range(t.ndim - n, t.ndim)})
    ops = [src]
    for k in range(1, len(c.operands)):
        w = c.tensor(k)
        if w.ndim != n:
            raise c.bad(f"operand {k} has rank {w.ndim}, not the {n} normalized dims")
        ops.append(src[t.ndim - n :])
    return b.sign(ops, src, t.sizes)


def _reshape_shape(c: _Ctx, t: GlobalType, shape: Sequence[object]) -> Optional[List[int]]:
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


def _walk(c: _Ctx, ins: List[int], outs: List[int]) -> Tuple[_Builder, List[List[str]], List[List[str]]]:
    """Shardy's factor walk over two fully known shapes of equal volume."""
    if math.prod(ins) != math.prod(outs):
        raise c.bad(f"cannot view a tensor of shape {tuple(ins)} as {tuple(outs)}")
    b = _Builder()
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


def _reshape(c: _Ctx) -> Signature:
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
            return _flatten(_Ctx(c.op, Row("flatten", "all"), c.operands, {}, c.names))
        if t.ndim == 1:
            return _unflatten(_Ctx(c.op, Row("unflatten"), c.operands, {"dim": 0, "sizes": tuple(shape)}, c.names))
        # otherwise only an unsharded tensor can be viewed
        b = _Builder()
        src = _same_dims(c, b, t, {d: (_UNKNOWN_RESHAPE, "") for d in range(t.ndim)})
        res = [(b.new(PASS),) for _ in shape]
        sizes = [s if isinstance(s, int) and s >= 0 else None for s in shape]
        return b.sign([src], res, sizes)
    b, fin, fout = _walk(c, ins, outs)  # type: ignore[arg-type]
    return b.sign([fin], fout, outs)


_UNKNOWN_RESHAPE: Final = "unknown-reshape"  # internal kind: sharded means unknown-sizes


def _flatten(c: _Ctx) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    if c.row.arg == "all" or t.ndim == 0:
        lo, hi = 0, t.ndim - 1
    else:
        lo = c.dim(c.param("start_dim", default=0), t.ndim, "start_dim")
        hi = c.dim(c.param("end_dim", default=-1), t.ndim, "end_dim")
        if lo > hi:
            raise c.bad(f"start_dim {lo} comes after end_dim {hi}")
    b = _Builder()
    src = _same_dims(c, b, t)
    if t.ndim == 0:
        return b.sign([src], [()], [1])
    merged = tuple(f for d in range(lo, hi + 1) for f in src[d])
    result = src[:lo] + [merged] + src[hi + 1 :]
    return b.sign([src], result)


def _unflatten(c: _Ctx) -> Signature:
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
    b = _Builder()
    src = _same_dims(c, b, t)
    new = [b.new(PASS, p) for p in parts]
    # dims of size 1 carry no factor
    ins = list(src)
    ins[d] = tuple(f for f, p in zip(new, parts) if p != 1)
    result = src[:d] + [(f,) if p != 1 else () for f, p in zip(new, parts)] + src[d + 1 :]
    sizes_out = list(t.sizes[:d]) + parts + list(t.sizes[d + 1 :])
    return b.sign([ins], result, sizes_out)


def _permute(c: _Ctx) -> Signature:
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
    b = _Builder()
    src_dims = _same_dims(c, b, t)
    return b.sign([src_dims], [src_dims[k] for k in order], [t.sizes[k] for k in order])


def _squeeze(c: _Ctx) -> Signature:
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
    b = _Builder()
    why = "squeeze removes it (a sharded dim has a different local size)"
    src = _same_dims(c, b, t, {d: (NEED_REPLICATION, why) for d in dims})
    keep = [d for d in range(t.ndim) if d not in dims]
    return b.sign([src], [src[d] for d in keep], [t.sizes[d] for d in keep])


def _unsqueeze(c: _Ctx) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    d = c.dim(c.param("dim", required=True), t.ndim + 1)
    b = _Builder()
    src = _same_dims(c, b, t)
    return b.sign([src], src[:d] + [()] + src[d:], list(t.sizes[:d]) + [1] + list(t.sizes[d:]))


def _expand(c: _Ctx) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    size = c.param(str(c.row.arg), "size", "shape", required=True)
    if not isinstance(size, (tuple, list)):
        raise c.bad(f"{c.row.arg} must be a literal tuple, got {size!r}")
    if len(size) < t.ndim:
        raise c.bad(f"cannot expand rank {t.ndim} to {len(size)} dims")
    b = _Builder()
    src = _same_dims(c, b, t)
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


def _cat(c: _Ctx) -> Signature:
    c.count(1)
    ranks = {c.tensor(k).ndim for k in range(len(c.operands))}
    if len(ranks) != 1:
        raise c.bad(f"takes tensors of one rank, got ranks {sorted(ranks)}")
    n = ranks.pop()
    d = c.dim(c.param("dim", "axis", default=0), n)
    b = _Builder()
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


def _stack(c: _Ctx) -> Signature:
    c.count(1)
    ranks = {c.tensor(k).ndim for k in range(len(c.operands))}
    if len(ranks) != 1:
        raise c.bad(f"takes tensors of one rank, got ranks {sorted(ranks)}")
    n = ranks.pop()
    d = c.dim(c.param("dim", "axis", default=0), n + 1)
    b = _Builder()
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


def _slice(c: _Ctx) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    how = c.row.arg
    pieces = how in ("split", "chunk", "tensor_split", "unbind")
    d = c.dim(c.param("dim", default=0) if pieces else c.param("dim", required=True), t.ndim)
    b = _Builder()
    why = {
        "narrow": "narrow keeps a slice of it",
        "select": "select picks one index of it",
        "split": "split cuts it into pieces",
        "chunk": "chunk cuts it into pieces",
        "tensor_split": "tensor_split cuts it into pieces",
        "unbind": "unbind cuts it into pieces",
    }[str(how)]
    src = _same_dims(c, b, t, {d: (PERMUTATION, why)})
    sizes = list(t.sizes)
    n = t.sizes[d]
    if how == "narrow":
        length = c.param("length")
        sizes[d] = length if isinstance(length, int) and not isinstance(length, bool) else None
    elif how == "split":
        s = c.param("split_size_or_sections", "split_size")
        sizes[d] = s if isinstance(s, int) and not isinstance(s, bool) and n is not None and n % s == 0 else None
    elif how in ("chunk", "tensor_split"):
        k = c.param("chunks", "sections", "indices_or_sections")
        sizes[d] = n // k if isinstance(k, int) and not isinstance(k, bool) and k > 0 and n is not None and n % k == 0 else None
    result = list(src)
    if how in ("select", "unbind"):
        del result[d]
        del sizes[d]
    return b.sign([src], result, sizes)


def _index_entries(c: _Ctx, t: GlobalType) -> List[Tuple[str, object]]:
    raw = c.param("index", required=True)
    items = list(raw) if isinstance(raw, tuple) else [raw]
    out: List[Tuple[str, object]] = []
    for it in items:
        if it is None:
            out.append(("new", None))
        elif it is Ellipsis or it == "...":
            out.append(("ellipsis", None))
        elif isinstance(it, slice):
            out.append(("full", None) if it == slice(None) else ("slice", it))
        elif it == ":":
            out.append(("full", None))
        elif it == "slice":
            out.append(("slice", None))
        elif (isinstance(it, int) and not isinstance(it, bool)) or it == "int":
            out.append(("int", it))
        else:
            raise FactorError(
                f"{c.op}: indexing {c.names[0]}: {t} with {it!r} (advanced indexing) has no global rule; "
                f"use index_select or gather",
                code="no-rule",
            )
    if sum(1 for k, _ in out if k == "ellipsis") > 1:
        raise c.bad("an index has at most one Ellipsis")
    used = sum(1 for k, _ in out if k in ("full", "slice", "int"))
    if used > t.ndim:
        raise c.bad(f"too many indices ({used}) for a tensor of rank {t.ndim}")
    expanded: List[Tuple[str, object]] = []
    for k, v in out:
        if k == "ellipsis":
            expanded.extend([("full", None)] * (t.ndim - used))
        else:
            expanded.append((k, v))
    if not any(k == "ellipsis" for k, _ in out):
        expanded.extend([("full", None)] * (t.ndim - used))
    return expanded


def _getitem(c: _Ctx) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    entries = _index_entries(c, t)
    b = _Builder()
    kinds = {}
    d = 0
    for k, _ in entries:
        if k == "new":
            continue
        if k in ("slice", "int"):
            kinds[d] = (PERMUTATION, "indexing keeps part of it" if k == "slice" else "indexing picks one index of it")
        d += 1
    src = _same_dims(c, b, t, kinds)
    result: List[Tuple[str, ...]] = []
    sizes: List[Optional[int]] = []
    d = 0
    for k, v in entries:
        if k == "new":
            result.append(())
            sizes.append(1)
            continue
        if k == "full":
            result.append(src[d])
            sizes.append(t.sizes[d])
        elif k == "slice":
            result.append(src[d])
            n = t.sizes[d]
            sizes.append(len(range(*v.indices(n))) if isinstance(v, slice) and n is not None else None)
        d += 1
    return b.sign([src], result, sizes)


def _index_select(c: _Ctx) -> Signature:
    c.count(2, 2)
    t, idx = c.tensor(0), c.tensor(1)
    if idx.ndim != 1:
        raise c.bad(f"takes a rank-1 index, got rank {idx.ndim}")
    d = c.dim(c.param("dim", required=True), t.ndim)
    b = _Builder()
    src = _same_dims(c, b, t, {d: (NEED_REPLICATION, "the index selects along it")})
    k = b.new(PASS, idx.sizes[0], name="idx0")
    result = list(src)
    result[d] = (k,)
    sizes = list(t.sizes)
    sizes[d] = idx.sizes[0]
    return b.sign([src, [(k,)]], result, sizes)


def _gather(c: _Ctx) -> Signature:
    c.count(2, 2)
    t, idx = c.tensor(0), c.tensor(1)
    if idx.ndim != t.ndim:
        raise c.bad(f"takes an index of the input's rank {t.ndim}, got rank {idx.ndim}")
    d = c.dim(c.param("dim", required=True), t.ndim)
    b = _Builder()
    src = _same_dims(c, b, t, {d: (NEED_REPLICATION, "the index selects along it")})
    k = b.new(PASS, idx.sizes[d], name=f"idx{d}")
    ix = list(src)
    ix[d] = (k,)
    return b.sign([src, ix], ix, idx.sizes)


def _embedding(c: _Ctx) -> Signature:
    c.count(2, 2)
    idx, w = c.tensor(0), c.tensor(1)
    if w.ndim != 2:
        raise c.bad(f"takes a rank-2 weight, got rank {w.ndim}")
    b = _Builder()
    ix = [(b.new(PASS, s, name=f"idx{e}"),) for e, s in enumerate(idx.sizes)]
    vocab = b.new(NEED_REPLICATION, w.sizes[0], "the indices select rows of it", name="vocab")
    emb = b.new(PASS, w.sizes[1], name="emb")
    return b.sign([ix, [(vocab,), (emb,)]], ix + [(emb,)], list(idx.sizes) + [w.sizes[1]])


def _conv(c: _Ctx) -> Signature:
    c.count(2, 3)
    n = int(c.row.arg)  # type: ignore[call-overload]
    x, w = c.tensor(0), c.tensor(1)
    if x.ndim not in (n + 1, n + 2) or w.ndim != n + 2:
        raise c.bad(f"takes an input of rank {n + 1} or {n + 2} and a weight of rank {n + 2}")
    groups = c.param("groups", default=1)
    batched = x.ndim == n + 2
    b = _Builder()
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


_BUILDERS: Final[Mapping[str, Callable[[_Ctx], Signature]]] = {
    "pointwise": _pointwise,
    "einsum": _einsum,
    "matmul": _matmul,
    "linear": _linear,
    "reduce": _reduce,
    "along": _along,
    "norm": _norm,
    "reshape": _reshape,
    "flatten": _flatten,
    "unflatten": _unflatten,
    "permute": _permute,
    "squeeze": _squeeze,
    "unsqueeze": _unsqueeze,
    "expand": _expand,
    "cat": _cat,
    "stack": _stack,
    "slice": _slice,
    "getitem": _getitem,
    "index_select": _index_select,
    "gather": _gather,
    "embedding": _embedding,
    "conv": _conv,
}
