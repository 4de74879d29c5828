"""Classes of non-collective torch ops and the per-axis rule for each class.

A non-collective op never communicates, so on each mesh axis its result type
follows from its operands' types and its class:

  linear       all P -> P; no P -> the R/I/V rule; P mixed with non-P is an error
               (P + R is affine: the R term is counted once per rank)
  multilinear  at most one P operand, every other operand R (or a scalar) -> P;
               no P -> the R/I/V rule
  divide       like multilinear, but only the numerator (first operand) may be P
  nonlinear    any P operand is an error; otherwise the R/I/V rule
  factory      no tensor operands: R on every axis
  random       dropout, rand_like, bernoulli, ...: ranks draw different numbers, so
               the result is V (the sound choice); a P or I operand is an error
  assign       dst.copy_(src): the result has src's type
  selection    where, masked_fill, gather, scatter_add, ... (SELECTIONS): the
               selector's indicator times a linear combination of the values

The R/I/V rule: all R -> R, all I -> I, R mixed with V -> V, I mixed with
anything else -> error (convert the I operand to R first).  S(i) counts as V.
A Python scalar takes the other operands' type, except that a scalar added to
a P operand (linear class) is an error.  Ops absent from the tables are
nonlinear: the safe default.

Tables are keyed by short names, looked up in three namespaces: torch
functions ("torch.<name>" / "torch.nn.functional.<name>"), Tensor methods and
operator dunders.  Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import Final, Optional, Sequence, Tuple, Union

from .localtype import AxisType, I, LocalType, P, R, Shard, V
from .operators import class_rows, inplace_dunders, nograd_dunders, reflected_dunders, scalar_dunders

__all__ = [
    "LINEAR",
    "MULTILINEAR",
    "DIVIDE",
    "NONLINEAR",
    "FACTORY",
    "RANDOM",
    "OpRuleError",
    "SCALAR",
    "op_class",
    "combine",
    "TORCH_FUNCTIONS",
    "TENSOR_METHODS",
    "FUNCTIONAL",
]

LINEAR: Final = "linear"
MULTILINEAR: Final = "multilinear"
DIVIDE: Final = "divide"
NONLINEAR: Final = "nonlinear"
FACTORY: Final = "factory"
RANDOM: Final = "random"
ASSIGN: Final = "assign"  # dst.copy_(src): the result is src, whatever dst was
SELECTION: Final = "selection"  # SELECTIONS: operands by role, the selector first


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Linear in every tensor operand (views, shape ops, sums, casts, copies).
_LINEAR_COMMON = _names(
    """
    add sub subtract neg negative positive sum mean nansum cumsum flip roll rot90
    cat concat concatenate stack hstack vstack dstack column_stack
    reshape view view_as flatten unflatten squeeze unsqueeze transpose swapaxes swapdims
    permute movedim moveaxis t T mT adjoint expand expand_as broadcast_to repeat tile
    repeat_interleave narrow select diagonal diag
    diag_embed tril triu chunk split tensor_split hsplit vsplit unbind
    clone contiguous detach to float double half bfloat16 type type_as cpu cuda
    real imag conj trace zero_
    pad constant_pad_nd unfold as_strided
    ravel fliplr flipud atleast_1d atleast_2d atleast_3d block_diag diff
    slice_scatter select_scatter diagonal_scatter
    narrow_copy split_with_sizes unsafe_split unsafe_chunk view_as_real view_as_complex
    resolve_conj resolve_neg conj_physical squeeze_copy unsqueeze_copy permute_copy
    transpose_copy t_copy expand_copy view_copy alias_copy detach_copy
    """
)

# Products: linear in each operand separately.
_MULTILINEAR_COMMON = _names(
    """
    mul multiply matmul mm bmm mv dot vdot inner outer ger einsum tensordot kron
    linear bilinear addmm addmv addbmm baddbmm addr addcmul cross
    conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d
    """
)

_DIVIDE_COMMON = _names("div divide true_divide")

# Selections: ops that pick their values' elements by a selector (a
# condition, a mask, an index).  where(c, x, y) is c * x + (1 - c) * y,
# masked_fill(x, m, v) is (1 - m) * x + m * v, gather / index_select /
# take multiply by the indicator of the index, scatter_add / index_add /
# index_copy add (or put) a value picked so into another: each is linear in
# its values jointly, times the selector's indicator (class SELECTION, see
# _select).  name -> (selector parameter, value parameters); a method's
# receiver is its first value.
SELECTIONS: Final[dict[str, Tuple[str, Tuple[str, ...]]]] = {
    "where": ("condition", ("input", "self", "other")),
    "masked_fill": ("mask", ("input", "value")),
    "index_fill": ("index", ("input", "value")),
    "masked_scatter": ("mask", ("input", "source")),
    "index_select": ("index", ("input",)),
    "gather": ("index", ("input",)),
    "take": ("index", ("input",)),
    "take_along_dim": ("indices", ("input",)),
    "scatter_add": ("index", ("input", "src")),
    "index_add": ("index", ("input", "source")),
    "index_copy": ("index", ("input", "source")),
}

# Random draws: differ per rank unless the RNG is synchronised, so V.
_RANDOM = _names(
    """
    dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout
    rand_like randn_like randint_like bernoulli multinomial normal poisson rrelu
    """
)

# Random ops on an axis whose ranks draw the same numbers (the RNG seeded
# alike there; the checker's `synced_rng` setting): dropout multiplies by a
# mask that is the same on every rank, a factor without gradient, so it is
# linear there (R stays R, I stays I, P stays P); every other draw is a
# deterministic function of its operands there, so nonlinear.
_SYNCED_LINEAR = _names("dropout dropout1d dropout2d dropout3d")


def synced_class(name: str) -> str:
    """The class of random op `name` on an axis with a synchronised RNG."""
    return LINEAR if name in _SYNCED_LINEAR else NONLINEAR


# Creation functions: replicated on every axis.
_FACTORIES = _names(
    """
    zeros ones empty full arange linspace logspace eye tensor as_tensor from_numpy
    zeros_like ones_like empty_like full_like
    """
)

# Creation functions called without a tensor operand: the result's type on
# every mesh axis.  Shape-driven factories build the same tensor on every rank
# (R); random draws differ per rank (V).  Data-driven ones (tensor, as_tensor,
# from_numpy) are absent: their value is whatever each rank passes in, so it
# stays unknown.  Either way the result carries no gradient unless
# requires_grad= is passed.
WITHOUT_OPERANDS: Final[dict[str, AxisType]] = {
    **{n: R for n in _names("zeros ones empty full arange linspace logspace eye fft.fftfreq fft.rfftfreq")},
    **{n: V for n in _names("rand randn randint randperm normal")},
}

# The rank of a shape-driven factory's result (global code takes it as a
# replicated value of that rank): fixed for ranges (1-D) and eye (2-D), else
# (None) the count of sizes the call writes.  Draws are absent: a value that
# differs per rank has no spec form.
FACTORY_RANKS: Final[dict[str, Optional[int]]] = {
    **{n: None for n in _names("zeros ones empty full")},
    **{n: 1 for n in _names("arange linspace logspace")},
    "eye": 2,
}

# torch.special, torch.linalg and torch.fft are untyped (Any) in torch's own
# stubs, so mypy runs no hook on their calls.  The plugin types direct calls of
# the functions named here, keyed "<module>.<name>" ("special.expit"), like any
# torch function; other names of those modules (LinAlgError, a function newer
# than this table) stay untyped.  Their classes: the transforms of torch.fft
# are linear, its frequency grids factories; linalg's products multilinear and
# its diagonal linear; everything else (every special function, norms,
# decompositions, solves) is nonlinear, the default.
_UNTYPED_MODULES: Final[dict[str, str]] = {
    "special": """
        airy_ai bessel_j0 bessel_j1 bessel_y0 bessel_y1 chebyshev_polynomial_t
        chebyshev_polynomial_u chebyshev_polynomial_v chebyshev_polynomial_w digamma entr
        erf erfc erfcx erfinv exp2 expit expm1 gammainc gammaincc gammaln
        hermite_polynomial_h hermite_polynomial_he i0 i0e i1 i1e laguerre_polynomial_l
        legendre_polynomial_p log1p log_ndtr log_softmax logit logsumexp modified_bessel_i0
        modified_bessel_i1 modified_bessel_k0 modified_bessel_k1 multigammaln ndtr ndtri
        polygamma psi round shifted_chebyshev_polynomial_t shifted_chebyshev_polynomial_u
        shifted_chebyshev_polynomial_v shifted_chebyshev_polynomial_w scaled_modified_bessel_k0
        scaled_modified_bessel_k1 sinc softmax spherical_bessel_j0 xlog1py xlogy zeta
    """,
    "linalg": """
        cholesky cholesky_ex cond cross det diagonal eig eigh eigvals eigvalsh
        householder_product inv inv_ex ldl_factor ldl_factor_ex ldl_solve lstsq lu lu_factor
        lu_factor_ex lu_solve matmul matrix_exp matrix_norm matrix_power matrix_rank multi_dot
        norm pinv qr slogdet solve solve_ex solve_triangular svd svdvals tensorinv tensorsolve
        vander vecdot vector_norm
    """,
    "fft": """
        fft fft2 fftfreq fftn fftshift hfft hfft2 hfftn ifft ifft2 ifftn ifftshift ihfft ihfft2
        ihfftn irfft irfft2 irfftn rfft rfft2 rfftfreq rfftn
    """,
}
# torch.unique and torch.unique_consecutive are boolean_dispatch objects of
# torch.functional, Any to mypy too: typed the same way (nonlinear, the
# default), keyed by their name.
_UNTYPED_TOP = _names("unique unique_consecutive")
UNTYPED_FUNCTIONS: Final[frozenset[str]] = frozenset(
    f"{module}.{name}" for module, names in _UNTYPED_MODULES.items() for name in names.split()
) | _UNTYPED_TOP

# Untyped functions whose result is a tuple of tensors when an argument
# after the input is passed positionally, or one of these flags is passed
# and not literally False (`torch.unique(x, return_inverse=True)`): such a
# call's rule is checked, and its result stays untyped.
UNTYPED_TUPLE_FLAGS: Final[dict[str, Tuple[str, ...]]] = {
    "unique": ("return_inverse", "return_counts"),
    "unique_consecutive": ("return_inverse", "return_counts"),
}


def untyped_function(fullname: str) -> Optional[str]:
    """The key of a function of UNTYPED_FUNCTIONS ("torch.special.expit" ->
    "special.expit"; "torch.unique" and its definition's name
    "torch.functional.unique" -> "unique"); None for any other name."""
    key = fullname[6:] if fullname.startswith("torch.") else ""
    key = key[11:] if key.startswith("functional.") else key
    return key if key in UNTYPED_FUNCTIONS else None


_UNTYPED_LINEAR = _names(
    """
    fft.fft fft.fft2 fft.fftn fft.fftshift fft.hfft fft.hfft2 fft.hfftn fft.ifft fft.ifft2
    fft.ifftn fft.ifftshift fft.ihfft fft.ihfft2 fft.ihfftn fft.irfft fft.irfft2 fft.irfftn
    fft.rfft fft.rfft2 fft.rfftn linalg.diagonal
    """
)
_UNTYPED_MULTILINEAR = _names("linalg.matmul linalg.vecdot linalg.multi_dot linalg.cross")

TORCH_FUNCTIONS: Final[dict[str, str]] = {
    **{n: RANDOM for n in _RANDOM},
    **{n: LINEAR for n in _LINEAR_COMMON},
    **{n: MULTILINEAR for n in _MULTILINEAR_COMMON},
    **{n: DIVIDE for n in _DIVIDE_COMMON},
    **{n: FACTORY for n in _FACTORIES},
    **{n: LINEAR for n in _UNTYPED_LINEAR},
    **{n: MULTILINEAR for n in _UNTYPED_MULTILINEAR},
    **{n: FACTORY for n in _names("fft.fftfreq fft.rfftfreq")},
    **{n: SELECTION for n in SELECTIONS},
}

# In-place draws that exist only as Tensor methods (`w.uniform_()`): the
# out-of-place names their in-place hooks look up.
_INPLACE_DRAWS = _names("uniform exponential geometric log_normal cauchy random")

# In-place methods that leave the values' SPMD type as it was (storage,
# autograd flags): the receiver keeps its type (requires_grad_ makes it
# carry a gradient).
KEEP_INPLACE: Final[frozenset[str]] = _names("requires_grad_ resize_ resize_as_ share_memory_")

TENSOR_METHODS: Final[dict[str, str]] = {
    **{n: RANDOM for n in _RANDOM},
    **{n: RANDOM for n in _INPLACE_DRAWS},
    **{n: LINEAR for n in _LINEAR_COMMON},
    **{n: MULTILINEAR for n in _MULTILINEAR_COMMON},
    **{n: DIVIDE for n in _DIVIDE_COMMON},
    **class_rows(),  # operators (vocab/operators.py)
    "copy": ASSIGN,
    **{n: SELECTION for n in SELECTIONS},
    "new_zeros": FACTORY,
    "new_ones": FACTORY,
    "new_empty": FACTORY,
    "new_full": FACTORY,
    "new_tensor": FACTORY,
}

FUNCTIONAL: Final[dict[str, str]] = {
    "linear": MULTILINEAR,
    "bilinear": MULTILINEAR,
    "pad": LINEAR,
    "embedding": LINEAR,
    "avg_pool1d": LINEAR,
    "avg_pool2d": LINEAR,
    "avg_pool3d": LINEAR,
    "adaptive_avg_pool1d": LINEAR,
    "adaptive_avg_pool2d": LINEAR,
    "adaptive_avg_pool3d": LINEAR,
    "pixel_shuffle": LINEAR,
    "unfold": LINEAR,
    "fold": LINEAR,
}


def op_class_or_none(name: str, namespace: str = "torch") -> Optional[str]:
    """Class of an op by short name in 'torch', 'tensor' or 'functional'; None if not in a table.

    torch.nn.functional also sees the torch table (F.linear and torch.matmul
    share rows), Tensor methods see their own table.
    """
    if namespace == "functional":
        return FUNCTIONAL.get(name) or TORCH_FUNCTIONS.get(name)
    table = TENSOR_METHODS if namespace == "tensor" else TORCH_FUNCTIONS
    return table.get(name)


def op_class(name: str, namespace: str = "torch") -> str:
    """Class of an op by short name; ops in no table are nonlinear (the safe default)."""
    return op_class_or_none(name, namespace) or NONLINEAR


class _Scalar:
    """A Python number operand."""

    def __repr__(self) -> str:
        return "scalar"


SCALAR: Final = _Scalar()

Operand = Union[AxisType, _Scalar, None]  # None: unknown on this axis


class OpRuleError(TypeError):
    """A per-axis typing rule violated by a non-collective op.

    `code` is a stable short name of the rule (used to pick messages and hints).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _local(t: AxisType) -> AxisType:
    return V if isinstance(t, Shard) else t


