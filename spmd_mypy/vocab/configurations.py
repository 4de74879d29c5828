"""Configurations: the settings of a module's flags, each checked on its own.

    @spmd.configurations(sequence_parallel=(True, False))
    class RowParallelLinear(nn.Module): ...

declares two configurations, `sequence_parallel=True` and
`sequence_parallel=False`; several flags give every combination of their
values (a class's flags, then its method's).  A flag may stand for the size
of a mesh axis (`world_size=spmd.axis_size("tp", 1, 4)`) or for whether it
is used at all (`tp_enabled=spmd.axis_enabled("tp")`, True or False): in a
configuration where the axis has one rank (size 1, or disabled), the axis is
trivial -- V, P, R and I are one
value there (a sum, a gather, a slice over one rank is the value itself, in
forward and in backward), so no error on that axis alone can occur at run
time and none is reported.

Pure data and text: the plugin reads declarations into these values, and
prefixes the errors found in a configuration with its label."""

from __future__ import annotations

import itertools
import re
from typing import FrozenSet, List, NamedTuple, Optional, Sequence, Set, Tuple

Value = object  # bool, int, str or None: what a flag reads as in one configuration


class Flag(NamedTuple):
    """A declared flag: its name (an attribute, a parameter or a function
    whose call reads it), its values, and the axis whose size it is, if any."""

    name: str
    values: Tuple[Value, ...]
    axis: Optional[str] = None


class Configuration(NamedTuple):
    """One setting of every declared flag."""

    settings: Tuple[Tuple[str, Value], ...]
    trivial_axes: FrozenSet[str]  # axes of one rank in this configuration

    @property
    def label(self) -> str:
        return ", ".join(f"{name}={value!r}" for name, value in self.settings)

    def value(self, name: str) -> Tuple[bool, Value]:
        """(whether `name` is a flag here, its value)."""
        for flag, value in self.settings:
            if flag == name:
                return True, value
        return False, None


class DeclarationError(Exception):
    """A declaration the checker cannot read (the message says how to write it)."""


MAX_CONFIGURATIONS = 64  # beyond this, the declaration is an error: split the flags


def merge(outer: Sequence[Flag], inner: Sequence[Flag]) -> List[Flag]:
    """A class's flags, then its method's (a method's flag replaces the class's)."""
    names = {f.name for f in inner}
    return [f for f in outer if f.name not in names] + list(inner)


def configurations(flags: Sequence[Flag]) -> List[Configuration]:
    """Every combination of the flags' values, in declaration order."""
    for flag in flags:
        if not flag.values:
            raise DeclarationError(f"flag {flag.name!r} declares no value")
        if len(set(map(repr, flag.values))) != len(flag.values):
            raise DeclarationError(f"flag {flag.name!r} declares a value twice")
    count = 1
    for flag in flags:
        count *= len(flag.values)
    if count > MAX_CONFIGURATIONS:
        raise DeclarationError(f"{count} configurations (at most {MAX_CONFIGURATIONS}): declare fewer flags per function")
    out = []
    for values in itertools.product(*(f.values for f in flags)):
        trivial = frozenset(f.axis for f, v in zip(flags, values) if f.axis is not None and one_rank(v))
        out.append(Configuration(tuple((f.name, v) for f, v in zip(flags, values)), trivial))
    return out


def one_rank(value: Value) -> bool:
    """An axis flag's value that leaves the axis one rank: size 1, or disabled."""
    return value is False or (type(value) is int and value == 1)



_PREFIX = "in configuration "
_HINT = ". Hint: "
_HINT_SHARED = " (behind a branch on the flag if other configurations run this line)"

_AXES = re.compile(r"axis '([^']+)'|over '([^']+)'|axes '([^']+)'")


def named_axes(message: str) -> FrozenSet[str]:
    """The mesh axes an spmd error names ("on axis 'tp'", "over 'tp'")."""
    found: Set[str] = set()
    for match in _AXES.finditer(message):
        for group in match.groups():
            if group:
                found.update(a.strip() for a in group.split(","))
    return frozenset(found)


def in_configuration(message: str, config: Configuration) -> Optional[str]:
    """The message of an error found while checking `config`: prefixed with
    its label, its hint said to hold in that configuration; None when every
    axis it names has one rank there (the error cannot happen).  Idempotent."""
    if message.startswith(_PREFIX):
        return message
    axes = named_axes(message)
    if axes and axes <= config.trivial_axes:
        return None
    head, found, hint = message.partition(_HINT)
    if found and hint.startswith(("spmd.", "in the branch")):
        # A fix found in one configuration may break another that runs the same line.
        message = f"{head}{_HINT}where {config.label}: {hint}{_HINT_SHARED}"
    return f"{_PREFIX}{config.label}: {message}"

