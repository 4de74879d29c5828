"""Seed sources for the fuzzer: annotated modules in many syntactic shapes.

Each seed is a complete module that mypy with the plugin accepts without
spmd errors.  Between them they put `Annotated[Tensor, Spmd(...)]` in every
place Python allows an annotation (parameters of every kind, returns, local
and module variables, class attributes, aliases, strings, containers,
properties, overloads, decorated and nested functions, async functions,
dataclass and NamedTuple fields) around statements of every kind (walrus,
match, comprehensions, with, try, lambda, star-args).  Every Spmd(...)
annotation sits on one line, so a mutation of it has one line to be reported
at.
"""

from __future__ import annotations

from typing import Dict

HEAD = '''\
from typing import Annotated, Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple, overload
import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import spmd_mypy as spmd
from spmd_mypy import I, P, PartitionSpec, R, S, Spmd, V
'''

SEEDS: Dict[str, str] = {}

SEEDS["functions"] = HEAD + '''

Act = Annotated[Tensor, Spmd(tp=V)]
Batch = Annotated[Tensor, Spmd(spec=PartitionSpec("dp", None))]
GLOBAL_SCALE: Annotated[Tensor, Spmd(dp=R, tp=R)] = torch.ones(1)


def column(x: Annotated[Tensor, Spmd(tp=R)], w: Annotated[Tensor, Spmd(tp=S(0))]) -> Act:
    return x @ w.T


def row(h: Act, w: Annotated[Tensor, Spmd(tp=S(1))]) -> Annotated[Tensor, Spmd(tp=R)]:
    out: Annotated[Tensor, Spmd(tp=V)] = h @ w.T
    partial = spmd.reinterpret(out, "tp", src=V, dst=P)
    return spmd.all_reduce(partial, "tp", src=P, dst=R)


def mlp(
    x: Annotated[Tensor, Spmd(tp=I)],
    w1: Annotated[Tensor, Spmd(tp=S(0))],
    w2: Annotated[Tensor, Spmd(tp=S(1))],
) -> Annotated[Tensor, Spmd(tp=R)]:
    h = spmd.convert(x, "tp", src=I, dst=R)
    return row(F.gelu(column(h, w1)), w2)


def loss_of(batch: Batch, target: Annotated[Tensor, Spmd(dp=S(0))]) -> Annotated[Tensor, Spmd(dp=P)]:
    diff = batch - target
    return spmd.reinterpret((diff * diff).sum(), "dp", src=V, dst=P)


def keyword_only(*, x: Annotated[Tensor, Spmd(dp=R)], scale: float = 1.0) -> Annotated[Tensor, Spmd(dp=R)]:
    return x * scale


def positional_only(x: Annotated[Tensor, Spmd(dp=R)], /, y: Annotated[Tensor, Spmd(dp=R)]) -> Annotated[Tensor, Spmd(dp=R)]:
    return x + y


def star_args(*xs: Annotated[Tensor, Spmd(tp=V)], **named: Annotated[Tensor, Spmd(tp=V)]) -> Annotated[Tensor, Spmd(tp=V)]:
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    for v in named.values():
        total = total + v
    return total


def defaults(x: Annotated[Tensor, Spmd(dp=R)], y: Optional[Annotated[Tensor, Spmd(dp=R)]] = None) -> Annotated[Tensor, Spmd(dp=R)]:
    if y is None:
        return x
    return x + y
'''

