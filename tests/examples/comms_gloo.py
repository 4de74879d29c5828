"""Measure the bytes the runtime's collectives move while each example trains, on 2
gloo ranks, for test_comms_gloo.py.

Two meshes over the same 2 ranks: dp=1 x tp=2 and dp=2 x tp=1, so every axis
of every example communicates in one of them.  A job is (example, mesh).  In
each job the worker records

  - every typed call the example makes (spmd.all_reduce, spmd.convert, ...:
    the package attributes are wrapped): its place in the example file
    (line, column of the call), the op, and its input's element count, dtype
    size and whether it requires grad;
  - every call of the gradient-sync contract's `spmd.sync_grads` (wrapped the
    same way): its place, and the element count and dtype size of each
    parameter of the module whose gradient is set;
  - every torch.distributed call the runtime's kernels make (the functions are
    wrapped, as bench/bench_fsdp.py does): the c10d function, the bytes of the
    buffer handed in, the group's size, whether it ran in the backward pass
    (autograd's engine is running a node) and whether inside `sync_grads`.

The drivers are example_drivers.py's, with its mesh sizes (DP, TP) set to
the job's mesh in the worker, plus one for examples/tp_mlp.py, which has
none there.  An example whose driver runs on its own mesh (packed_tokens_loss:
dp=4, for its sub-axes dp:(1)2 and dp:(2)2) runs there instead, in a 4-rank
spawn of its own (WIDE_WORLD, WIDE_MESHES).
"""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Tuple

import torch

from examples_gloo import EXAMPLES, load_example

# The report's phase of the contract's sums (comm_sites.GRADIENT_SYNC; workers do not import the plugin).
GRADIENT_SYNC = "gradient sync"

WORLD = 2
MESHES: Dict[str, Tuple[int, int]] = {"tp2": (1, 2), "dp2": (2, 1)}  # name -> (dp, tp)
WIDE_WORLD = 4
WIDE_MESHES: Dict[str, Tuple[int, int]] = {"dp4": (4, 1)}  # dp only: no "tp" axis
_TYPED = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "reinterpret", "convert", "redistribute")
_PARTITIONED = ("unaligned_to_aligned", "aligned_to_unaligned", "unaligned_to_replicate", "aligned_to_replicate",
                "replicate_to_unaligned", "replicate_to_aligned")
_C10D = ("all_reduce", "all_gather_single", "reduce_scatter_single", "all_to_all_single")


@dataclass(frozen=True)
class Job:
    id: str
    example: str  # a driver name (example_drivers.DRIVERS, or "tp_mlp")
    mesh: str


def wide_examples() -> List[str]:
    """The examples whose driver asks for the 4-rank dp-only mesh."""
    import example_drivers

    return sorted(k for k, d in example_drivers.DRIVERS.items() if d.mesh == WIDE_MESHES["dp4"])


def examples() -> List[str]:
    """The examples run on the two 2-rank meshes."""
    import example_drivers

    return sorted(k for k in [*example_drivers.DRIVERS, "tp_mlp"] if k not in wide_examples())


def cases() -> List[Tuple[str, str]]:
    """Every (example, mesh) pair checked."""
    return [(e, m) for e in examples() for m in MESHES] + [(e, m) for e in wide_examples() for m in WIDE_MESHES]


def example_file(example: str) -> str:
    import example_drivers

    return "tp_mlp.py" if example == "tp_mlp" else example_drivers.DRIVERS[example].file


def jobs() -> List[Job]:
    return [Job(f"{e}@{m}", e, m) for e in examples() for m in MESHES]


def wide_jobs() -> List[Job]:
    return [Job(f"{e}@{m}", e, m) for e in wide_examples() for m in WIDE_MESHES]


