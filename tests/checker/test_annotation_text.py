"""Annotation texts read without parsing them (annotation_text.recognize)
give the index entry their parse gives, and decode to what the parsed call
decodes to (decoding.decode_annotation from the Plan, else decode)."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from spmd_mypy.plugin.annotation_text import LazyExprs, recognize
from spmd_mypy.plugin.annotations import AnnotationError, Meta, parsed_snippet
from spmd_mypy.plugin.decoding import decode, decode_annotation

# Each slot: the forms recognize accepts, then forms it must turn down (a
# text with one slot taken from the second list, or none: most are accepted).
SLOTS = {
    "head": (["Annotated", "typing.Annotated", "t.Annotated"], ["Annotatedx", "Optional", "Annotated .x", "if.Annotated"]),
    "first": (["Tensor", "torch.Tensor", "T", "_"], ["None", "list[Tensor]", "'Tensor'", "if", "torch .Tensor"]),
    "callee": (["Spmd", "spmd.Spmd", "Axis", "x.Spmd"], ["True", "Spmd ", "x.if", "(Spmd)"]),
    "name": (["tp", "dp", "ep", "pp", "_", "match"], ["if", "__debug__", "True", "None"]),
    "special": ([], ["spec", "nograd", "shape"]),  # read by decoding in its own way: no Plan
    "value": (
        ["R", "V", "I", "P", "S(0)", "S(-1)", "S(-0)", "spmd.S(2)", "spmd.V", "PS(0)", "S(123456789012345678901)"],
        ["S(01)", "S(1_0)", "S(- 1)", "True", "None", "S()", "S(0, 1)", "x.if", "(R)", "'R'", "S (0)", "S( 0 )"],
    ),
    "sep": ([", ", ",", " , ", ",  "], [",\n", ", \\\n"]),
    "end": (["", " "], [",", ", 'doc'", "\n"]),
}


@st.composite
def texts(draw: st.DrawFn) -> bytes:
    odd = draw(st.sampled_from([None, None, None, None, *SLOTS]))

    def pick(slot: str) -> str:
        good, bad = SLOTS[slot]
        return draw(st.sampled_from(bad if slot == odd else good))

    names = draw(st.permutations(SLOTS["name"][0]))[: draw(st.integers(0, 4))]
    if odd == "name" and names:  # a reserved name, or a repeated one
        names[-1] = draw(st.sampled_from([*SLOTS["name"][1], names[0]]))
    if odd == "special" and names:
        names[-1] = pick("special")
    keywords = [f"{name}{draw(st.sampled_from(['=', ' = ', '= ']))}{pick('value')}" for name in names]
    sep = pick("sep")
    pad = draw(st.sampled_from(["", " "]))
    metadata = f"{pick('callee')}({pad}{sep.join(keywords)}{pick('end')})"
    return f"{pick('head')}[{pad}{pick('first')}{sep}{metadata}{pad}]".encode()


def _plain(meta: Meta) -> Tuple[object, ...]:
    return (tuple(ast.dump(e, include_attributes=True) for e in meta.exprs), meta.line, meta.ambiguous,
            meta.misplaced, meta.dims)


LOCALTYPE = "spmd_mypy.vocab.localtype"
MEANINGS: Dict[str, List[Optional[str]]] = {
    "Spmd": ["spmd_mypy.Spmd", None, "spmd_mypy.vocab.localtype.R"],
    "spmd.Spmd": ["spmd_mypy.vocab.spec.Spmd", None],
    "x.Spmd": ["spmd_mypy.Spmd", None],
    "R": [f"{LOCALTYPE}.R", f"{LOCALTYPE}.S", None],
    "V": [f"{LOCALTYPE}.V", "spmd_mypy.Spmd"],
    "I": [f"{LOCALTYPE}.I", None],
    "P": ["spmd_mypy.P", "spmd_mypy.PS"],
    "S": [f"{LOCALTYPE}.S", f"{LOCALTYPE}.V", "spmd_mypy.PS", None],
    "spmd.S": ["spmd_mypy.S", None],
    "spmd.V": ["spmd_mypy.V", None],
    "PS": ["spmd_mypy.PS", None],
}


def _answer(fn, meta: Meta, table: Dict[str, object]) -> Tuple[str, object]:  # type: ignore[no-untyped-def]
    def lookup(name: str) -> Optional[str]:
        full = table.get(name)
        if full == "raises":
            raise RuntimeError(name)
        return full  # type: ignore[return-value]

    try:
        return ("ok", fn(meta, lookup))
    except (AnnotationError, RuntimeError) as e:
        return (type(e).__name__, str(e))


TABLES = st.fixed_dictionaries({name: st.sampled_from([*m, "raises"]) for name, m in MEANINGS.items()})


@settings(max_examples=2000, deadline=None)
@given(texts(), TABLES)
def test_a_recognised_text_reads_as_its_parse(text: bytes, table: Dict[str, object]) -> None:
    found = recognize(text)
    parsed = parsed_snippet(text)
    if found is None:
        return
    column, plan = found
    assert parsed is not None and len(parsed) == 1, text
    line, col, meta = parsed[0]
    fast = Meta(LazyExprs(text, plan), 1)
    assert (line, col) == (1, column)
    assert _plain(fast) == _plain(meta)
    fresh = Meta(LazyExprs(text, plan), 1)  # not parsed yet: decoded from the plan where it can be
    assert _answer(decode_annotation, fresh, table) == _answer(decode, meta, table)


def test_the_common_forms_are_recognised() -> None:
    for text in (
        "Annotated[Tensor, Spmd(dp=R, tp=S(0), ep=R)]",
        "Annotated[torch.Tensor, spmd.Spmd(tp=spmd.S(-1))]",
        "typing.Annotated[ Tensor ,Spmd( tp = V ) ]",
    ):
        found = recognize(text.encode())
        assert found is not None and found[1] is not None, text
    for text in (
        "Annotated[Tensor, Spmd(tp=V),]",  # valid, but not the simple form
        "Annotated[Tensor, Spmd(tp=V, tp=R)]",  # does not parse
        "Annotated[Tensor, Spmd(if=V)]",
        "Annotated[Tensor,\n Spmd(tp=V)]",
        "Annotated[Tensor, Spmd(tp=S(01))]",
    ):
        assert recognize(text.encode()) is None, text
    found = recognize(b"Annotated[Tensor, Spmd(spec=P, tp=R)]")
    assert found is not None and found[1] is None  # its index entry, decoded from the parse


def test_the_parse_is_deferred_until_read() -> None:
    exprs = LazyExprs(b"Annotated[Tensor, Spmd(tp=V)]", None)
    assert exprs._items is None
    assert ast.unparse(exprs[0]) == "Spmd(tp=V)" and len(exprs) == 1
    assert exprs.items() is exprs.items()  # parsed once: the same nodes
