"""torch classes the checker types by table: nn modules whose forward is one
functional op, and the named tuples (torch.return_types) of reductions.

Pure Python: names only (imports neither torch nor mypy).
"""

from __future__ import annotations

from typing import Final, Mapping, NamedTuple, Tuple

__all__ = ["FunctionalModule", "FUNCTIONAL_MODULES", "NAMED_RESULTS", "INDEX_FIELDS", "INIT_IN_PLACE"]


class FunctionalModule(NamedTuple):
    """A torch module whose forward is `op(input, <parameters>...)`."""

    op: str  # the torch.nn.functional op its forward runs
    parameters: Tuple[str, ...]  # attributes passed to it, by its parameter names
    # constructor arguments its forward passes on, by name (the op's parameter
    # of that name; position in the constructor's signature): nn.Softmax(dim)
    settings: Tuple[Tuple[str, int], ...] = ()


# module class (fullname) -> its forward as a functional op.  nn.Linear's
# forward is F.linear(input, self.weight, self.bias), nn.Embedding's
# F.embedding(input, self.weight, ...), nn.LayerNorm's F.layer_norm(input,
# shape, self.weight, self.bias, eps), nn.RMSNorm's F.rms_norm(input, shape,
# self.weight, eps).  A subclass that declares these attributes with SPMD
# types gets its inherited forward (and `super().forward(x)`) typed by the
# op's rule on those types.
FUNCTIONAL_MODULES: Final[Mapping[str, FunctionalModule]] = {
    "torch.nn.modules.linear.Linear": FunctionalModule("linear", ("weight", "bias")),
    "torch.nn.modules.sparse.Embedding": FunctionalModule("embedding", ("weight",)),
    "torch.nn.modules.normalization.LayerNorm": FunctionalModule("layer_norm", ("weight", "bias")),
    "torch.nn.modules.normalization.RMSNorm": FunctionalModule("rms_norm", ("weight",)),
    # nn.Dropout's forward is F.dropout(input, self.p, self.training, self.inplace)
    **{f"torch.nn.modules.dropout.{cls}": FunctionalModule(op, ()) for cls, op in (
        ("Dropout", "dropout"), ("Dropout1d", "dropout1d"), ("Dropout2d", "dropout2d"),
        ("Dropout3d", "dropout3d"), ("AlphaDropout", "alpha_dropout"),
        ("FeatureAlphaDropout", "feature_alpha_dropout"),
    )},
    # nn.Identity's forward returns its input: typed as a copy (linear, any type)
    "torch.nn.modules.linear.Identity": FunctionalModule("clone", ()),
    # elementwise activations: nn.GELU's forward is F.gelu(input, approximate=
    # self.approximate), and so on; their constructor arguments (a slope, an
    # approximation) change no SPMD type.
    **{f"torch.nn.modules.activation.{cls}": FunctionalModule(op, ()) for cls, op in (
        ("GELU", "gelu"), ("ReLU", "relu"), ("SiLU", "silu"), ("Tanh", "tanh"), ("Sigmoid", "sigmoid"),
        ("Mish", "mish"), ("LeakyReLU", "leaky_relu"), ("ELU", "elu"), ("CELU", "celu"), ("SELU", "selu"),
        ("Softplus", "softplus"), ("Hardswish", "hardswish"), ("Hardsigmoid", "hardsigmoid"),
        ("ReLU6", "relu6"), ("Hardtanh", "hardtanh"), ("LogSigmoid", "logsigmoid"),
        ("Tanhshrink", "tanhshrink"), ("Softsign", "softsign"),
    )},
    # nn.Conv2d's forward is F.conv2d(input, self.weight, self.bias, ...), and
    # so on; nn.BatchNorm2d's F.batch_norm(input, running stats, self.weight,
    # self.bias, ...) (a normalisation: nonlinear), nn.GroupNorm's
    # F.group_norm, nn.InstanceNorm2d's F.instance_norm; the pools are their
    # functional op on the input alone (average pools linear, max pools not).
    **{f"torch.nn.modules.conv.{cls}{n}d": FunctionalModule(f"{op}{n}d", ("weight", "bias"))
       for cls, op in (("Conv", "conv"), ("ConvTranspose", "conv_transpose")) for n in (1, 2, 3)},
    # (BatchNorm1d/2d/3d and InstanceNorm1d/2d/3d inherit their base's forward)
    "torch.nn.modules.batchnorm._BatchNorm": FunctionalModule("batch_norm", ("weight", "bias")),
    "torch.nn.modules.instancenorm._InstanceNorm": FunctionalModule("instance_norm", ("weight", "bias")),
    "torch.nn.modules.normalization.GroupNorm": FunctionalModule("group_norm", ("weight", "bias")),
    **{f"torch.nn.modules.pooling.{cls}{n}d": FunctionalModule(f"{op}{n}d", ())
       for cls, op in (("AvgPool", "avg_pool"), ("AdaptiveAvgPool", "adaptive_avg_pool"),
                       ("MaxPool", "max_pool"), ("AdaptiveMaxPool", "adaptive_max_pool"))
       for n in (1, 2, 3)},
    # nn.Softmax's forward is F.softmax(input, self.dim): the dim is a setting
    # of the module, read where the call shows it (`nn.Softmax(dim=-1)(x)`),
    # else not literal (global code then needs the operand unsharded).
    # nn.Softmax2d (softmax over dim -3) is not listed.
    **{f"torch.nn.modules.activation.{cls}": FunctionalModule(op, (), (("dim", 0),)) for cls, op in (
        ("Softmax", "softmax"), ("LogSoftmax", "log_softmax"), ("Softmin", "softmin"),
    )},
}

# torch.return_types.<name> -> its fields in tuple order.  `x.max(dim=-1)`,
# `torch.topk(x, k)`, ... return these; `.values` is the op's result,
# `.indices` (INDEX_FIELDS) are integer positions: no gradient.
NAMED_RESULTS: Final[Mapping[str, Tuple[str, ...]]] = {
    **{
        name: ("values", "indices")
        for name in "max min topk sort kthvalue mode median nanmedian cummax cummin".split()
    },
    "aminmax": ("min", "max"),
}

INDEX_FIELDS: Final = frozenset({"indices"})

# torch.nn.init's in-place initializers: each writes its tensor argument's
# local values and returns that same tensor, so the result is the argument
# (its SPMD type unchanged: an init fills a declared parameter's local shard).
INIT_IN_PLACE: Final = frozenset(
    "uniform_ normal_ trunc_normal_ constant_ ones_ zeros_ eye_ dirac_ xavier_uniform_ xavier_normal_ "
    "kaiming_uniform_ kaiming_normal_ orthogonal_ sparse_".split()
)