def _riv(types: Sequence[AxisType], nograd: Sequence[bool] = ()) -> AxisType:
    # An operand that carries no gradient needs no reduction in the backward, so
    # if it is R or I it conforms to the others (it is the same on every rank).
    if nograd and not all(nograd):
        kept = [t for t, ng in zip(types, nograd) if not (ng and _local(t) in (R, I))]
        types = kept or list(types)
    elif nograd and len(nograd) == len(types):
        # No operand carries a gradient (masks, ids, counts): the rule guards a
        # gradient that does not exist, and only forward values matter, in
        # which I and R agree (the same value on every rank).
        kinds = {_local(t) for t in types}
        if I in kinds and kinds != {I}:
            types = [R if t is I else t for t in types]
    kinds = {_local(t) for t in types}
    if kinds == {R}:
        return R
    if kinds == {I}:
        return I
    if I in kinds:
        raise OpRuleError(
            "invariant-mixed",
            "an Invariant operand is mixed with "
            + " and ".join(sorted(str(k) for k in kinds - {I}))
            + " operands; its gradient would not be summed over the axis",
        )
    return V  # R mixed with V, or all V


def _random(tensors: Sequence[AxisType]) -> AxisType:
    """A random op's result where ranks draw differently: V."""
    if any(t is P for t in tensors):
        raise OpRuleError(
            "partial-nonlinear",
            "a Partial operand enters a random op; each rank would draw for its addend",
        )
    if any(t is I for t in tensors):
        raise OpRuleError(
            "invariant-mixed",
            "a random op on an Invariant value gives each rank different values "
            "(unless the RNG draws alike on the axis's ranks: the synced_rng setting); "
            "its gradient would not be summed over the axis",
        )
    return V


