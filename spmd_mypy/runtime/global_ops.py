"""Global SPMD at runtime: ops with a Partial result, global_spmd and local_map.

Ops that contract or reduce a sharded dim leave a pending sum.  In global SPMD
that result must be asked for explicitly (the design's `out_partial_axes`):

    out = spmd.linear(hidden, weight, out_partial_axes="tp")   # P on tp
    out = spmd.all_reduce(out, "tp", src=P, dst=R)

Each op runs the plain local torch op on this rank's tensors, and the result
is then Partial on the named axes: the sum over those axes of the per-rank
results is the op applied to the full tensors.  That is exactly the local op
followed by reinterpret(V -> P) on those axes, except for `mean`, which
divides by the product of the axes' sizes so that the sum over ranks is the
mean over the full dim (each rank only sees its shard's element count).  The
mypy plugin types the result; at runtime the keyword is checked (names of
the current mesh's dims or sub-axes of them, "tp:(1)2", none twice) and
otherwise costs nothing.

A bias added inside the op (`linear(x, w, b, out_partial_axes=...)`) is added
on every rank, so the sum over ranks counts it once per rank unless it is
itself Partial on those axes; add a replicated bias after the reduction.

`global_spmd` and `local_map` only mark code for the checker: at runtime they
return the function's behaviour and signature unchanged.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Protocol, Sequence, Tuple, TypeVar, Union, overload

import torch
from torch import Tensor

from ..vocab.collectives import CollectiveError
from ..vocab.spec import Spmd
from ..vocab.subaxis import base_axis, is_sub_axis, parse_axis_ref
from .mesh import current_mesh

__all__ = ["matmul", "einsum", "linear", "sum", "mean", "global_spmd", "local_map", "LocalMapDecorator"]

F = TypeVar("F", bound=Callable[..., Any])
Axes = Union[str, Tuple[str, ...]]
DimArg = Union[None, int, Sequence[int]]


def _partial_axes(op: str, out_partial_axes: Axes) -> Tuple[str, ...]:
    """Validate out_partial_axes; return it as a tuple of names."""
    axes = (out_partial_axes,) if isinstance(out_partial_axes, str) else out_partial_axes
    if not isinstance(axes, tuple) or not all(isinstance(a, str) for a in axes):
        raise CollectiveError(
            f"spmd.{op}: out_partial_axes is an axis name or a tuple of names, got {out_partial_axes!r}"
        )
    if len(set(axes)) != len(axes):
        raise CollectiveError(f"spmd.{op}: out_partial_axes names an axis twice: {axes}")
    mesh = current_mesh()
    if axes and mesh is not None:
        names = tuple(mesh.mesh_dim_names or ())
        for a in axes:
            if a not in names and not (is_sub_axis(a) and base_axis(a) in names):
                raise CollectiveError(
                    f"spmd.{op}: out_partial_axes names {a!r}, which is not a dim of the current "
                    f"mesh (dims: {names})"
                )
    return axes


def _dims(dim: Union[int, Sequence[int]]) -> Union[int, Tuple[int, ...]]:
    return dim if isinstance(dim, int) else tuple(dim)


def matmul(input: Tensor, other: Tensor, *, out_partial_axes: Axes = ()) -> Tensor:
    """torch.matmul on the local tensors; the result is P on out_partial_axes."""
    _partial_axes("matmul", out_partial_axes)
    return torch.matmul(input, other)


def einsum(equation: str, *operands: Tensor, out_partial_axes: Axes = ()) -> Tensor:
    """torch.einsum on the local tensors; the result is P on out_partial_axes."""
    _partial_axes("einsum", out_partial_axes)
    return torch.einsum(equation, *operands)


def linear(
    input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *, out_partial_axes: Axes = ()
) -> Tensor:
    """F.linear on the local tensors; the result is P on out_partial_axes.

    The bias is added on every rank (see the module docstring).
    """
    _partial_axes("linear", out_partial_axes)
    return torch.nn.functional.linear(input, weight, bias)


def sum(
    input: Tensor,
    dim: DimArg = None,
    keepdim: bool = False,
    *,
    dtype: Optional[torch.dtype] = None,
    out_partial_axes: Axes = (),
) -> Tensor:
    """torch.sum of the local tensor (over `dim`, or everything); P on out_partial_axes."""
    _partial_axes("sum", out_partial_axes)
    if dim is None:
        return torch.sum(input, dtype=dtype)
    return torch.sum(input, _dims(dim), keepdim=keepdim, dtype=dtype)


def mean(
    input: Tensor,
    dim: DimArg = None,
    keepdim: bool = False,
    *,
    dtype: Optional[torch.dtype] = None,
    out_partial_axes: Axes = (),
) -> Tensor:
    """The local mean divided by the product of the sizes of out_partial_axes: P on them.

    When the reduced dims are sharded over exactly those axes (even shards),
    the sum over ranks is the mean of the full tensor.
    """
    axes = _partial_axes("mean", out_partial_axes)
    if dim is None:
        out = torch.mean(input, dtype=dtype)
    else:
        out = torch.mean(input, _dims(dim), keepdim=keepdim, dtype=dtype)
    if not axes:
        return out
    mesh = current_mesh()
    if mesh is None:
        raise CollectiveError(
            "spmd.mean with out_partial_axes divides by the axes' sizes, so it needs a mesh; "
            "wrap the code in `with spmd.set_mesh(mesh):`"
        )
    names = tuple(mesh.mesh_dim_names or ())
    n = 1
    for a in axes:
        n *= parse_axis_ref(a).size if is_sub_axis(a) else mesh.size(names.index(a))  # type: ignore[operator]
    return out / n


# -- markers for the checker ---------------------------------------------------------


@overload
def global_spmd(fn: F) -> F: ...


@overload
def global_spmd(fn: None = None, *, axes: Axes = ...) -> Callable[[F], F]: ...


def global_spmd(fn: Optional[F] = None, *, axes: Axes = ()) -> Any:
    """Mark a function (or module) as global SPMD code: the checker propagates
    partition specs through it.  `axes` limits global mode to those mesh axes
    (the others stay local).  Usable bare (@global_spmd) or called
    (@global_spmd(axes=("tp",))).  Returns the function itself.
    """
    names = (axes,) if isinstance(axes, str) else axes
    if not isinstance(names, tuple) or not all(isinstance(a, str) for a in names):
        raise TypeError(f"spmd.global_spmd: axes is an axis name or a tuple of names, got {axes!r}")

    def mark(f: F) -> F:
        if not callable(f):
            raise TypeError(f"spmd.global_spmd decorates a function or class, got {f!r}")
        try:
            f.__spmd_global_axes__ = names  # type: ignore[attr-defined]
        except (AttributeError, TypeError):  # a builtin: nothing to record on
            pass
        return f

    return mark if fn is None else mark(fn)


TypesArg = Union[None, Spmd, Sequence[Optional[Spmd]]]


def _check_types(name: str, types: TypesArg) -> None:
    items = types if isinstance(types, (tuple, list)) else (types,)
    for t in items:
        if t is not None and not isinstance(t, Spmd):
            raise TypeError(
                f"spmd.local_map: {name} takes Spmd(...) values (or None for a non-tensor), got {t!r}"
            )


class LocalMapDecorator(Protocol):
    """What `local_map(in_types=..., out_types=...)` without fn returns: the
    decorator.  The checker retypes the function it decorates by the
    declared types and checks its own against them (spmd_mypy/plugin/local_map.py)."""

    def __call__(self, fn: F, /) -> F: ...


@overload
def local_map(fn: F, *, in_types: TypesArg = ..., out_types: TypesArg = ...) -> F: ...


@overload
def local_map(
    fn: None = None, *, in_types: TypesArg = ..., out_types: TypesArg = ...
) -> LocalMapDecorator: ...


def local_map(fn: Optional[F] = None, *, in_types: TypesArg = None, out_types: TypesArg = None) -> Any:
    """Run fn as local SPMD code inside global SPMD code.

    in_types: the global type of each positional argument (an Spmd, or None
    for a non-tensor); out_types: the global type of the result (or a tuple,
    one per returned tensor).  The checker forgets the partition specs on the
    way in and reassembles the result with out_types.  At runtime the call
    goes straight to fn (each rank already holds its local tensors); the
    wrapper keeps fn's name, docstring and signature.  Usable as
    local_map(fn, ...) or as a decorator @local_map(in_types=..., out_types=...).
    """
    _check_types("in_types", in_types)
    _check_types("out_types", out_types)

    def wrap(f: F) -> F:
        @functools.wraps(f)
        def local(*args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs)

        local.__spmd_local_types__ = (in_types, out_types)  # type: ignore[attr-defined]
        return local  # type: ignore[return-value]

    return wrap if fn is None else wrap(fn)
