"""Decoding the `Spmd(...)` of an annotation (found by annotations.py's index)
into the vocabulary's Spmd: the names the decoder accepts, resolved as mypy
resolves them, and the small expression language inside the call.  A decoded
node is reused while its names resolve the same (_decode_call_memo), and so
is a whole annotation's answer (decode_annotation).
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..vocab.aliases import ALIASES
from ..vocab.localtype import BY_LETTER, PartitionedShard, Shard
from ..vocab.spec import PartitionSpec, SpecError, Spmd
from .annotation_text import LazyExprs
from .annotations import AnnotationError, Meta
from .sourcefile import dotted

__all__ = ["decode", "decode_annotation", "LOCAL_TYPES", "SHARD_FULLNAMES", "SPMD_FULLNAMES", "PARTITIONED_FULLNAMES"]


# Fully qualified names the decoder accepts (definitions, as mypy resolves them).
SPMD_FULLNAMES = frozenset({"spmd_mypy.vocab.spec.Spmd", "spmd_mypy.Spmd"})
_SPEC_FULLNAMES = frozenset({"spmd_mypy.vocab.spec.PartitionSpec", "spmd_mypy.PartitionSpec"})
SHARD_FULLNAMES = frozenset(
    {"spmd_mypy.vocab.localtype.Shard", "spmd_mypy.vocab.localtype.S", "spmd_mypy.S"}
)
# PS(dim) / PSA(dim) (seed 004) -> whether the layout is aligned unless aligned= says
PARTITIONED_FULLNAMES = {
    f"{mod}.{name}": name == "PSA"
    for mod in ("spmd_mypy.vocab.localtype", "spmd_mypy")
    for name in ("PS", "PSA", "PartitionedShard")
}
LOCAL_TYPES = {  # fullname of R, I, V or P (or Reduced, ...) -> the type
    f"{mod}.{letter}": t
    for mod in ("spmd_mypy.vocab.localtype", "spmd_mypy.vocab.aliases", "spmd_mypy")
    for letter, t in (*BY_LETTER.items(), *ALIASES.items())  # JAX's names too (vocab/aliases.py)
}



Lookup = Callable[[str], Optional[str]]  # dotted name in the file -> fullname or None


def _resolve(node: ast.expr, lookup: Lookup, line: int) -> str:
    name = dotted(node)
    if name is None:
        raise AnnotationError(f"expected a name, got {ast.unparse(node)!r}", line)
    full = lookup(name)
    if full is None:
        raise AnnotationError(f'name "{name}" is not defined', line)
    return full


def _int(node: ast.expr, line: int) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(
        node.value, bool
    ):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int)
        and not isinstance(node.operand.value, bool)
    ):
        return -node.operand.value
    raise AnnotationError(f"S(dim) takes an int literal, got {ast.unparse(node)!r}", line)


def _axis_type(node: ast.expr, lookup: Lookup, line: int) -> object:
    if isinstance(node, ast.Call):
        full = _resolve(node.func, lookup, line)
        if full in PARTITIONED_FULLNAMES:
            return _partitioned(node, PARTITIONED_FULLNAMES[full], line)
        if full not in SHARD_FULLNAMES:
            raise AnnotationError(
                f"{ast.unparse(node)!r} is not a local SPMD type (use R, I, V, P or S(dim))", line
            )
        if len(node.args) != 1 or node.keywords:
            raise AnnotationError("S(dim) takes one int argument", line)
        return Shard(_int(node.args[0], line))
    full = _resolve(node, lookup, line)
    t = LOCAL_TYPES.get(full)
    if t is None:
        raise AnnotationError(
            f"{ast.unparse(node)!r} is not a local SPMD type (use R, I, V, P or S(dim))", line
        )
    return t


def _partitioned(node: ast.Call, aligned: bool, line: int) -> object:
    """PS(dim), PS(dim, aligned=True) or PSA(dim)."""
    flags = {k.arg: k.value for k in node.keywords}
    if len(node.args) != 1 or set(flags) - {"aligned"}:
        raise AnnotationError("PS(dim) takes one int dim (and aligned=True or False)", line)
    if "aligned" in flags:
        value = flags["aligned"]
        if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
            raise AnnotationError("PS(dim, aligned=...) takes True or False", line)
        aligned = value.value
    return PartitionedShard(_int(node.args[0], line), aligned)


def _spec_entry(node: ast.expr, line: int) -> object:
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str)):
        return node.value
    if isinstance(node, ast.Tuple) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return tuple(e.value for e in node.elts)  # type: ignore[attr-defined]
    raise AnnotationError(
        f"PartitionSpec entries are None, an axis name or a tuple of axis names; "
        f"got {ast.unparse(node)!r}",
        line,
    )


def _partition_spec(node: ast.expr, lookup: Lookup, line: int) -> PartitionSpec:
    if not isinstance(node, ast.Call) or _resolve(node.func, lookup, line) not in _SPEC_FULLNAMES:
        raise AnnotationError(
            f"spec= takes PartitionSpec(...), got {ast.unparse(node)!r}", line
        )
    if node.keywords:
        raise AnnotationError("PartitionSpec takes positional entries only", line)
    try:
        return PartitionSpec(*[_spec_entry(a, line) for a in node.args])  # type: ignore[arg-type]
    except SpecError as e:
        raise AnnotationError(str(e), line) from None


# fullname of a name written as metadata -> the Spmd(...) call it is bound
# to and how names resolve there (a module-level Final spec), else None
Named = Callable[[str], Optional[Tuple[ast.expr, Lookup]]]


def decode(meta: Meta, lookup: Lookup, named: Optional[Named] = None) -> Optional[Spmd]:
    """The Spmd among the metadata, None if there is none; AnnotationError if
    malformed.  `named` reads metadata written as a name (`SPEC`)."""
    if meta.ambiguous:
        raise AnnotationError(
            "a string annotation with several tensor types cannot be read (mypy reports them "
            "all at the string's position); write it without quotes, with "
            "`from __future__ import annotations` if needed",
            meta.line,
        )
    found: Optional[Spmd] = None
    for expr in meta.exprs:
        if not isinstance(expr, ast.Call):
            full = _lookup_name(dotted(expr) or "", lookup)
            if full in SPMD_FULLNAMES:
                raise AnnotationError("Spmd must be called with the axes' types: Spmd(tp=V)", meta.line)
            spec = named(full) if named is not None and full is not None else None
            value = decode(Meta((spec[0],), meta.line), spec[1]) if spec is not None else None
            if value is not None and found is not None:
                raise AnnotationError("two Spmd(...) in one annotation; keep one", meta.line)
            found = value or found
            continue
        full = _lookup_name(dotted(expr.func) or "", lookup)
        name = dotted(expr.func) or ""
        if full not in SPMD_FULLNAMES and not (full is None and name.split(".")[-1] == "Spmd"):
            continue
        if full is None:
            raise AnnotationError(f'name "{name}" is not defined', meta.line)
        if found is not None:
            raise AnnotationError("two Spmd(...) in one annotation; keep one", meta.line)
        found = _decode_call_memo(expr, lookup, meta.line)
    if found is not None and meta.dims is not None and found.shape is None:
        found = _with_dims(found, meta.dims, meta.line)
    if found is not None and not found.axes and found.spec is None:
        raise AnnotationError("Spmd() names no mesh axis; give each axis its type, e.g. Spmd(tp=V)", meta.line)
    if found is not None and meta.misplaced:
        raise AnnotationError(
            "Spmd(...) annotates a Tensor, not a container of tensors: put it on each tensor, "
            "e.g. list[Annotated[Tensor, Spmd(...)]] or Optional[Annotated[Tensor, Spmd(...)]]",
            meta.line,
        )
    return found


# id(exprs) -> (the metadata's exprs, (misplaced, dims), the names its decoding
# looked up with what each was, in order and each once, the answer).  The
# annotation index shares one `exprs` among all places that write the same
# text (annotations._snippet), so a codebase's annotations are decoded once
# each: the hook looks the names up again, and reuses the answer while they
# mean the same.
# id(exprs) -> (exprs, (misplaced, dims), the names looked up, what each
# resolved to, the answer)
_ANSWERS: Dict[int, Tuple[Sequence[ast.expr], object, Tuple[str, ...], List[Optional[str]], Optional[Spmd]]] = {}


def decode_annotation(meta: Meta, lookup: Lookup, named: Optional[Named] = None) -> Optional[Spmd]:
    """decode(meta, lookup, named), the answer reused while the names it looked
    up resolve the same (an answer that raised is never kept, nor one that
    read a named spec: its value is in another statement, maybe another
    module, which a daemon edit can change while the names stay)."""
    exprs = meta.exprs
    hit = _ANSWERS.get(id(exprs))
    if hit is not None and hit[0] is exprs and hit[1] == (meta.misplaced, meta.dims) and not meta.ambiguous:
        try:
            if list(map(lookup, hit[2])) == hit[3]:  # every name resolves as it did
                return hit[4]
        except Exception:  # decode looks again, and raises as it would have
            pass
    seen: Dict[str, Optional[str]] = {}
    unkept = [False]  # a lookup raised, or a named spec was read: the answer is not kept

    def recording(name: str) -> Optional[str]:
        try:
            full = lookup(name)
        except Exception:
            unkept[0] = True
            raise
        seen.setdefault(name, full)
        return full

    def reading(full: str) -> Optional[Tuple[ast.expr, Lookup]]:
        spec = named(full) if named is not None else None
        if spec is not None:
            unkept[0] = True
        return spec

    found = _decoded_plan(meta, recording)
    if found is _UNDECIDED:
        found = decode(meta, recording, reading)
    if not unkept[0]:
        if len(_ANSWERS) >= _MAX_DECODED:
            _ANSWERS.clear()
        _ANSWERS[id(exprs)] = (exprs, (meta.misplaced, meta.dims), tuple(seen), list(seen.values()), found)
    return found


_UNDECIDED: Any = object()


def _decoded_plan(meta: Meta, lookup: Lookup) -> Optional[Spmd]:
    """decode's answer for a text annotation_text recognised, from its Plan,
    when the names resolve to what a well-formed annotation names; else
    _UNDECIDED (decode then reads the parsed call, and reports what is
    wrong).  The names are looked up in decode's order."""
    exprs = meta.exprs
    plan = exprs.plan if isinstance(exprs, LazyExprs) else None
    if plan is None or meta.ambiguous or meta.misplaced or meta.dims is not None:
        return _UNDECIDED
    try:
        if lookup(plan.callee) not in SPMD_FULLNAMES:
            return _UNDECIDED
        axes: Dict[str, object] = {}
        for name, value, dim in plan.keywords:
            full = lookup(value)
            if dim is None:
                t = LOCAL_TYPES.get(full)  # type: ignore[arg-type]
            else:
                t = Shard(dim) if full in SHARD_FULLNAMES else None
            if t is None:
                return _UNDECIDED
            axes[name] = t
        found = Spmd.of(axes)  # type: ignore[arg-type]
    except Exception:
        return _UNDECIDED  # a failed lookup, a SpecError: decode says what
    return found if found.axes else _UNDECIDED