def combine(
    cls: str, operands: Sequence[Operand], nograd: Sequence[bool] = ()
) -> Optional[AxisType]:
    """The result type on one axis, or raise OpRuleError.  None = unknown.

    Any unknown operand makes the result unknown (gradual typing: unknowns
    never cause errors).  `nograd[k]` says operand k carries no gradient
    (a mask, a count, an index): an R or I such operand does not trigger the
    Invariant-mixing rule.  Scalars count as carrying no gradient.
    """
    if cls == FACTORY:
        return R
    if cls == SELECTION:
        return _select(operands, nograd)
    if cls == ASSIGN:
        src = operands[-1] if operands else None
        return src if isinstance(src, (LocalType, Shard)) else None
    if any(o is None for o in operands):
        return None
    flags = list(nograd) + [False] * (len(operands) - len(nograd))
    tensors: list[AxisType] = [o for o in operands if isinstance(o, (LocalType, Shard))]
    tensor_nograd = [f for o, f in zip(operands, flags) if isinstance(o, (LocalType, Shard))]
    has_scalar = len(tensors) < len(operands)
    if not tensors:
        return R
    partial = [t for t in tensors if t is P]
    if cls == RANDOM:
        return _random(tensors)
    if not partial:
        return _riv(tensors, tensor_nograd)
    if cls == NONLINEAR:
        raise OpRuleError(
            "partial-nonlinear",
            "a Partial operand enters a nonlinear op; the op would be applied to each "
            "rank's addend instead of to their sum",
        )
    if cls == LINEAR:
        if len(partial) != len(tensors):
            raise OpRuleError(
                "partial-mixed",
                "a Partial operand is added to a non-Partial one; the non-Partial term "
                "would be counted once per rank in the pending sum",
            )
        if has_scalar:
            raise OpRuleError(
                "partial-scalar",
                "a Python scalar is added to a Partial operand; it would be counted once "
                "per rank in the pending sum",
            )
        return P
    # multilinear / divide
    if cls == DIVIDE and operands and operands[0] is not P:
        raise OpRuleError(
            "partial-denominator",
            "a Partial value is a denominator; division is linear in the numerator only",
        )
    if len(partial) > 1:
        raise OpRuleError(
            "partial-product",
            "two Partial operands are multiplied; the product of two pending sums is not "
            "the sum of the ranks' products",
        )
    others = {_local(t) for t in tensors if t is not P}
    if others - {R}:
        raise OpRuleError(
            "partial-mixed",
            "a Partial operand is multiplied by a "
            + " and ".join(sorted(str(k) for k in others - {R}))
            + " operand; only a Replicate factor keeps the pending sum intact",
        )
    return P


