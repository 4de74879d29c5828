"""Process groups of a dp x tp run, as Megatron and picotron keep them.

Megatron keeps module-level globals behind getter functions; picotron keeps
one manager object in a module global that every layer reads.  torchtitan
builds a DeviceMesh with named dims instead.  Nothing here runs at import.
"""

from __future__ import annotations

from typing import List, Optional

import torch.distributed as dist
from torch.distributed import ProcessGroup
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

_TENSOR_MODEL_PARALLEL_GROUP: Optional[ProcessGroup] = None
_DATA_PARALLEL_GROUP: Optional[ProcessGroup] = None


def _group_ranks(world_size: int, tp_size: int) -> List[List[int]]:
    """Consecutive ranks share a tensor-parallel group: [[0, 1], [2, 3], ...]."""
    return [list(range(start, start + tp_size)) for start in range(0, world_size, tp_size)]


def initialize_model_parallel(tensor_model_parallel_size: int = 1) -> None:
    """Create the tp and dp groups of this rank (every rank calls new_group for every group)."""
    global _TENSOR_MODEL_PARALLEL_GROUP, _DATA_PARALLEL_GROUP
    world_size = dist.get_world_size()
    rank = dist.get_rank()
    if world_size % tensor_model_parallel_size != 0:
        raise ValueError(f"world size {world_size} is not a multiple of tp {tensor_model_parallel_size}")
    for ranks in _group_ranks(world_size, tensor_model_parallel_size):
        group = dist.new_group(ranks)
        if rank in ranks:
            _TENSOR_MODEL_PARALLEL_GROUP = group
    for offset in range(tensor_model_parallel_size):
        ranks = list(range(offset, world_size, tensor_model_parallel_size))
        group = dist.new_group(ranks)
        if rank in ranks:
            _DATA_PARALLEL_GROUP = group


def model_parallel_is_initialized() -> bool:
    return _TENSOR_MODEL_PARALLEL_GROUP is not None and _DATA_PARALLEL_GROUP is not None


def get_tensor_model_parallel_group() -> ProcessGroup:
    assert _TENSOR_MODEL_PARALLEL_GROUP is not None, "tensor model parallel group is not initialized"
    return _TENSOR_MODEL_PARALLEL_GROUP


def get_data_parallel_group() -> ProcessGroup:
    assert _DATA_PARALLEL_GROUP is not None, "data parallel group is not initialized"
    return _DATA_PARALLEL_GROUP


def get_tensor_model_parallel_world_size() -> int:
    return dist.get_world_size(group=get_tensor_model_parallel_group())


def get_tensor_model_parallel_rank() -> int:
    return dist.get_rank(group=get_tensor_model_parallel_group())


def get_data_parallel_world_size() -> int:
    return dist.get_world_size(group=get_data_parallel_group())


class ProcessGroupManager:
    """picotron style: the grid of a dp x tp run and this rank's groups, built once."""

    def __init__(self, dp_size: int, tp_size: int) -> None:
        self.global_rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        if dp_size * tp_size != self.world_size:
            raise ValueError(f"dp {dp_size} x tp {tp_size} != world size {self.world_size}")
        self.dp_size = dp_size
        self.tp_size = tp_size
        self.dp_rank = self.global_rank // tp_size
        self.tp_rank = self.global_rank % tp_size
        self.tp_group = self._my_group([[d * tp_size + t for t in range(tp_size)] for d in range(dp_size)])
        self.dp_group = self._my_group([[d * tp_size + t for d in range(dp_size)] for t in range(tp_size)])
        self.tp_world_size = dist.get_world_size(group=self.tp_group)
        self.dp_world_size = dist.get_world_size(group=self.dp_group)
        self.tp_first_rank = self.dp_rank * tp_size

    def _my_group(self, layout: List[List[int]]) -> ProcessGroup:
        mine: Optional[ProcessGroup] = None
        for ranks in layout:
            group = dist.new_group(ranks)
            if self.global_rank in ranks:
                mine = group
        assert mine is not None
        return mine

    def __str__(self) -> str:
        return f"DP({self.dp_world_size})-TP({self.tp_world_size})-rank{self.global_rank}"


process_group_manager: Optional[ProcessGroupManager] = None


def setup_process_group_manager(dp_size: int, tp_size: int) -> ProcessGroupManager:
    global process_group_manager
    process_group_manager = ProcessGroupManager(dp_size, tp_size)
    return process_group_manager


def pgm() -> ProcessGroupManager:
    assert process_group_manager is not None, "call setup_process_group_manager first"
    return process_group_manager


def build_mesh(dp: int, tp: int, device_type: str = "cpu") -> DeviceMesh:
    """torchtitan style: one DeviceMesh whose dims are named dp and tp."""
    return init_device_mesh(device_type, (dp, tp), mesh_dim_names=("dp", "tp"))
