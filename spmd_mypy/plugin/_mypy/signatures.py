"""Building call signatures from declared types (spmd.trusted's call form)."""

from __future__ import annotations

from typing import List

from mypy.nodes import ARG_POS
from mypy.types import CallableType, Type


def positional_signature(sig: CallableType, arg_types: List[Type], ret_type: Type) -> CallableType:
    """`sig` with exactly these positional parameters and this result, for a
    callee taking `*args` (an autograd Function's `.apply`)."""
    return sig.copy_modified(
        arg_types=arg_types,
        arg_kinds=[ARG_POS] * len(arg_types),
        arg_names=[None] * len(arg_types),
        ret_type=ret_type,
    )


def takes_var_args(sig: CallableType) -> bool:
    return sig.is_var_arg or sig.is_kw_arg
