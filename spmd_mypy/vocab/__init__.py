"""The SPMD type vocabulary, shared by the mypy plugin and the runtime shim.

Pure Python: nothing under this package imports torch or mypy, and both
adapters read these modules instead of restating any rule.

  localtype    R, I, V, P, S(i), the gradient-type map, parsing of one axis type
  axis         Axis: the mesh axis a ProcessGroup stands for
  spec         PartitionSpec, Spmd, the canonical string form and its parser
  subaxis      sub-axes "x":(m)k of a mesh axis (Shardy), their invariants, the split mesh
  collectives  src/dst signatures, forward->backward table, expert-only set
  opclasses    classes of torch ops and the per-axis rule of each class
"""

from .axis import Axis
from .collectives import CollectiveError, Step, backward, plan, signature_text
from .localtype import AxisType, I, LocalType, P, R, S, Shard, V, grad_type, parse_axis_type
from .spec import PartitionSpec, SpecError, Spmd, parse_spmd

__all__ = [
    "Axis",
    "AxisType",
    "CollectiveError",
    "I",
    "LocalType",
    "P",
    "PartitionSpec",
    "R",
    "S",
    "Shard",
    "SpecError",
    "Spmd",
    "Step",
    "V",
    "backward",
    "grad_type",
    "parse_axis_type",
    "parse_spmd",
    "plan",
    "signature_text",
]