SEEDS["modules"] = HEAD + '''


class ColumnParallelLinear(nn.Module):
    weight: Annotated[Tensor, Spmd(tp=S(0))]
    bias: Optional[Annotated[Tensor, Spmd(tp=S(0))]]

    def __init__(self, d_in: int, d_out: int, bias: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))
        self.bias = nn.Parameter(torch.zeros(d_out)) if bias else None

    def forward(self, x: Annotated[Tensor, Spmd(tp=R)]) -> Annotated[Tensor, Spmd(tp=V)]:
        return F.linear(x, self.weight)

    @property
    def shard(self) -> Annotated[Tensor, Spmd(tp=S(0))]:
        return self.weight

    @staticmethod
    def scale(x: Annotated[Tensor, Spmd(tp=V)], by: float) -> Annotated[Tensor, Spmd(tp=V)]:
        return x * by

    @classmethod
    def make(cls, d: int) -> "ColumnParallelLinear":
        return cls(d, d)


class RowParallelLinear(nn.Module):
    weight: Annotated[Tensor, Spmd(tp=S(1))]

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))

    def forward(self, h: Annotated[Tensor, Spmd(tp=V)]) -> Annotated[Tensor, Spmd(tp=I)]:
        out = spmd.reinterpret(F.linear(h, self.weight), "tp", src=V, dst=P)
        return spmd.all_reduce(out, "tp", src=P, dst=I)


class Block(nn.Module):
    norm_weight: "Annotated[Tensor, Spmd(tp=I)]"

    def __init__(self, d: int) -> None:
        super().__init__()
        self.up = ColumnParallelLinear(d, 4 * d)
        self.down = RowParallelLinear(4 * d, d)
        self.norm_weight = nn.Parameter(torch.ones(d))

    def forward(self, x: Annotated[Tensor, Spmd(tp=I)]) -> Annotated[Tensor, Spmd(tp=I)]:
        h = spmd.convert(x * self.norm_weight, "tp", src=I, dst=R)
        h = F.relu(self.up(h))
        return self.down(h)


class Stack(nn.Module):
    def __init__(self, d: int, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleDict()
        for i in range(n):
            self.layers[str(i)] = Block(d)
        self.extra = nn.ModuleList()
        self.extra.append(Block(d))

    def forward(self, x: Annotated[Tensor, Spmd(tp=I)]) -> Annotated[Tensor, Spmd(tp=I)]:
        for layer in self.layers.values():
            x = layer(x)
        for block in self.extra:
            x = block(x)
        return x


class FlashAttention(nn.Module):
    @spmd.trusted(in_types=(Spmd(tp=V),), out_types=Spmd(tp=V))
    def forward(self, q: Tensor) -> Tensor:
        return q


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Annotated[Tensor, Spmd(tp=R)]) -> Annotated[Tensor, Spmd(tp=R)]:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * g


@spmd.trusted(in_types=(Spmd(tp=I), None), out_types=Spmd(tp=R))
class CopyToRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, scale: float) -> Tensor:
        return x * scale

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tuple[Tensor, None]:
        return g, None


def copy_to_region(x: Annotated[Tensor, Spmd(tp=I)]) -> Annotated[Tensor, Spmd(tp=R)]:
    return CopyToRegion.apply(x, 2.0)
'''

SEEDS["callables"] = HEAD + '''


@overload
def pick(x: Annotated[Tensor, Spmd(tp=R)], k: int) -> Annotated[Tensor, Spmd(tp=R)]: ...
@overload
def pick(x: Annotated[Tensor, Spmd(tp=R)], k: str) -> Annotated[Tensor, Spmd(tp=R)]: ...
def pick(x: Annotated[Tensor, Spmd(tp=R)], k: Any) -> Annotated[Tensor, Spmd(tp=R)]:
    return x


def traced(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return inner


@traced
def decorated(x: Annotated[Tensor, Spmd(dp=S(0))]) -> Annotated[Tensor, Spmd(dp=S(0))]:
    return x * 2


@spmd.trusted(in_types=(Spmd(tp=I), None), out_types=Spmd(tp=P))
def fused_kernel(x: Tensor, scale: float) -> Tensor:
    return x * scale


@functools.lru_cache(maxsize=None)
def cached(n: int) -> int:
    return n


@torch.no_grad()
def no_grad_update(w: Annotated[Tensor, Spmd(dp=R)], g: Annotated[Tensor, Spmd(dp=R)]) -> None:
    w.sub_(g * 0.1)


Transform = Callable[[Annotated[Tensor, Spmd(tp=V)]], Annotated[Tensor, Spmd(tp=V)]]
double: Transform = lambda t: t * 2
halve: Callable[[Annotated[Tensor, Spmd(tp=V)]], Tensor] = lambda t: t / 2


def apply_all(fs: List[Transform], x: Annotated[Tensor, Spmd(tp=V)]) -> Annotated[Tensor, Spmd(tp=V)]:
    for f in fs:
        x = f(x)
    return x


def outer(x: Annotated[Tensor, Spmd(tp=R)]) -> Annotated[Tensor, Spmd(tp=R)]:
    def inner(y: Annotated[Tensor, Spmd(tp=R)]) -> Annotated[Tensor, Spmd(tp=R)]:
        return y + 1.0

    scale: Annotated[Tensor, Spmd(tp=R)] = x

    def closure() -> Annotated[Tensor, Spmd(tp=R)]:
        nonlocal scale
        scale = scale * 2
        return scale

    return inner(x) + closure()
'''

