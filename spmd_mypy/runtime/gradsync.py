"""Finishing gradients by their declared types (the gradient-sync contract,
vocab/gradsync.py).

    spmd.tie(self.lm_head_weight, "pp")     # one parameter stored on several pp stages
    loss.backward()
    spmd.sync_grads(model, "dp", "tp", "pp") # sum every gradient pending on each axis, once
    spmd.sync_grad(block.ln_w, "tp")        # one parameter's gradient over one axis
    spmd.sync_grads_on_step(opt, model, "dp")  # the same as an optimizer-step pre-hook
    model = spmd.sync_grads_in_backward(model, "dp")  # DDP-style: at the end of every backward
    with spmd.no_sync(model): ...            # gradient accumulation: no sums in this backward

A parameter's state on an axis comes from the `Annotated[Tensor, Spmd(...)]`
its module class declares for it in the class body (read with
typing.get_type_hints) and from `tie`: R (or tied) is pending and summed,
I is complete and V/S(i) sharded, both left alone.  A parameter the class
declares nothing for on the axis is summed by `sync_grads` too, as DDP sums
every parameter (the checker sees no contract for it).  Each parameter
object is summed at most once per call, however many modules share it.
The sum is an in-place all-reduce of `.grad` over the axis's group, outside
autograd (gradients are values here).
"""

from __future__ import annotations

import contextlib
import typing
from typing import Any, Dict, Iterator, Optional, Tuple, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor, nn

from ..vocab.gradsync import PENDING, grad_state, summed_by_sync_grads
from ..vocab.spec import Spmd
from .mesh import AxisArg, resolve_axis

__all__ = ["tie", "sync_grad", "sync_grads", "sync_grads_on_step", "sync_grads_in_backward", "no_sync", "grad_state_of"]

TIED_ATTRIBUTE = "spmd_tied_axes"  # set on a Parameter by tie()


def tie(param: Tensor, axis: str) -> Tensor:
    """Declare `param` one copy of a parameter tied over `axis` (the embedding
    and the LM head of the first and last pipeline stage over "pp"): its
    gradient is pending over `axis`.  Returns `param`."""
    axes = tuple(getattr(param, TIED_ATTRIBUTE, ()))
    if axis not in axes:
        setattr(param, TIED_ATTRIBUTE, axes + (axis,))
    return param


def _declared(cls: type) -> Dict[str, Spmd]:
    """name -> Spmd for each class-body annotation of `cls` holding one."""
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # names an annotation cannot resolve at runtime: nothing declared
        hints = dict(getattr(cls, "__annotations__", {}))
    out: Dict[str, Spmd] = {}
    for name, hint in hints.items():
        for arg in _annotated_parts(hint):
            for meta in getattr(arg, "__metadata__", ()):
                if isinstance(meta, Spmd):
                    out[name] = meta
    return out


def _annotated_parts(hint: Any) -> Iterator[Any]:
    """The hint and, for Optional/Union, its alternatives."""
    yield hint
    if typing.get_origin(hint) is typing.Union:
        yield from typing.get_args(hint)


def grad_state_of(module: nn.Module, name: str, param: Tensor, axis: str) -> Optional[str]:
    """PENDING, COMPLETE, SHARDED or None (nothing declared) for a parameter
    `name` of `module` (its own, not a submodule's) on `axis`."""
    if axis in getattr(param, TIED_ATTRIBUTE, ()):
        return PENDING
    spmd = _declared(type(module)).get(name)
    return grad_state(spmd.axis_type(axis)) if spmd is not None else None


def _sum_grad(param: Tensor, axis: AxisArg) -> None:
    if param.grad is None:
        return
    comm = resolve_axis(axis)
    with torch.no_grad():
        dist.all_reduce(param.grad, group=comm.group)


def sync_grad(param: Tensor, axis: AxisArg) -> None:
    """Sum one parameter's gradient over `axis` (in place, once)."""
    _sum_grad(param, axis)


def _owned(module: nn.Module) -> Iterator[Tuple[nn.Module, str, nn.Parameter]]:
    for sub in module.modules():
        for name, p in sub.named_parameters(recurse=False):
            yield sub, name, p


def sync_grads(module: nn.Module, *axes: str) -> None:
    """For each axis, sum over it the gradient of every parameter of `module`
    pending there (declared R, tied over it, or declaring nothing on it);
    complete (I) and sharded (V, S(i)) gradients are left as they are."""
    for axis in axes:
        seen = set()
        for sub, name, p in _owned(module):
            if id(p) in seen:
                continue
            seen.add(id(p))
            if summed_by_sync_grads(grad_state_of(sub, name, p, axis)):
                _sum_grad(p, axis)


def sync_grads_on_step(optimizer: torch.optim.Optimizer, module: nn.Module, *axes: str) -> Any:
    """Run `sync_grads(module, *axes)` before every `optimizer.step()`;
    returns the hook's handle."""

    def hook(opt: Any, args: Any, kwargs: Any) -> None:
        sync_grads(module, *axes)

    return optimizer.register_step_pre_hook(hook)


M = TypeVar("M", bound=nn.Module)
BACKWARD_SYNC_ATTRIBUTE = "spmd_backward_sync"  # set on a module by sync_grads_in_backward()


class _BackwardSync:
    """The state of one sync_grads_in_backward(): the sum is queued once per
    backward, by the first parameter whose gradient is accumulated."""

    def __init__(self, module: nn.Module, axes: Tuple[str, ...]) -> None:
        self.module, self.axes = module, axes
        self.queued = False
        self.enabled = True

    def on_grad(self, param: Tensor) -> None:
        if self.enabled and not self.queued:
            self.queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self.finish)

    def finish(self) -> None:
        self.queued = False
        sync_grads(self.module, *self.axes)


def sync_grads_in_backward(module: M, *axes: str) -> M:
    """DDP-style: at the end of every backward that reaches `module`'s
    parameters, run `sync_grads(module, *axes)` (each pending gradient summed
    over each axis, once), except inside `spmd.no_sync(module)`.  Returns
    `module` itself, so its type, and the checker's typing of its calls, stay."""
    if hasattr(module, BACKWARD_SYNC_ATTRIBUTE):
        raise RuntimeError("sync_grads_in_backward: this module already sums its gradients in backward")
    state = _BackwardSync(module, tuple(axes))
    for p in module.parameters():
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(state.on_grad)
    setattr(module, BACKWARD_SYNC_ATTRIBUTE, state)
    return module


@contextlib.contextmanager
def no_sync(module: nn.Module) -> Iterator[None]:
    """Backward passes inside skip the sums of `sync_grads_in_backward(module, ...)`
    (gradient accumulation: the gradients accumulate locally, and the first
    backward outside sums them once)."""
    state = getattr(module, BACKWARD_SYNC_ATTRIBUTE, None)
    if state is None:
        raise RuntimeError("no_sync: the module does not sum its gradients in backward (sync_grads_in_backward)")
    before, state.enabled = state.enabled, False
    try:
        yield
    finally:
        state.enabled = before
