# spmd_types.runtime: where the package's assertions and regions live
# (torchtitan imports get_partition_spec, get_local_type and has_local_type
# from here).  Every name is the package stub's own object, so the plugin's
# hooks, keyed on `spmd_types.<name>`, see these calls too.
# tests/test_spmd_types_stubs.py compares the names with the installed module.

from typing import Any, Callable, TypeVar

from . import (
    I as I,
    P as P,
    R as R,
    V as V,
    DeviceMeshAxis as DeviceMeshAxis,
    Infer as Infer,
    LocalSpmdType as LocalSpmdType,
    MeshAxis as MeshAxis,
    PartitionSpec as PartitionSpec,
    PerMeshAxisLocalSpmdType as PerMeshAxisLocalSpmdType,
    PerMeshAxisSpmdType as PerMeshAxisSpmdType,
    PerMeshAxisSpmdTypes as PerMeshAxisSpmdTypes,
    Shard as Shard,
    SpmdType as SpmdType,
    SpmdTypeError as SpmdTypeError,
    assert_local_type as assert_local_type,
    assert_local_type_like as assert_local_type_like,
    assert_type as assert_type,
    assert_type_like as assert_type_like,
    current_mesh as current_mesh,
    get_local_type as get_local_type,
    get_partition_spec as get_partition_spec,
    has_local_type as has_local_type,
    is_type_checking as is_type_checking,
    local as local,
    local_map as local_map,
    merge_types as merge_types,
    mutate_type as mutate_type,
    no_typecheck as no_typecheck,
    normalize_axis as normalize_axis,
    normalize_partition_spec as normalize_partition_spec,
    register_autograd_function as register_autograd_function,
    register_decomposition as register_decomposition,
    register_local_autograd_function as register_local_autograd_function,
    register_no_typecheck as register_no_typecheck,
    reinterpret_no_grad as reinterpret_no_grad,
    trace as trace,
)
from .types import (
    PerMeshAxisSpmdTypesArg as PerMeshAxisSpmdTypesArg,
    format_axis as format_axis,
    normalize_local_type as normalize_local_type,
    shard_types_to_partition_spec as shard_types_to_partition_spec,
    to_local_type as to_local_type,
)

_F = TypeVar("_F", bound=Callable[..., Any])

def api_boundary(fn: _F) -> _F: ...