def _select(operands: Sequence[Operand], nograd: Sequence[bool]) -> Optional[AxisType]:
    """A selection (SELECTIONS) on one axis: the selector's indicator times a
    linear combination of the values.  `operands`: the selector, then each
    value that is not zero (a literal 0 or a tensor of zeros is no term): a
    tensor type, or SCALAR for any other number, which would be counted once
    per rank beside a Partial value.  A Partial selector is an error: each
    rank would select by its addend."""
    if not operands:
        return None
    if operands[0] is P:
        raise OpRuleError(
            "partial-selector",
            "a Partial value selects (a condition, a mask or an index); each rank "
            "would select by its addend, not by their sum",
        )
    flags = list(nograd) + [False] * (len(operands) - len(nograd))
    values = combine(LINEAR, operands[1:], flags[1:])  # no value: a zero, R
    return combine(MULTILINEAR, [operands[0], values], [flags[0], all(flags[1:])])


# Ops whose Python-number arguments are operands (x + 1, 2 * x, torch.add(x, 1));
# for every other op a number is a dim, a size or a flag, not an operand.
SCALAR_OPERANDS: Final = _names(
    """
    add sub subtract mul multiply div divide true_divide rsub
    """
) | scalar_dunders()

# Reflected dunders: `a - b` may run as b.__rsub__(a).  Their operands are
# taken in source order (the argument first), so they type as the base op.
REFLECTED: Final = reflected_dunders()

