"""spmd-mypy: SPMD types for PyTorch distributed code.

    from typing import Annotated
    from torch import Tensor
    import spmd_mypy as spmd
    from spmd_mypy import Spmd, R, I, V, P, S, PartitionSpec

    def row_parallel(h: Annotated[Tensor, Spmd(tp=V)], w: Annotated[Tensor, Spmd(tp=V)]):
        out = spmd.reinterpret(h @ w.T, "tp", src=V, dst=P)
        return spmd.all_reduce(out, "tp", src=P, dst=R)

The vocabulary (Spmd, Axis, R/I/V/P/S, JAX's names Reduced/Unreduced/
Invariant/Varying for R/P/I/V, PartitionSpec) is pure Python and imported
eagerly, except the redistribution planner.  The runtime (collectives,
set_mesh) imports torch, so it is loaded on first use: the mypy plugin imports
this package without ever importing torch or the planner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .vocab.aliases import Invariant, Reduced, Unreduced, Varying
from .vocab.axis import Axis
from .vocab.collectives import CollectiveError
from .vocab.localtype import PS, PSA, I, P, R, S, V
from .vocab.spec import PartitionSpec, SpecError, Spmd

__version__ = "0.1.0"

_RUNTIME = {
    "all_reduce": "api",
    "all_gather": "api",
    "reduce_scatter": "api",
    "all_to_all": "api",
    "reinterpret": "api",
    "convert": "api",
    "redistribute": "api",
    "assert_spmd": "api",
    "assert_like": "api",
    "reveal_comms": "api",
    "set_mesh": "mesh",
    "simulate": "simulate",
    "current_mesh": "mesh",
    "matmul": "global_ops",
    "einsum": "global_ops",
    "linear": "global_ops",
    "sum": "global_ops",
    "mean": "global_ops",
    "global_spmd": "global_ops",
    "local_map": "global_ops",
    "trusted": "trusted",
    "tie": "gradsync",
    "sync_grad": "gradsync",
    "sync_grads": "gradsync",
    "sync_grads_on_step": "gradsync",
    "sync_grads_in_backward": "gradsync",
    "no_sync": "gradsync",
    "configurations": "configurations",
    "axis_size": "configurations",
    "axis_enabled": "configurations",
    "send_next": "pipeline",
    "send_prev": "pipeline",
    "recv_prev": "pipeline",
    "recv_next": "pipeline",
    "wait_sends": "pipeline",
    "Activation": "activation",
}
# Pure-Python vocabulary loaded on first use too: the mypy plugin imports this
# package on every run and never plans a redistribution.
_LAZY_VOCAB = {"RedistPlan": "redistribute_plan", "plan_redistribute": "redistribute_plan"}

__all__ = [
    "Spmd",
    "Axis",
    "PartitionSpec",
    "R",
    "I",
    "V",
    "P",
    "S",
    "Reduced",
    "Unreduced",
    "Invariant",
    "Varying",
    "PS",
    "PSA",
    "partitioned",
    "CollectiveError",
    "SpecError",
    "plan_redistribute",
    "RedistPlan",
    # spmd.sum stays out of `from spmd_mypy import *`, which would shadow the builtin.
    *(name for name in _RUNTIME if name != "sum"),
]

if TYPE_CHECKING:
    from .vocab.redistribute_plan import RedistPlan, plan_redistribute
    from .runtime.api import (
        all_gather,
        all_reduce,
        all_to_all,
        assert_like,
        assert_spmd,
        convert,
        redistribute,
        reduce_scatter,
        reinterpret,
        reveal_comms,
    )
    from .runtime.global_ops import einsum, global_spmd, linear, local_map, matmul, mean, sum
    from .runtime.mesh import current_mesh, set_mesh
    from .runtime.simulate import simulate
    from .runtime.trusted import trusted
    from .runtime.gradsync import no_sync, sync_grad, sync_grads, sync_grads_in_backward, sync_grads_on_step, tie
    from .runtime.configurations import axis_enabled, axis_size, configurations
    from .runtime.pipeline import recv_next, recv_prev, send_next, send_prev, wait_sends
    from .runtime import partitioned
    from .runtime.activation import Activation


def __getattr__(name: str) -> Any:
    if name == "partitioned":  # the module of partitioned-shard conversions (seed 004)
        value = importlib.import_module(".runtime.partitioned", __name__)
        globals()[name] = value
        return value
    if name in _LAZY_VOCAB:
        module = f".vocab.{_LAZY_VOCAB[name]}"
    elif name in _RUNTIME:
        module = f".runtime.{_RUNTIME[name]}"
    else:
        raise AttributeError(f"module 'spmd_mypy' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_RUNTIME) | set(_LAZY_VOCAB) | {"partitioned"})
