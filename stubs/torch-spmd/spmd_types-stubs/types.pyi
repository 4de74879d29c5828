# spmd_types.types: the package's type vocabulary.  The names the package
# also exports are the package stub's own objects (one PartitionSpec, one
# MeshAxis: a value from this module is the type the plugin reads); the
# helpers only this module has are declared here.  tests/test_spmd_types_stubs.py
# compares the names and signatures with the installed module.

from typing import Dict, Iterable, Optional, Protocol, Sequence, Tuple

from . import (
    I as I,
    P as P,
    R as R,
    S as S,
    V as V,
    DeviceMeshAxis as DeviceMeshAxis,
    DimSharding as DimSharding,
    Invariant as Invariant,
    LocalSpmdType as LocalSpmdType,
    MeshAxis as MeshAxis,
    Partial as Partial,
    PartitionSpec as PartitionSpec,
    PartitionSpecEntry as PartitionSpecEntry,
    PerMeshAxisLocalSpmdType as PerMeshAxisLocalSpmdType,
    PerMeshAxisSpmdType as PerMeshAxisSpmdType,
    PerMeshAxisSpmdTypes as PerMeshAxisSpmdTypes,
    Replicate as Replicate,
    Shard as Shard,
    SpmdType as SpmdType,
    SpmdTypeError as SpmdTypeError,
    TensorSharding as TensorSharding,
    TYPE_CHECKING as TYPE_CHECKING,
    Varying as Varying,
    normalize_axis as normalize_axis,
    normalize_mesh as normalize_mesh,
    normalize_partition_spec as normalize_partition_spec,
)

class PerMeshAxisSpmdTypesArg(Protocol):
    def items(self) -> Iterable[Tuple[DeviceMeshAxis, PerMeshAxisSpmdType]]: ...

class RedistributeError(SpmdTypeError): ...
class DTensorPropagationError(SpmdTypeError): ...

def format_axis(axis: DeviceMeshAxis) -> str: ...
def normalize_dim_sharding(dim_sharding: DimSharding) -> Sequence[str]: ...
def normalize_local_type(spmd_type: LocalSpmdType) -> LocalSpmdType: ...
def partition_spec_get_shard(spec: Optional[PartitionSpec], axis: DeviceMeshAxis) -> Optional[Shard]: ...
def partition_spec_to_shard_types(spec: PartitionSpec) -> Dict[MeshAxis, Shard]: ...
def shard_types_to_partition_spec(types: Dict[DeviceMeshAxis, PerMeshAxisSpmdType], ndim: int, axis_order: Optional[Sequence[DeviceMeshAxis]] = None) -> PartitionSpec: ...
def to_local_type(typ: PerMeshAxisSpmdType) -> PerMeshAxisLocalSpmdType: ...
