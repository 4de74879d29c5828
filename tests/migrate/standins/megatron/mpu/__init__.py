"""Stand-in for gpt-neox's megatron.mpu: re-exports the mappings."""

from .mappings import (
    copy_to_model_parallel_region,
    gather_from_model_parallel_region,
    gather_from_sequence_parallel_region,
    reduce_from_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_model_parallel_region,
    scatter_to_sequence_parallel_region,
)

__all__ = [
    "copy_to_model_parallel_region",
    "gather_from_model_parallel_region",
    "gather_from_sequence_parallel_region",
    "reduce_from_model_parallel_region",
    "reduce_scatter_to_sequence_parallel_region",
    "scatter_to_model_parallel_region",
    "scatter_to_sequence_parallel_region",
]
