from typing import Any, List, Tuple, TypeVar

from torch import Tensor

# The bounds of a rank's vocabulary slice are numbers made from the rank:
# with a rank number (spmd_phantom.RankOf, from get_tensor_model_parallel_rank())
# they are rank numbers of the same axes, so a mask or an offset built from
# them differs by rank as one built from the rank does; with a plain int,
# plain ints.
_Rank = TypeVar("_Rank", bound=int)

class VocabUtility:
    @staticmethod
    def vocab_range_from_per_partition_vocab_size(
        per_partition_vocab_size: int, rank: _Rank, world_size: int
    ) -> Tuple[_Rank, _Rank]: ...
    @staticmethod
    def vocab_range_from_global_vocab_size(global_vocab_size: int, rank: _Rank, world_size: int) -> Tuple[_Rank, _Rank]: ...

def split_tensor_along_last_dim(tensor: Tensor, num_partitions: int, contiguous_split_chunks: bool = False) -> List[Tensor]: ...
def __getattr__(name: str) -> Any: ...
