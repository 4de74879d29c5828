"""The factor table of global SPMD: op families as data.

Each torch name maps to a `Row` (a builder family and its fixed data); the
family's builder (factor_build_compute.py, factor_build_layout.py,
factor_build_index.py) turns the operand ranks, known sizes and literal
arguments into a `Signature` (factor_signature.py): the factors of every
operand dim and result dim, each with its kind.  `factors.py` checks a
signature (see its docstring for the rules).

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import Dict, Final, Mapping, NamedTuple, Optional, Tuple

from .opclasses import MULTILINEAR
from .operators import nograd_dunders, pointwise_dunders

__all__ = [
    "PASS",
    "SUM",
    "REDUCE",
    "NEED_REPLICATION",
    "PERMUTATION",
    "UNKNOWN_RESHAPE",
    "FactorError",
    "RULES",
    "Row",
    "FACTOR_TABLE",
    "DTYPE_RESULT",
    "has_rule",
]

PASS: Final = "pass-through"
SUM: Final = "sum"
REDUCE: Final = "reduction"
NEED_REPLICATION: Final = "need-replication"
PERMUTATION: Final = "permutation"
# internal kind of a reshape with unknown sizes: sharded, it is an "unknown-sizes" error
UNKNOWN_RESHAPE: Final = "unknown-reshape"


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
    "not-divisible": "the reshape splits a sharded dim where the axis size and the part's size divide neither way",
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
    "split-axis": "a per-axis collective names an axis the value holds in sub-axes (or a part of one it holds whole)",
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
    clone contiguous detach to float double half bfloat16 long int bool type
    activation relu gelu silu sigmoid tanh exp exp2 log log2 log10 log1p expm1 sqrt rsqrt abs pow
    square reciprocal sign sin cos erf clamp clip clamp_min clamp_max maximum minimum
    where lerp addcmul addcdiv masked_fill nan_to_num softplus mish hardtanh leaky_relu
    elu selu celu hardswish hardsigmoid logit floor ceil round trunc frac fmod remainder
    eq ne lt le gt ge
    logical_not logical_and logical_or logical_xor isnan isinf isfinite
    dropout alpha_dropout feature_alpha_dropout rand_like randn_like bernoulli
    zeros_like ones_like empty_like full_like
    special.expit special.erf special.erfc special.erfcx special.erfinv special.exp2
    special.expm1 special.log1p special.logit special.ndtr special.ndtri special.log_ndtr
    special.i0 special.i0e special.i1 special.i1e special.digamma special.psi
    special.gammaln special.entr special.sinc special.round special.xlogy special.xlog1py
    """
) + tuple(sorted(pointwise_dunders()))

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
    "softmin": (NEED_REPLICATION, "dim", None, "softmin normalises over it"),
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

DTYPE_RESULT: Final[Mapping[str, str]] = {
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
    **{n: "bool" for n in (*_names("eq ne lt le gt ge"), *sorted(nograd_dunders()))},
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


def reads_indices(op: str) -> bool:
    """Whether `op`'s row reads index operands by their positions (gather's)."""
    row = FACTOR_TABLE.get(op)
    return row is not None and bool(row.indices)

