"""Statistics shared by the benchmarks (both compare two commands, A and B)."""

from __future__ import annotations

import random
import statistics
from typing import Sequence, Tuple


def bootstrap_ratio_ci(a: Sequence[float], b: Sequence[float], n: int = 2000) -> Tuple[float, float]:
    """95% interval of median(a)/median(b), resampling rounds with each (a, b) pair kept together."""
    rng = random.Random(0)
    k = len(a)
    out = []
    for _ in range(n):
        idx = [rng.randrange(k) for _ in range(k)]
        out.append(statistics.median(a[i] for i in idx) / statistics.median(b[i] for i in idx))
    out.sort()
    return out[int(0.025 * n)], out[int(0.975 * n) - 1]


def bootstrap_median_ci(values: Sequence[float], n: int = 4000) -> Tuple[float, float]:
    """95% interval of the median of `values` (e.g. per-round paired ratios)."""
    rng = random.Random(0)
    k = len(values)
    out = sorted(statistics.median(values[rng.randrange(k)] for _ in range(k)) for _ in range(n))
    return out[int(0.025 * n)], out[int(0.975 * n) - 1]