class Recorder:
    """The typed calls and the c10d calls of one job (see the module docstring)."""

    def __init__(self) -> None:
        self.typed: List[Tuple[str, int, int, str, int, int, bool]] = []
        self.c10d: List[Tuple[str, int, int, str, bool]] = []  # (name, bytes, group size, phase, runtime-sized)
        self.syncs: List[Tuple[str, int, int, str, Dict[str, Tuple[int, int]]]] = []
        self.partitioned_nodes: List[Any] = []  # autograd nodes of partitioned conversions
        self.in_partitioned = False
        self.in_sync = False
        import torch.distributed as dist

        import spmd_mypy
        from spmd_mypy.runtime import api, gradsync, partitioned

        for op in _TYPED:
            setattr(spmd_mypy, op, self._typed(op, getattr(api, op)))
        for fn in _PARTITIONED:
            setattr(partitioned, fn, self._typed("partitioned." + fn, getattr(partitioned, fn)))
        for name in _C10D:
            setattr(dist, name, self._c10d(name, getattr(dist, name)))
        setattr(spmd_mypy, "sync_grads", self._sync_grads(gradsync.sync_grads))

    def _typed(self, op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(x: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            file, line, column = _caller()
            grad = x.requires_grad and torch.is_grad_enabled()
            self.typed.append((file, line, column, op, x.numel(), x.element_size(), grad))
            if not op.startswith("partitioned."):
                return fn(x, *args, **kwargs)
            self.in_partitioned = True
            try:
                out = fn(x, *args, **kwargs)
            finally:
                self.in_partitioned = False
            first = out[0] if isinstance(out, tuple) else out
            self.partitioned_nodes += _nodes_between(first.grad_fn, x.grad_fn)
            return out

        return wrapped

    def _sync_grads(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(module: torch.nn.Module, *axes: str) -> Any:
            file, line, column = _caller()
            params = {n: (p.numel(), p.element_size()) for n, p in module.named_parameters() if p.grad is not None}
            self.syncs.append((file, line, column, "sync_grads", params))
            self.in_sync = True
            try:
                return fn(module, *axes)
            finally:
                self.in_sync = False

        return wrapped

    def _c10d(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        import torch.distributed as dist

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            t = args[0] if name == "all_reduce" else args[1]  # (tensor) or (output, input, ...)
            g = dist.get_world_size(kwargs.get("group"))
            node = torch._C._current_autograd_node()
            runtime_sized = self.in_partitioned or any(node is n for n in self.partitioned_nodes)
            phase = GRADIENT_SYNC if self.in_sync else "backward" if node is not None else "forward"
            self.c10d.append((name, t.numel() * t.element_size(), g, phase, runtime_sized))
            return fn(*args, **kwargs)

        return wrapped


def _caller() -> Tuple[str, int, int]:
    """(file, line, column) of the call of a wrapped function: its caller's frame."""
    import inspect

    frame = sys._getframe(2)
    pos = inspect.getframeinfo(frame).positions
    column = pos.col_offset if pos is not None and pos.col_offset is not None else -1
    return frame.f_code.co_filename, frame.f_lineno, column


def _nodes_between(top: Any, bottom: Any) -> List[Any]:
    """The autograd nodes from `top` down to `bottom` (excluded): one call's backward."""
    out, todo = [], [top]
    while todo:
        node = todo.pop()
        if node is None or node is bottom or any(node is n for n in out):
            continue
        out.append(node)
        todo += [n for n, _ in node.next_functions]
    return out


def setup(rank: int) -> Tuple[Dict[str, Any], Any]:
    from torch.distributed.device_mesh import init_device_mesh

    meshes = {k: init_device_mesh("cpu", shape, mesh_dim_names=("dp", "tp")) for k, shape in MESHES.items()}
    return {"meshes": meshes, "recorder": Recorder()}, sorted(meshes)


def wide_setup(rank: int) -> Tuple[Dict[str, Any], Any]:
    from torch.distributed.device_mesh import init_device_mesh

    meshes = {k: init_device_mesh("cpu", (shape[0],), mesh_dim_names=("dp",)) for k, shape in WIDE_MESHES.items()}
    return {"meshes": meshes, "recorder": Recorder()}, sorted(meshes)


def _run_tp_mlp(mod: types.ModuleType, tp_rank: int) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 8, generator=gen, dtype=torch.float64).requires_grad_()
    w_in = torch.randn(16, 8, generator=gen, dtype=torch.float64).chunk(2, 0)[tp_rank].clone()
    w_out = torch.randn(8, 16, generator=gen, dtype=torch.float64).chunk(2, 1)[tp_rank].clone()
    (mod.TensorParallelMLP(w_in, w_out)(x) ** 2).sum().backward()


def run_job(job: Job, rank: int, state: Dict[str, Any]) -> Dict[str, Any]:
    import example_drivers

    import spmd_mypy as spmd

    rec: Recorder = state["recorder"]
    rec.typed, rec.c10d, rec.syncs, rec.partitioned_nodes = [], [], [], []
    dp, tp = {**MESHES, **WIDE_MESHES}[job.mesh]
    dp_rank, tp_rank = divmod(rank, tp)
    module = load_example(example_file(job.example), None, f"comms_{job.example}_{job.mesh}")
    example_drivers.DP, example_drivers.TP = dp, tp  # the drivers cut and build for this mesh
    with spmd.set_mesh(state["meshes"][job.mesh]):
        if job.example == "tp_mlp":
            _run_tp_mlp(module, tp_rank)
        else:
            driver = example_drivers.DRIVERS[job.example]
            driver.run(module, driver.inputs(), dp_rank, tp_rank)
    mine = os.path.abspath(EXAMPLES / example_file(job.example))
    return {
        "typed": [t for t in rec.typed if os.path.abspath(t[0]) == mine],
        "syncs": [t for t in rec.syncs if os.path.abspath(t[0]) == mine],
        "c10d": list(rec.c10d),
    }
