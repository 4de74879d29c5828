"""The one place that touches torch's private simulated-rank API.

Under `LocalTensorMode` (torch.distributed._local_tensor) one process holds
every rank's tensor.  Code that depends on the rank's coordinate (take my
shard, zero unless I am rank 0) must then run once per simulated rank;
`per_rank` arranges that and is the identity on real ranks.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

import torch
import torch.distributed as dist

from ..vocab.collectives import CollectiveError

F = TypeVar("F", bound=Callable[..., Any])

_enabled_mode: Optional[Callable[[], Any]] = None
_Mode: Any = None
_LocalTensor: Any = None
_per_rank: Optional[Callable[[Any], Any]] = None
_LocalIntNode: Any = None
try:  # private torch API: keep every use of it in this module
    from torch.distributed import _local_tensor

    _enabled_mode = _local_tensor.enabled_local_tensor_mode
    _per_rank = _local_tensor.maybe_run_for_local_tensor
    _LocalIntNode = _local_tensor.LocalIntNode
    _Mode = _local_tensor.LocalTensorMode
    _LocalTensor = _local_tensor.LocalTensor
except ImportError:  # pragma: no cover - a torch without simulated ranks
    pass


def per_rank(fn: F) -> F:
    """Run fn once per simulated rank under LocalTensorMode; plain call otherwise."""
    return fn if _per_rank is None else _per_rank(fn)


def simulated() -> bool:
    """True when collectives run on simulated ranks in this process."""
    return _enabled_mode is not None and _enabled_mode() is not None


def simulated_group_coord(group: dist.ProcessGroup) -> Optional[int]:
    """Each simulated rank's index in `group`; None on real ranks.

    On simulated ranks dist.get_rank(group) is the same for every rank, so a
    group that is not a mesh dim must span all simulated ranks to be usable.
    """
    mode = _enabled_mode() if _enabled_mode is not None else None
    if mode is None:
        return None
    ranks = dist.get_process_group_ranks(group)
    if set(mode.ranks) - set(ranks):
        raise CollectiveError(
            "on simulated ranks a ProcessGroup must be a dim of the current mesh or span "
            "every simulated rank"
        )
    return torch.SymInt(_LocalIntNode({r: ranks.index(r) for r in mode.ranks}))  # type: ignore[return-value]


def local_mode(world_size: int) -> Any:
    """torch's simulated-rank mode over `world_size` ranks (a context manager)."""
    if _Mode is None:  # pragma: no cover - a torch without simulated ranks
        raise RuntimeError("this torch has no simulated-rank mode (torch.distributed._local_tensor)")
    return _Mode(world_size)


def rank_map(mode: Any, make: Callable[[int], torch.Tensor]) -> torch.Tensor:
    """A simulated tensor whose rank r holds make(r)."""
    return mode.rank_map(make)


def on_rank(t: Any, rank: int) -> torch.Tensor:
    """Rank `rank`'s tensor of a simulated tensor."""
    if _LocalTensor is None or not isinstance(t, _LocalTensor):
        raise TypeError(f"not a tensor of simulated ranks: {type(t).__name__}")
    return t._local_tensors[rank]
