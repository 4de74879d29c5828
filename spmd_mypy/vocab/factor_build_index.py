"""Factor builders of the indexing families: slices and splits, subscripts,
index_select, gather, embedding.

Pure Python: imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import Callable, Final, List, Mapping, Optional, Tuple

from .factor_signature import BuildContext, FactorBuilder, Signature, same_dims
from .factor_table import NEED_REPLICATION, PASS, PERMUTATION, FactorError
from .globaltype import GlobalType

__all__ = ["FAMILIES"]


def _slice(c: BuildContext) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    how = c.row.arg
    pieces = how in ("split", "chunk", "tensor_split", "unbind")
    d = c.dim(c.param("dim", default=0) if pieces else c.param("dim", required=True), t.ndim)
    b = FactorBuilder()
    why = {
        "narrow": "narrow keeps a slice of it",
        "select": "select picks one index of it",
        "split": "split cuts it into pieces",
        "chunk": "chunk cuts it into pieces",
        "tensor_split": "tensor_split cuts it into pieces",
        "unbind": "unbind cuts it into pieces",
    }[str(how)]
    src = same_dims(c, b, t, {d: (PERMUTATION, why)})
    sizes = list(t.sizes)
    n = t.sizes[d]
    if how == "narrow":
        length = c.param("length")
        sizes[d] = length if isinstance(length, int) and not isinstance(length, bool) else None
    elif how == "split":
        s = c.param("split_size_or_sections", "split_size")
        sizes[d] = s if isinstance(s, int) and not isinstance(s, bool) and n is not None and n % s == 0 else None
    elif how in ("chunk", "tensor_split"):
        k = c.param("chunks", "sections", "indices_or_sections")
        sizes[d] = n // k if isinstance(k, int) and not isinstance(k, bool) and k > 0 and n is not None and n % k == 0 else None
    result = list(src)
    if how in ("select", "unbind"):
        del result[d]
        del sizes[d]
    return b.sign([src], result, sizes)


def _index_entries(c: BuildContext, t: GlobalType) -> List[Tuple[str, object]]:
    raw = c.param("index", required=True)
    items = list(raw) if isinstance(raw, tuple) else [raw]
    out: List[Tuple[str, object]] = []
    for it in items:
        if it is None:
            out.append(("new", None))
        elif it is Ellipsis or it == "...":
            out.append(("ellipsis", None))
        elif isinstance(it, slice):
            out.append(("full", None) if it == slice(None) else ("slice", it))
        elif it == ":":
            out.append(("full", None))
        elif it == "slice":
            out.append(("slice", None))
        elif (isinstance(it, int) and not isinstance(it, bool)) or it == "int":
            out.append(("int", it))
        else:
            raise FactorError(
                f"{c.op}: indexing {c.names[0]}: {t} with {it!r} (advanced indexing) has no global rule; "
                f"use index_select or gather",
                code="no-rule",
            )
    if sum(1 for k, _ in out if k == "ellipsis") > 1:
        raise c.bad("an index has at most one Ellipsis")
    used = sum(1 for k, _ in out if k in ("full", "slice", "int"))
    if used > t.ndim:
        raise c.bad(f"too many indices ({used}) for a tensor of rank {t.ndim}")
    expanded: List[Tuple[str, object]] = []
    for k, v in out:
        if k == "ellipsis":
            expanded.extend([("full", None)] * (t.ndim - used))
        else:
            expanded.append((k, v))
    if not any(k == "ellipsis" for k, _ in out):
        expanded.extend([("full", None)] * (t.ndim - used))
    return expanded


def _getitem(c: BuildContext) -> Signature:
    c.count(1, 1)
    t = c.tensor(0)
    entries = _index_entries(c, t)
    b = FactorBuilder()
    kinds = {}
    d = 0
    for k, _ in entries:
        if k == "new":
            continue
        if k in ("slice", "int"):
            kinds[d] = (PERMUTATION, "indexing keeps part of it" if k == "slice" else "indexing picks one index of it")
        d += 1
    src = same_dims(c, b, t, kinds)
    result: List[Tuple[str, ...]] = []
    sizes: List[Optional[int]] = []
    d = 0
    for k, v in entries:
        if k == "new":
            result.append(())
            sizes.append(1)
            continue
        if k == "full":
            result.append(src[d])
            sizes.append(t.sizes[d])
        elif k == "slice":
            result.append(src[d])
            n = t.sizes[d]
            sizes.append(len(range(*v.indices(n))) if isinstance(v, slice) and n is not None else None)
        d += 1
    return b.sign([src], result, sizes)


def _index_select(c: BuildContext) -> Signature:
    c.count(2, 2)
    t, idx = c.tensor(0), c.tensor(1)
    if idx.ndim != 1:
        raise c.bad(f"takes a rank-1 index, got rank {idx.ndim}")
    d = c.dim(c.param("dim", required=True), t.ndim)
    b = FactorBuilder()
    src = same_dims(c, b, t, {d: (NEED_REPLICATION, "the index selects along it")})
    k = b.new(PASS, idx.sizes[0], name="idx0")
    result = list(src)
    result[d] = (k,)
    sizes = list(t.sizes)
    sizes[d] = idx.sizes[0]
    return b.sign([src, [(k,)]], result, sizes)


def _gather(c: BuildContext) -> Signature:
    c.count(2, 2)
    t, idx = c.tensor(0), c.tensor(1)
    if idx.ndim != t.ndim:
        raise c.bad(f"takes an index of the input's rank {t.ndim}, got rank {idx.ndim}")
    d = c.dim(c.param("dim", required=True), t.ndim)
    b = FactorBuilder()
    src = same_dims(c, b, t, {d: (NEED_REPLICATION, "the index selects along it")})
    k = b.new(PASS, idx.sizes[d], name=f"idx{d}")
    ix = list(src)
    ix[d] = (k,)
    return b.sign([src, ix], ix, idx.sizes)


def _embedding(c: BuildContext) -> Signature:
    c.count(2, 2)
    idx, w = c.tensor(0), c.tensor(1)
    if w.ndim != 2:
        raise c.bad(f"takes a rank-2 weight, got rank {w.ndim}")
    b = FactorBuilder()
    ix = [(b.new(PASS, s, name=f"idx{e}"),) for e, s in enumerate(idx.sizes)]
    vocab = b.new(NEED_REPLICATION, w.sizes[0], "the indices select rows of it", name="vocab")
    emb = b.new(PASS, w.sizes[1], name="emb")
    return b.sign([ix, [(vocab,), (emb,)]], ix + [(emb,)], list(idx.sizes) + [w.sizes[1]])


FAMILIES: Final[Mapping[str, Callable[[BuildContext], Signature]]] = {
    "slice": _slice,
    "getitem": _getitem,
    "index_select": _index_select,
    "gather": _gather,
    "embedding": _embedding,
}