SEEDS["statements"] = HEAD + '''


def with_walrus(xs: List[Annotated[Tensor, Spmd(dp=V)]]) -> Annotated[Tensor, Spmd(dp=V)]:
    if (n := len(xs)) > 1:
        return xs[0] * n
    return xs[0]


def with_match(x: Annotated[Tensor, Spmd(tp=P)], mode: str) -> Annotated[Tensor, Spmd(tp=R)]:
    match mode:
        case "sum":
            return spmd.all_reduce(x, "tp", src=P, dst=R)
        case "mean" | "avg":
            y: Annotated[Tensor, Spmd(tp=R)] = spmd.all_reduce(x, "tp", src=P, dst=R)
            return y / 2
        case _:
            raise ValueError(mode)


def with_comprehensions(xs: List[Annotated[Tensor, Spmd(tp=P)]]) -> List[Annotated[Tensor, Spmd(tp=R)]]:
    out = [spmd.all_reduce(x, "tp", src=P, dst=R) for x in xs]
    table = {i: x for i, x in enumerate(out)}
    return [table[i] for i in sorted(table)]


def with_blocks(x: Annotated[Tensor, Spmd(dp=S(0))]) -> Annotated[Tensor, Spmd(dp=R)]:
    try:
        with torch.no_grad():
            y = x.clone()
    except RuntimeError:
        y = x
    finally:
        pass
    while y.dim() > 2:
        y = y.sum(0)
    else:
        y = y + 0.0
    return spmd.all_gather(y, "dp", src=S(0), dst=R)


def generator(xs: List[Annotated[Tensor, Spmd(tp=R)]]) -> Iterator[Annotated[Tensor, Spmd(tp=R)]]:
    for x in xs:
        yield x * 2
    yield from xs


async def fetch(x: Annotated[Tensor, Spmd(tp=R)]) -> Annotated[Tensor, Spmd(tp=R)]:
    return x


def asserted(x: Tensor) -> Annotated[Tensor, Spmd(tp=V)]:
    return spmd.assert_spmd(x, Spmd(tp=V))


def untyped(x, w):
    z: Annotated[Tensor, Spmd(tp=V)] = x @ w
    return z
'''

SEEDS["data"] = HEAD + '''


@dataclass
class Shards:
    q: Annotated[Tensor, Spmd(tp=S(1))]
    k: Annotated[Tensor, Spmd(tp=S(1))]
    scale: float = 1.0


class Pair(NamedTuple):
    left: Annotated[Tensor, Spmd(dp=V)]
    right: Annotated[Tensor, Spmd(dp=V)]


Table = Dict[str, Annotated[Tensor, Spmd(dp=R, tp=R)]]
Nested = Tuple[Annotated[Tensor, Spmd(tp=V)], List[Annotated[Tensor, Spmd(tp=V)]]]


def scores(s: Shards) -> Annotated[Tensor, Spmd(tp=V)]:
    return (s.q @ s.k.transpose(-2, -1)) * s.scale


def unpack(p: Pair) -> Annotated[Tensor, Spmd(dp=V)]:
    left, right = p
    return left + right


def lookup(t: Table, key: str) -> Optional[Annotated[Tensor, Spmd(dp=R, tp=R)]]:
    return t.get(key)


def flatten(n: Nested) -> List[Annotated[Tensor, Spmd(tp=V)]]:
    head, rest = n
    return [head, *rest]


def quoted(x: "Annotated[Tensor, Spmd(dp=S(0), tp=R)]") -> "Annotated[Tensor, Spmd(dp=S(0), tp=R)]":
    return x


def spec_form(x: Annotated[Tensor, Spmd(spec=PartitionSpec(("dp", "tp"), None))]) -> Annotated[Tensor, Spmd(dp=R, tp=R)]:
    return spmd.all_gather(x, ("dp", "tp"), src=S(0), dst=R)


def nograd(mask: Annotated[Tensor, Spmd(dp=R, nograd=True)], x: Annotated[Tensor, Spmd(dp=I)]) -> Annotated[Tensor, Spmd(dp=I)]:
    return x * mask


def qualified(x: Annotated[torch.Tensor, spmd.Spmd(tp=spmd.V)]) -> Annotated[torch.Tensor, spmd.Spmd(tp=spmd.V)]:
    return x
'''
