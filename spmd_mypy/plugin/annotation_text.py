"""The common annotation text, read without parsing it.

Most annotations a codebase writes are `Annotated[Tensor, Spmd(dp=R, tp=S(0))]`:
one line, a dotted name, one call of keyword arguments whose values are
dotted names or a dotted name called with one int literal.  Parsing such a
text with stdlib `ast` costs tens of microseconds (mostly building its
nodes), once per distinct text, and a dense codebase writes hundreds of
distinct ones.  `recognize` reads that form with a regular expression, and
only that form: a text it accepts is valid Python whose parse is exactly
the Subscript the annotation index expects (annotations._collect_expr), so
it gives the same index entry; the metadata's nodes are parsed only when
something reads them (LazyExprs), and `Plan` says what decoding.py needs to
decode the call without them.  Anything else (strings, nesting, spec=,
several calls, a keyword used as a name, a repeated keyword argument,
spaces inside a dotted name or a call's parentheses, several lines) is not
recognised and is parsed.  Pure Python.
"""

from __future__ import annotations

import ast
import keyword
import re
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union, overload

__all__ = ["Plan", "LazyExprs", "recognize"]


class Plan(NamedTuple):
    """The call of a recognised text: `callee(k=v, ...)`, each value a dotted
    name (dim None) or a dotted name called with one int (dim)."""

    callee: str
    keywords: Tuple[Tuple[str, str, Optional[int]], ...]


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_NAME}(?:\.{_NAME})*"
_VALUE = rf"{_DOTTED}(?:\(-?(?:0|[1-9][0-9]*)\))?"
_KEYWORDS = rf"{_NAME} *= *{_VALUE}(?: *, *{_NAME} *= *{_VALUE})*"
_TEXT = re.compile(
    rf"(?P<head>{_DOTTED})\[ *(?P<first>{_DOTTED}) *, *(?P<callee>{_DOTTED})\( *(?P<keywords>{_KEYWORDS}) *\) *\]"
)
# names that are not a Name in an expression, or not a keyword argument
_RESERVED = frozenset(keyword.kwlist) | {"__debug__"}
# keyword arguments of Spmd(...) that decoding.py reads in its own way
_SPECIAL = frozenset({"spec", "shape", "nograd"})


def recognize(raw: bytes) -> Optional[Tuple[int, Optional[Plan]]]:
    """For `Annotated[T, f(k=v, ...)]` of the simple form: the column of T in
    the text, and the Plan of the call (None when a keyword is one decoding
    reads in its own way).  None: not of that form (parse it)."""
    if not raw.isascii():
        return None
    text = raw.decode("ascii")
    m = _TEXT.fullmatch(text)
    if m is None:
        return None
    head, callee = m.group("head"), m.group("callee")
    if head.rpartition(".")[2] != "Annotated":
        return None
    # the keyword arguments, split as the expression matched them (no comma
    # or `=` inside a name or an int)
    keywords: List[Tuple[str, str, Optional[int]]] = []
    names: List[str] = [*head.split("."), *m.group("first").split("."), *callee.split(".")]
    for part in m.group("keywords").split(","):
        name, _, value = part.partition("=")
        value, _, dim = value.strip().partition("(")
        keywords.append((name.strip(), value, int(dim[:-1]) if dim else None))
        names.append(name.strip())
        names.extend(value.split("."))
    if not _RESERVED.isdisjoint(names):
        return None
    given = {name for name, _, _ in keywords}
    if len(given) != len(keywords):
        return None  # a repeated keyword argument does not parse
    if given & _SPECIAL:
        return m.start("first"), None
    return m.start("first"), Plan(callee, tuple(keywords))


class LazyExprs(Sequence[ast.expr]):
    """The metadata expressions of a recognised text (the call), parsed on
    first read, exactly as the index parses a text it does not recognise."""

    __slots__ = ("text", "plan", "_items")

    def __init__(self, text: bytes, plan: Optional[Plan]) -> None:
        self.text = text
        self.plan = plan
        self._items: Optional[Tuple[ast.expr, ...]] = None

    def items(self) -> Tuple[ast.expr, ...]:
        if self._items is None:
            root = ast.parse("(" + self.text.decode("ascii") + ")", mode="eval").body
            assert isinstance(root, ast.Subscript) and isinstance(root.slice, ast.Tuple)
            self._items = tuple(root.slice.elts[1:])
        return self._items

    @overload
    def __getitem__(self, i: int) -> ast.expr: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[ast.expr]: ...

    def __getitem__(self, i: Union[int, slice]) -> Union[ast.expr, Sequence[ast.expr]]:
        return self.items()[i]

    def __len__(self) -> int:
        return len(self.items())

    def __iter__(self) -> Iterator[ast.expr]:
        return iter(self.items())
