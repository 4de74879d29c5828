"""JAX's names for the local types, and the words messages use for them.

JAX's sharding-in-types work names four states of a value on a mesh axis.
They are our four local types under other names (seed 001):

  Reduced    R   the same value on every rank; its gradient is Unreduced
  Unreduced  P   a pending sum of the ranks' values; its gradient is Reduced
  Invariant  I   the same value on every rank; its gradient is Invariant
  Varying    V   a different value per rank; its gradient is Varying

`ALIASES` is the one table: the package exports each name as the very same
object as its letter (so `src=Unreduced` and `src=P` are one argument), the
plugin's annotation reader accepts the names wherever it accepts the letters,
and `VOCABULARIES` spells messages in the words the user chose
(`vocabulary = jax` in `[spmd_mypy]`).

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

import re
from typing import Dict, Final, Mapping

from .localtype import I, LocalType, P, R, V

__all__ = [
    "ALIASES",
    "VOCABULARIES",
    "DEFAULT_VOCABULARY",
    "Reduced",
    "Unreduced",
    "Invariant",
    "Varying",
    "reword",
    "vocabulary_names",
]

# JAX's name -> our local type.  The one table every reader of the names uses.
ALIASES: Final[Mapping[str, LocalType]] = {"Reduced": R, "Unreduced": P, "Invariant": I, "Varying": V}

Reduced: Final = R
Unreduced: Final = P
Invariant: Final = I
Varying: Final = V

DEFAULT_VOCABULARY: Final = "letters"

# Vocabulary -> (letter -> the word written for it, prose word -> its replacement).
# "letters" is the identity: messages are written in it.
VOCABULARIES: Final[Dict[str, Dict[str, Dict[str, str]]]] = {
    DEFAULT_VOCABULARY: {"letters": {}, "prose": {}},
    "jax": {
        "letters": {t.letter: name for name, t in ALIASES.items()},
        "prose": {"a Partial": "an Unreduced", "Partial": "Unreduced", "Replicate": "Reduced"},
    },
}


def vocabulary_names() -> tuple[str, ...]:
    return tuple(VOCABULARIES)


# A type letter standing alone: not part of a word, an attribute chain's
# middle, a quoted name (an axis 'R') or a call (a function named P(...)).
_LETTER = r"(?<![\w'\"])([RIVP])(?![\w'\"(\[])"  # compiled on first use (re's own cache)


def reword(message: str, vocabulary: str) -> str:
    """`message` (written with letters) in the words of `vocabulary`.

    Idempotent: the words replacing letters contain no standalone letter, so a
    message reworded twice reads the same."""
    table = VOCABULARIES.get(vocabulary)
    if not table or not table["letters"]:
        return message
    letters, prose = table["letters"], table["prose"]
    out = re.sub(_LETTER, lambda m: letters.get(m.group(1), m.group(1)), message)
    for old, new in prose.items():
        out = re.sub(rf"\b{re.escape(old)}\b", new, out)
    return out