def _with_dims(found: Spmd, dims: Tuple[Optional[int], ...], line: int) -> Spmd:
    """The Spmd with the sizes jaxtyping's string states (spec form: same rank)."""
    if found.spec is None:
        return found  # the per-axis form fixes no rank; the sizes stay unknown
    if len(dims) != len(found.spec):
        raise AnnotationError(
            f"the jaxtyping shape has {len(dims)} dims, but the spec {found.spec.canonical()} has "
            f"rank {len(found.spec)}",
            line,
        )
    keep = {a: t for a, t in found.axes.items() if a not in found.spec.axes}
    return Spmd.of(keep, found.spec, found.nograd, shape=dims)


def _shape(node: ast.expr, line: int) -> Tuple[Optional[int], ...]:
    if isinstance(node, (ast.Tuple, ast.List)):
        out: List[Optional[int]] = []
        for e in node.elts:
            if isinstance(e, ast.Constant) and e.value is None:
                out.append(None)
            else:
                out.append(_int(e, line))
        return tuple(out)
    raise AnnotationError(f"shape= takes a tuple of ints (None: unknown), got {ast.unparse(node)!r}", line)


def _lookup_name(name: str, lookup: Lookup) -> Optional[str]:
    try:
        return lookup(name) if name else None
    except Exception:
        return None