# In-place dunders and their out-of-place counterparts.
_INPLACE_DUNDERS: Final = inplace_dunders()


def out_of_place(name: str) -> Optional[str]:
    """For an in-place op name (add_, __iadd__), the out-of-place name; else None."""
    if name in _INPLACE_DUNDERS:
        return _INPLACE_DUNDERS[name]
    if name.endswith("_") and not name.endswith("__") and not name.startswith("_"):
        return name[:-1]
    return None


# Affine ops: a product plus a bias, by parameter name (the bias is optional).
# Typed as combine(linear, [combine(multilinear, product), bias]): so a
# Partial product plus a Replicate bias is an error, like `partial_out + bias`.
AFFINE: Final[dict[str, Tuple[Tuple[str, ...], str]]] = {
    "linear": (("input", "weight"), "bias"),
    "bilinear": (("input1", "input2", "weight"), "bias"),
    "addmm": (("mat1", "mat2"), "input"),
    "addmv": (("mat", "vec"), "input"),
    "addbmm": (("batch1", "batch2"), "input"),
    "baddbmm": (("batch1", "batch2"), "input"),
    "addr": (("vec1", "vec2"), "input"),
    "addcmul": (("tensor1", "tensor2"), "input"),
    # F.conv2d is torch.conv2d (a product of input and weight, plus a bias)
    **{f"conv{kind}{n}d": (("input", "weight"), "bias") for kind in ("", "_transpose") for n in (1, 2, 3)},
}


