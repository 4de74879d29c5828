"""Layouts that follow a configuration: type variables with values.

    Stream = TypeVar("Stream", Annotated[Tensor, Spmd(tp=I)], Annotated[Tensor, Spmd(tp=S(0))])
    def forward(self, h: Stream) -> Stream: ...

A Union says that a value has one of several layouts, independently of every
other value; a type variable with values says that the layout is one of them
for the whole call: mypy checks the function's body once per value (its
expansions), so every value computed from `h`, and every module result typed
by the same variable, has the layout of that one choice, and no combination
of alternatives that cannot occur together is ever checked.

mypy solves such a variable at a function call itself (the argument must be
one of the values); a module call (`self.mlp(h)`, routed to forward by
relation.py) is solved here, per axis: each argument bound to a variable
must fit one of its values (S(i) stands for V, as everywhere in local code),
arguments bound to the same variable must agree, and an argument that is a
Union (a value from branches) is tried alternative by alternative, giving
the Union of the results (relation.py reports).

Inside such a function, a module whose output layout depends on the same
flag (a row-parallel linear returning `Union[I, S(0)]`) is tied to the
choice with `spmd.assert_like(out, h)`: out narrowed to the alternatives
that fit h's type; and `spmd.assert_spmd(h, Spmd(...))` on a parameter typed
by the variable, asserting another of its values, makes the rest of the
branch unreachable for that choice (comms.py): `if mode is X:` / `if flag:`
branches are written with it.  `@spmd.configurations` (configurations.py)
adds a variable of configurations to a function the same way, and prunes the
choices of these variables a configuration's tied layouts exclude.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..vocab.spec import Spmd, hidden_obligations, mismatches
from . import _mypy
from .callsite import one_arg
from .carrier import carrier, spmd_of
from .errors import SPMD_ARG
from .guard import default_return, guarded

# Beyond this many combinations of Union alternatives, a call is not solved.
MAX_COMBINATIONS = 256


def problems(got: Spmd, want: Spmd) -> int:
    """How many errors relation.report_arg gives for got at want (0: it fits)."""
    nograd = 1 if want.nograd and not got.nograd else 0
    return nograd + len(hidden_obligations(got, want)) + len(mismatches(got, want))


def _fits(got: Optional[Spmd], want: Optional[Spmd]) -> bool:
    return got is None or want is None or problems(got, want) == 0


class Bound(NamedTuple):
    """A parameter whose type is a variable with values."""

    param: int
    var: Any  # the variable's id
    values: Tuple[_mypy.Type, ...]
    spmds: Tuple[Optional[Spmd], ...]


def bound_parameters(sig: _mypy.CallableType) -> Dict[int, Bound]:
    out: Dict[int, Bound] = {}
    for i, formal in enumerate(sig.arg_types):
        found = _mypy.value_variable(formal)
        if found is not None:
            var, values = found
            out[i] = Bound(i, var, tuple(values), tuple(spmd_of(v) for v in values))
    return out


class Argument(NamedTuple):
    bound: Bound
    expr: Any
    alternatives: Tuple[Optional[Spmd], ...]  # one, or one per Union alternative


class Misfit(NamedTuple):
    """An argument (in one combination of Union alternatives) that fits no
    value its variable may still take: report got against wants."""

    arg: Argument
    got: Spmd
    wants: Tuple[Spmd, ...]


class Solution(NamedTuple):
    choices: List[Dict[Any, _mypy.Type]]  # every consistent choice of values
    misfit: Optional[Misfit]  # the first argument that fits none
    too_many: bool


def solve(args: Sequence[Argument], free: Dict[Any, Tuple[_mypy.Type, ...]]) -> Solution:
    """The choices of values consistent with the arguments.  `free`: variables
    of the signature no argument binds (each of their values is possible)."""
    combos = 1
    for a in args:
        combos *= len(a.alternatives)
    if combos > MAX_COMBINATIONS:
        return Solution([], None, True)
    variables = {a.bound.var: a.bound for a in args}
    seen: Dict[Tuple[Tuple[Any, int], ...], Dict[Any, _mypy.Type]] = {}
    misfit: Optional[Misfit] = None
    for combo in itertools.product(*(a.alternatives for a in args)):
        allowed = {var: list(range(len(b.values))) for var, b in variables.items()}
        for a, got in zip(args, combo):
            left = [k for k in allowed[a.bound.var] if _fits(got, a.bound.spmds[k])]
            if not left and got is not None and misfit is None:
                wants = tuple(s for k in allowed[a.bound.var] for s in [a.bound.spmds[k]] if s is not None)
                misfit = Misfit(a, got, wants)
            allowed[a.bound.var] = left
        if any(not left for left in allowed.values()):
            continue
        names = sorted(allowed, key=str)
        for picks in itertools.product(*(allowed[v] for v in names)):
            key = tuple(zip(names, picks))
            seen.setdefault(key, {v: variables[v].values[k] for v, k in key})
    if not seen and misfit is None:
        return Solution([], None, False)
    choices = list(seen.values())
    for var, values in free.items():  # unbound variables: every value
        choices = [{**c, var: v} for c in choices for v in values]
    return Solution(choices, misfit, False)


# -- spmd.assert_like(x, like): a flag-dependent Union narrowed by a witness ------------


def _assert_like(ctx: Any) -> _mypy.Type:
    x, like = one_arg(ctx, "x"), one_arg(ctx, "like")
    if x is None or like is None:
        return ctx.default_return_type
    mine = _tensors(x[1])
    wants = [spmd_of(t) for t in _tensors(like[1])]
    if not mine or not wants or any(w is None for w in wants):
        return x[1] if mine else ctx.default_return_type  # an unknown witness narrows nothing
    keep = [t for t in mine if any(_fits(spmd_of(t), w) for w in wants)]
    if keep:
        return _mypy.union_of(keep)
    found = " or ".join(str(spmd_of(t)) for t in mine)
    _mypy.fail(
        ctx.api,
        f"spmd.assert_like: {_mypy.expr_text(x[0])} ({found}) cannot have the layout of "
        f"{_mypy.expr_text(like[0])} ({' or '.join(str(w) for w in wants)}) in any configuration; "
        f"the result takes {_mypy.expr_text(like[0])}'s",
        ctx.context,
        SPMD_ARG,
    )
    return _mypy.union_of([carrier(ctx.api, w) for w in wants if w is not None])


def _tensors(typ: _mypy.Type) -> List[_mypy.Type]:
    """A tensor type's alternatives (a Union of tensors) or itself; [] if no tensor."""
    return _mypy.union_alternatives(typ) or ([typ] if _mypy.is_tensor(typ) else [])


HOOKS: Dict[str, Callable[[Any], _mypy.Type]] = {
    "spmd_mypy.runtime.api.assert_like": guarded(_assert_like, default_return),
}
