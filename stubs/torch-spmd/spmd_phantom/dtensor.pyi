# A DTensor whose placements the checker knows, per mesh axis
# (spmd_mypy/plugin/dtensor.py): PlacedDTensor[Literal["dp=Shard(0), tp=Replicate()"]].
# Loaded only for files that import torch.distributed.tensor.
from typing import Generic, TypeVar

from torch.distributed.tensor import DTensor

_S_co = TypeVar("_S_co", covariant=True)

class PlacedDTensor(DTensor, Generic[_S_co]): ...
