"""What a factor builder works with: the signature it returns, its context, its accumulator.

A builder (factor_build_*.py, one module per group of families) turns a
`BuildContext` (the op, its table row, the operands, literal params, names)
into a `Signature`, accumulating factors in a `FactorBuilder`.

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from .factor_table import PASS, FactorError, Row
from .globaltype import GlobalType
from .localtype import normalize_dim
from .opclasses import SCALAR

__all__ = ["Dims", "Signature", "Operand", "is_scalar", "BuildContext", "FactorBuilder", "same_dims"]


Dims = Tuple[Tuple[str, ...], ...]


class Signature(NamedTuple):
    """Factors of one op application: operand dims, result dims, kinds and sizes."""

    operands: Tuple[Dims, ...]  # per operand (scalars: ()), per dim, factors major to minor
    result: Dims
    kinds: Mapping[str, str]
    sizes: Mapping[str, int]  # known factor sizes
    result_sizes: Tuple[Optional[int], ...]
    why: Mapping[str, str]  # factor -> why it must stay whole / how it is reduced


Operand = Union[GlobalType, object]  # a GlobalType or a Python scalar (SCALAR, int, float)


def is_scalar(x: object) -> bool:
    return x is SCALAR or (isinstance(x, (int, float, complex)) and not isinstance(x, bool))


class BuildContext:
    """What a builder sees: the op, its row, operands, literal params, names."""

    def __init__(
        self, op: str, row: Row, operands: Sequence[Operand], params: Mapping[str, object], names: Sequence[str]
    ) -> None:
        self.op = op
        self.row = row
        self.operands = operands
        self.params = params
        self.names = names

    def tensor(self, k: int) -> GlobalType:
        if k >= len(self.operands) or not isinstance(self.operands[k], GlobalType):
            raise self.bad(f"expects a tensor as operand {k}")
        return self.operands[k]  # type: ignore[return-value]

    def count(self, lo: int, hi: Optional[int] = None) -> None:
        n = len(self.operands)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if hi == lo else f"{lo} to {hi}" if hi is not None else f"at least {lo}"
            raise self.bad(f"takes {want} tensor operands, got {n}")
        for k in range(n):
            self.tensor(k)

    def bad(self, why: str) -> FactorError:
        return FactorError(f"{self.op}: {why}", code="bad-param")

    def param(self, *keys: str, default: object = None, required: bool = False) -> object:
        for k in keys:
            if k in self.params:
                return self.params[k]
        if required:
            raise self.bad(f"needs the literal argument {keys[0]!r}")
        return default

    def dim(self, value: object, rank: int, what: str = "dim") -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.bad(f"{what} must be a literal int, got {value!r}")
        try:
            return normalize_dim(value, rank)
        except IndexError as e:
            raise self.bad(str(e)) from None

    def dims(self, value: object, rank: int, what: str = "dim") -> Tuple[int, ...]:
        items = value if isinstance(value, (tuple, list)) else (value,)
        out = tuple(self.dim(v, rank, what) for v in items)
        if len(set(out)) != len(out):
            raise self.bad(f"{what} repeats a dim: {value!r}")
        return out


class FactorBuilder:
    """Accumulates factors, their kinds and sizes."""

    def __init__(self) -> None:
        self.kinds: Dict[str, str] = {}
        self.sizes: Dict[str, int] = {}
        self.why: Dict[str, str] = {}
        self._n = 0

    def new(self, kind: str, size: Optional[int] = None, why: str = "", name: Optional[str] = None) -> str:
        if name is None:
            name = f"f{self._n}"
            self._n += 1
        self.kinds[name] = kind
        if size is not None:
            self.sizes[name] = size
        if why:
            self.why[name] = why
        return name

    def sign(
        self,
        operands: Sequence[Sequence[Sequence[str]]],
        result: Sequence[Sequence[str]],
        result_sizes: Optional[Sequence[Optional[int]]] = None,
    ) -> Signature:
        res = tuple(tuple(d) for d in result)
        if result_sizes is None:
            result_sizes = [self.size_of(d) for d in res]
        return Signature(
            tuple(tuple(tuple(d) for d in o) for o in operands),
            res,
            dict(self.kinds),
            dict(self.sizes),
            tuple(result_sizes),
            dict(self.why),
        )

    def size_of(self, factors: Sequence[str]) -> Optional[int]:
        n = 1
        for f in factors:
            s = self.sizes.get(f)
            if s is None:
                return None
            n *= s
        return n

    def learn(self, factors: Sequence[str], size: Optional[int]) -> None:
        """Record the size of a single-factor dim."""
        if size is not None and len(factors) == 1 and factors[0] not in self.sizes:
            self.sizes[factors[0]] = size


def same_dims(c: BuildContext, b: FactorBuilder, t: GlobalType, kind_of: Mapping[int, Tuple[str, str]] = {}) -> List[Tuple[str, ...]]:
    """One factor per dim of t (pass-through unless kind_of[d] = (kind, why))."""
    dims: List[Tuple[str, ...]] = []
    for d in range(t.ndim):
        kind, why = kind_of.get(d, (PASS, ""))
        f = b.new(kind, t.sizes[d], why, name=f"d{d}")
        dims.append((f,))
    return dims


# -- builders --------------------------------------------------------------------------