# id(call) -> (call, the names its decoding looked up with what they were, the
# Spmd).  An annotation's text is parsed once per codebase (_snippet), so the
# same `Spmd(...)` node comes back for every place that writes it; the names
# are looked up again, and the answer reused while they mean the same.
_DECODED: Dict[int, Tuple[ast.Call, Tuple[Tuple[str, Optional[str]], ...], Spmd]] = {}
_MAX_DECODED = 65536


def _decode_call_memo(call: ast.Call, lookup: Lookup, line: int) -> Spmd:
    hit = _DECODED.get(id(call))
    if hit is not None and hit[0] is call and all(lookup(n) == full for n, full in hit[1]):
        return hit[2]
    seen: List[Tuple[str, Optional[str]]] = []

    def recording(name: str) -> Optional[str]:
        full = lookup(name)
        seen.append((name, full))
        return full

    found = _decode_call(call, recording, line)
    if len(_DECODED) >= _MAX_DECODED:
        _DECODED.clear()
    _DECODED[id(call)] = (call, tuple(seen), found)
    return found


def _decode_call(call: ast.Call, lookup: Lookup, line: int) -> Spmd:
    if call.args:
        raise AnnotationError(
            "Spmd takes keywords only: Spmd(tp=V, dp=R) or Spmd(spec=PartitionSpec(...), tp=R)",
            line,
        )
    spec = None
    nograd = False
    shape: Optional[Tuple[Optional[int], ...]] = None
    axes: Dict[str, object] = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise AnnotationError("Spmd(**...) cannot be checked statically; name each axis", line)
        if kw.arg == "spec":
            spec = _partition_spec(kw.value, lookup, line)
        elif kw.arg == "shape":
            shape = _shape(kw.value, line)
        elif kw.arg == "nograd":
            if not (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, bool)):
                raise AnnotationError("nograd= takes True or False", line)
            nograd = kw.value.value
        else:
            axes[kw.arg] = _axis_type(kw.value, lookup, line)
    try:
        return Spmd.of(axes, spec, nograd, shape=shape)  # type: ignore[arg-type]
    except SpecError as e:
        raise AnnotationError(str(e), line) from None
