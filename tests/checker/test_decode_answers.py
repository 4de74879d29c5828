"""A decoded annotation is reused while the names it looked up resolve the
same (decoding.decode_annotation): its answers are decode's, whatever the
names come to mean between two looks, and an answer that raised is never kept."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from spmd_mypy.plugin import annotations
from spmd_mypy.plugin.annotations import AnnotationError, Meta
from spmd_mypy.plugin.decoding import decode, decode_annotation

TEXTS = [
    "Annotated[Tensor, Spmd(tp=V)]",
    "Annotated[Tensor, Spmd(dp=R, tp=S(0), ep=R)]",
    "Annotated[Tensor, spmd.Spmd(tp=spmd.S(-1))]",
    "Annotated[Tensor, Spmd(tp=V), 'doc']",
    "Annotated[Tensor, Spmd(spec=PartitionSpec('tp', None))]",
    "Annotated[Tensor, Spmd()]",
    "Annotated[Tensor, Spmd(tp=X)]",
    "Annotated[list[Tensor], Spmd(tp=V)]",
    "Annotated[Float[Tensor, 'b 8'], Spmd(spec=PartitionSpec(None, 'tp'))]",
    "Annotated[Tensor, Field(x=1)]",
]
LOCALTYPE = "spmd_mypy.vocab.localtype"
# what each name may stand for: a table picks one meaning per name
MEANINGS: Dict[str, List[Optional[str]]] = {
    "Spmd": ["spmd_mypy.Spmd", None, "other.Spmd"],
    "spmd.Spmd": ["spmd_mypy.vocab.spec.Spmd", None],
    "V": [f"{LOCALTYPE}.V", f"{LOCALTYPE}.R", None],
    "R": [f"{LOCALTYPE}.R", f"{LOCALTYPE}.P"],
    "S": [f"{LOCALTYPE}.S", f"{LOCALTYPE}.V"],
    "spmd.S": ["spmd_mypy.S", None],
    "X": [None, f"{LOCALTYPE}.I"],
    "PartitionSpec": ["spmd_mypy.PartitionSpec", None],
    "Field": ["pydantic.Field", None],
}
RAISES = "raises"  # a lookup that fails inside mypy


def _metas() -> List[Meta]:
    out = []
    for text in TEXTS:
        found = annotations._snippet(text.encode())
        assert found, text
        out.extend(meta for _, _, meta in found)
    return out


METAS = _metas()


def _lookup(table: Dict[str, object]):  # type: ignore[no-untyped-def]
    def lookup(name: str) -> Optional[str]:
        full = table.get(name)
        if full == RAISES:
            raise RuntimeError(f"lookup of {name}")
        return full  # type: ignore[return-value]

    return lookup


def _answer(fn, meta: Meta, table: Dict[str, object]) -> Tuple[str, object]:  # type: ignore[no-untyped-def]
    try:
        return ("ok", fn(meta, _lookup(table)))
    except (AnnotationError, RuntimeError) as e:
        return (type(e).__name__, str(e))


TABLES = st.fixed_dictionaries(
    {name: st.sampled_from([*meanings, RAISES]) for name, meanings in MEANINGS.items()}
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(METAS) - 1), TABLES), min_size=1, max_size=12))
def test_the_answers_are_decodes(looks: List[Tuple[int, Dict[str, object]]]) -> None:
    for i, table in looks:
        meta = METAS[i]
        assert _answer(decode_annotation, meta, table) == _answer(decode, meta, table)


def test_a_name_that_changes_meaning_changes_the_answer() -> None:
    meta = METAS[0]
    as_v = {"Spmd": "spmd_mypy.Spmd", "V": f"{LOCALTYPE}.V"}
    assert str(decode_annotation(meta, _lookup(as_v))) == str(decode(meta, _lookup(as_v)))
    as_r = {**as_v, "V": f"{LOCALTYPE}.R"}
    assert decode_annotation(meta, _lookup(as_r)) == decode(meta, _lookup(as_r))
    assert decode_annotation(meta, _lookup(as_r)) != decode(meta, _lookup(as_v))