def combine_affine(
    product: Sequence[Operand], bias: Optional[Operand], nograd: Sequence[bool] = ()
) -> Optional[AxisType]:
    """The result type on one axis of product[0] * product[1] (+ bias)."""
    p = combine(MULTILINEAR, product, nograd[: len(product)])
    if bias is None:
        return p
    return combine(LINEAR, [p, bias], list(nograd[: len(product)])[:1] + list(nograd[len(product) :]))


# Ops whose result never carries a gradient (comparisons, indices, detach).
NO_GRAD_RESULTS: Final = _names(
    """
    detach eq ne lt le gt ge
    argmax argmin argsort isnan isinf isfinite isclose nonzero count_nonzero
    bucketize searchsorted long int short byte bool logical_not logical_and
    logical_or logical_xor rand_like randint_like randn_like bernoulli multinomial
    """
) | nograd_dunders()


# Casts whose dtype argument decides their class (`x.to(torch.int64)`,
# `x.type(torch.long)`): to an integer or bool dtype a cast truncates, which
# is not additive (nonlinear: a Partial operand is an error), and its result
# carries no gradient, like `.long()`; to any other dtype it stays linear.
# The reductions whose `dtype=` casts their input first do the same
# (`p.sum(dtype=torch.int64)`).
DTYPE_CASTS: Final = _names("to type")
DTYPE_ARGUMENT_OPS: Final = _names("sum nansum cumsum mean nanmean")
INTEGER_DTYPES: Final = _names("int8 int16 int32 int64 uint8 uint16 uint32 uint64 int short long bool")


# Ops whose class another argument written at the call decides: name ->
# (parameter, test).  ZERO_FILL (a fill value): padding or masking with
# zeros keeps the class, a constant c != 0 would be added once per rank to a
# pending sum.
# NO_ROUNDING (div's rounding_mode): a rounded quotient is not additive.
# The op keeps its class when the argument is absent or passes the test
# (a literal 0 / None, or None); otherwise, or when not literal, it is
# nonlinear (a Partial operand is an error).
ZERO_FILL, NO_ROUNDING = "zero fill", "no rounding"
ARGUMENT_CLASSES: Final[dict[str, Tuple[str, str]]] = {
    "pad": ("value", ZERO_FILL),
    "constant_pad_nd": ("value", ZERO_FILL),
    "div": ("rounding_mode", NO_ROUNDING),
    "divide": ("rounding_mode", NO_ROUNDING),
}


def keeps_class(test: str, value: object) -> bool:
    """Whether an argument written as `value` (a Python literal, or any
    other object when not literal) keeps its op's class under `test`."""
    if value is None:
        return True
    return test == ZERO_FILL and value.__class__ in (int, float, bool) and value == 0


def argument_class(cls: str, keeps: bool) -> str:
    """The class of an ARGUMENT_CLASSES op of class `cls`."""
    return cls if keeps else NONLINEAR


def cast_class(name: str, dtype: Optional[str], cls: str) -> str:
    """The class of op `name` (of class `cls`) called with dtype `dtype` (a
    torch dtype's name, or None when no dtype is written)."""
    if (name in DTYPE_CASTS or name in DTYPE_ARGUMENT_OPS) and dtype in INTEGER_DTYPES:
        return NONLINEAR
    return cls
