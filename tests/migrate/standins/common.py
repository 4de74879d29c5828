"""Deterministic full weights for the migration test programs, sharded per rank."""

from __future__ import annotations

import torch
from torch import Tensor, nn


def weight(rows: int, cols: int, seed: int) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=g, dtype=torch.float64)


def shard(full: Tensor, dim: int, rank: int, size: int) -> nn.Parameter:
    return nn.Parameter(torch.chunk(full, size, dim=dim)[rank].clone())
