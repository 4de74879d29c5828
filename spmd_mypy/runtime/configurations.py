"""spmd.configurations: the configurations a module or function supports.

    @spmd.configurations(sequence_parallel=(True, False))
    class RowParallelLinear(nn.Module): ...

    @spmd.configurations(get_tensor_model_parallel_world_size=spmd.axis_size("tp", 1, 4))
    def reduce_from_tensor_parallel_region(x): ...

    @spmd.configurations(ep_enabled=spmd.axis_enabled("ep"))
    class MoE(nn.Module): ...

A declaration for the checker (plugin/configurations.py checks each body
once per configuration); at run time the decorator returns what it decorates,
with the declaration kept in `__spmd_configurations__` for tools to read."""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple, TypeVar

__all__ = ["configurations", "axis_size", "axis_enabled", "AxisSize"]

T = TypeVar("T")


class AxisSize(Tuple[int, ...]):
    """The values of a flag that stands for a mesh axis: its sizes
    (spmd.axis_size) or whether it is used (spmd.axis_enabled)."""

    axis: str


def axis_size(axis: str, *sizes: int) -> AxisSize:
    """A flag that is the size of `axis` (a world-size getter); size 1 makes
    the axis trivial in that configuration."""
    if not sizes or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in sizes):
        raise ValueError(f"spmd.axis_size({axis!r}, ...): the sizes are positive ints")
    out = AxisSize(sizes)
    out.axis = axis
    return out


def axis_enabled(axis: str) -> AxisSize:
    """A flag that says whether `axis` is used (torchtitan's tp_enabled,
    ep_enabled): True or False; False makes the axis trivial there."""
    out = AxisSize((True, False))
    out.axis = axis
    return out


def configurations(**flags: Any) -> Callable[[T], T]:
    """Declare the values each flag takes, as a tuple (`ep_enabled=(True,
    False)`), a dict tying each value to a layout (`sequence_parallel={True:
    Spmd(tp=S(0)), False: Spmd(tp=I)}`) or an axis size (`spmd.axis_size`);
    the checker checks every combination."""
    for name, values in flags.items():
        if not isinstance(values, (tuple, list, dict)) or not values:
            raise ValueError(f"spmd.configurations: {name}=(value, ...) lists the values the flag takes")
    declared: Dict[str, Tuple[Any, ...]] = {name: tuple(values) for name, values in flags.items()}

    def decorate(obj: T) -> T:
        merged = {**getattr(obj, "__spmd_configurations__", {}), **declared}
        try:
            setattr(obj, "__spmd_configurations__", merged)
        except (AttributeError, TypeError):
            pass  # a builtin or a slotted object: the declaration is for the checker only
        return obj

    return decorate
