"""Mutations of the seed sources: malformed annotations and code caught mid-edit.

A `Case` is one mutated source plus what the checker must say about it:
`planted` lists the lines that now hold a malformed `Spmd(...)` annotation
(each must get an spmd-annotation error at that line); `odd` lists lines
holding an unusual but not necessarily wrong annotation (no expectation
beyond "no crash"; the test reports which of them stay silent).

Mutation families (`make_case` mixes them):

  annotation  replace one Spmd(...) annotation by a malformed one (unknown
              axis, bad type name, wrong S(i) dim, undefined name, wrong
              argument kinds), line for line
  odd         nested / doubled / misplaced Spmd metadata, line for line
  imports     drop an import line (kept as a comment, so lines do not move)
  calls       wrong arguments to spmd collectives and assert_spmd
  editor      what an editor buffer looks like mid-edit: truncated file or
              line, unbalanced brackets, deleted / duplicated / swapped
              lines, a typo'd name, a dedent, half-typed tokens

Deterministic: every choice comes from `random.Random(seed)`.
"""

from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass, field
from typing import List, NamedTuple, Optional, Tuple

# Replacements for a whole Spmd(...) call; "{S}" is the callee as written
# (Spmd or spmd.Spmd).  Every one must be reported as spmd-annotation.
MALFORMED: Tuple[Tuple[str, str], ...] = (
    ("undefined name", "{S}(tp=Q)"),
    ("undefined name (lower case)", "{S}(tp=r)"),
    ("undefined module attribute", "{S}(tp=spmd.Q)"),
    ("unknown axis", "{S}(ep=R)"),
    ("unknown axis beside a known one", "{S}(tp=R, xp=V)"),
    ("bad type name: a class", "{S}(tp=int)"),
    ("bad type name: Tensor", "{S}(tp=Tensor)"),
    ("bad type name: S without a dim", "{S}(tp=S)"),
    ("bad type name: attribute of R", "{S}(tp=R.letter)"),
    ("bad type: string", '{S}(tp="R")'),
    ("bad type: list", "{S}(tp=[R])"),
    ("bad type: tuple", "{S}(tp=(R, V))"),
    ("bad type: lambda", "{S}(tp=lambda: R)"),
    ("bad type: conditional", "{S}(tp=R if True else V)"),
    ("bad type: call of a call", "{S}(tp=S(0)(1))"),
    ("S dim: float", "{S}(tp=S(1.5))"),
    ("S dim: string", '{S}(tp=S("0"))'),
    ("S dim: missing", "{S}(tp=S())"),
    ("S dim: two", "{S}(tp=S(0, 1))"),
    ("S dim: keyword", "{S}(tp=S(dim=0))"),
    ("S dim: a name", "{S}(tp=S(k))"),
    ("S dim: bool", "{S}(tp=S(True))"),
    ("S dim: negative float", "{S}(tp=S(-1.0))"),
    ("S dim: expression", "{S}(tp=S(1 + 1))"),
    ("positional axis type", "{S}(R)"),
    ("positional string", '{S}("tp")'),
    ("star args", "{S}(*axes)"),
    ("double-star kwargs", "{S}(**axes)"),
    ("spec: a string", '{S}(spec="dp")'),
    ("spec: a tuple", '{S}(spec=("dp", None))'),
    ("spec: bad entry", "{S}(spec=PartitionSpec(1))"),
    ("spec: repeated axis", '{S}(spec=PartitionSpec("dp", "dp"))'),
    ("spec: keyword entry", '{S}(spec=PartitionSpec(dims="dp"))'),
    ("spec: axis also given", '{S}(tp=R, spec=PartitionSpec("tp"))'),
    ("spec: shard beside spec", "{S}(dp=S(0), spec=PartitionSpec(None))"),
    ("spec: unknown axis", '{S}(spec=PartitionSpec("ep", None))'),
    ("nograd: an int", "{S}(tp=R, nograd=1)"),
    ("nograd: a string", '{S}(tp=R, nograd="yes")'),
)

# Unusual placements and shapes of Spmd metadata: no expectation but no crash.
# "{A}" is the whole Annotated[...] expression's replacement; "{T}" the tensor
# as written, "{S}" the Spmd callee.
ODD: Tuple[Tuple[str, str], ...] = (
    ("nested Annotated, malformed outer", "Annotated[Annotated[{T}, {S}(tp=R)], {S}(dp=Q)]"),
    ("two Spmd, the second malformed", "Annotated[{T}, {S}(tp=R), {S}(tp=Q)]"),
    ("Spmd on an int", "Annotated[int, {S}(tp=Q)]"),
    ("Spmd on a list of tensors", "Annotated[List[{T}], {S}(tp=Q)]"),
    ("Spmd on an Optional tensor", "Annotated[Optional[{T}], {S}(tp=Q)]"),
    ("Spmd on a union with None", "Annotated[{T} | None, {S}(tp=Q)]"),
    ("tensor as a string", 'Annotated["Tensor", {S}(tp=Q)]'),
    ("Spmd not called", "Annotated[{T}, {S}]"),
    ("Spmd called twice", "Annotated[{T}, {S}(tp=V)(dp=R)]"),
    ("Spmd with no axes", "Annotated[{T}, {S}()]"),
    ("no metadata", "Annotated[{T}]"),
    ("empty metadata", "Annotated[{T}, ]"),
    ("typo in Spmd", "Annotated[{T}, Spmdd(tp=R)]"),
    ("metadata is a string", 'Annotated[{T}, "tp=R"]'),
    ("subscripted", "Annotated[{T}, {S}(tp=R)][0]"),
)

# Arguments of collectives: (pattern, replacement) on one line.
CALLS: Tuple[Tuple[str, str], ...] = (
    (r"src=([RIVP]|S\(-?\d+\))", "src=Q"),
    (r"src=([RIVP]|S\(-?\d+\))", 'src=S("a")'),
    (r"src=([RIVP]|S\(-?\d+\))", "src=1"),
    (r"src=([RIVP]|S\(-?\d+\))", "src=None"),
    (r"dst=([RIVP]|S\(-?\d+\))", "dst=S(0)(1)"),
    (r"dst=([RIVP]|S\(-?\d+\))", "dst=spmd"),
    (r", dst=([RIVP]|S\(-?\d+\))", ""),
    (r", src=([RIVP]|S\(-?\d+\))", ""),
    (r'"(tp|dp)"', "5"),
    (r'"(tp|dp)"', '("dp", 7)'),
    (r'"(tp|dp)"', "None"),
    (r'"(tp|dp)"', '"tp", "dp"'),
    (r'"(tp|dp)"', '"nope"'),
    (r"dst=([RIVP]|S\(-?\d+\))\)", r"dst=\1, expert_mode=maybe)"),
    (r"dst=([RIVP]|S\(-?\d+\))\)", r"dst=\1, **extra)"),
    (r"spmd\.(\w+)\(", r"spmd.\1(*args, "),
    (r"spmd\.(all_reduce|all_gather|reinterpret|convert|redistribute)\([^)]*\)\)?", r"spmd.\1()"),
    (r"Spmd\(tp=V\)\)", "Spmd(tp=Q))"),
    (r"spmd\.assert_spmd\(x, ", "spmd.assert_spmd(x, 3, "),
)

EDITS = (
    "truncate file", "truncate line", "drop closer", "add opener", "delete line",
    "duplicate line", "swap lines", "typo", "dedent", "half token", "duplicate keyword",
)


class Site(NamedTuple):
    """One Annotated[Tensor, Spmd(...)] in a source: its line and the text spans to replace."""

    line: int  # 1-based
    ann: Tuple[int, int]  # columns of the whole Annotated[...] on that line
    call: Tuple[int, int]  # columns of the Spmd(...) call
    callee: str  # "Spmd" or "spmd.Spmd" as written
    tensor: str  # "Tensor" or "torch.Tensor" as written
    checked: bool  # False inside a function mypy does not check (no annotations)
    kind: str  # "annotation" or "assert_spmd"
    quote: str = ""  # the string's delimiter, for an annotation written as a string


def _is_tensor(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Tensor") or (
        isinstance(node, ast.Attribute) and node.attr == "Tensor"
    )


def _spmd_call(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Name) and f.id == "Spmd") or (isinstance(f, ast.Attribute) and f.attr == "Spmd")


def _untyped_functions(tree: ast.AST) -> List[Tuple[int, int]]:
    """Line spans of functions with no annotation at all (mypy skips their bodies)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
            if node.returns is None and all(p.annotation is None for p in params):
                out.append((node.lineno, node.end_lineno or node.lineno))
    return out


def sites(source: str) -> List[Site]:
    """Every one-line Annotated[Tensor, Spmd(...)] (also inside string annotations) and assert_spmd call."""
    tree = ast.parse(source)
    lines = source.splitlines()
    untyped = _untyped_functions(tree)
    out: List[Site] = []

    def add(sub: ast.Subscript, line: int, shift: int, quote: str = "") -> None:
        elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else []
        if len(elts) != 2 or not _is_tensor(elts[0]) or not _spmd_call(elts[1]):
            return
        if sub.lineno != sub.end_lineno:
            return
        call = elts[1]
        assert isinstance(call, ast.Call)
        checked = not any(a <= line <= b for a, b in untyped)
        out.append(
            Site(
                line,
                (sub.col_offset + shift, (sub.end_col_offset or 0) + shift),
                (call.col_offset + shift, (call.end_col_offset or 0) + shift),
                ast.unparse(call.func),
                ast.unparse(elts[0]),
                checked,
                "annotation",
                quote,
            )
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, (ast.Name, ast.Attribute)):
            name = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
            if name == "Annotated":
                add(node, node.lineno, 0)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "Annotated[" in node.value:
            text = lines[node.lineno - 1][node.col_offset : node.end_col_offset]
            if node.lineno != node.end_lineno or not text or text[0] not in "'\"" or text[1] in "'\"":
                continue
            try:
                inner = ast.parse(node.value, mode="eval")
            except SyntaxError:
                continue
            for sub in ast.walk(inner):
                if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id == "Annotated":
                    add(sub, node.lineno, node.col_offset + 1, text[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "assert_spmd":
            if len(node.args) == 2 and _spmd_call(node.args[1]) and node.lineno == node.end_lineno:
                call = node.args[1]
                checked = not any(a <= node.lineno <= b for a, b in untyped)
                out.append(
                    Site(node.lineno, (call.col_offset, call.end_col_offset or 0),
                         (call.col_offset, call.end_col_offset or 0),
                         ast.unparse(call.func), "", checked, "assert_spmd")  # type: ignore[attr-defined]
                )
    out.sort()
    return out


@dataclass
class Case:
    name: str
    source: str
    planted: List[Tuple[int, str]] = field(default_factory=list)  # (line, what) must be reported
    unchecked: List[Tuple[int, str]] = field(default_factory=list)  # malformed, in a body mypy skips
    odd: List[Tuple[int, str]] = field(default_factory=list)
    edits: List[str] = field(default_factory=list)

    def parses(self) -> bool:
        """Compiles (so also free of what the compiler, not the parser, rejects: a repeated keyword)."""
        try:
            compile(self.source, self.name, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
        return True


def _replace_span(lines: List[str], line: int, span: Tuple[int, int], text: str) -> None:
    s = lines[line - 1]
    lines[line - 1] = s[: span[0]] + text + s[span[1] :]


def _annotation_mutations(rng: random.Random, case: Case, k: int) -> None:
    """Up to k malformed or odd annotations, at distinct sites (text replaced within a line)."""
    all_sites = sites(case.source)
    rng.shuffle(all_sites)
    chosen: List[Site] = []
    used_lines = set()
    for s in all_sites:
        if s.line not in used_lines:
            chosen.append(s)
            used_lines.add(s.line)
        if len(chosen) == k:
            break
    lines = case.source.splitlines()
    # right to left within the file so earlier spans stay valid (one site per line)
    swap = {'"': "'", "'": '"'}
    for s in chosen:
        odd = s.kind == "annotation" and rng.random() < 0.25
        if odd:
            what, tmpl = rng.choice(ODD)
            text = tmpl.format(T=s.tensor, S=s.callee)
        else:
            what, tmpl = rng.choice(MALFORMED)
            text = tmpl.format(S=s.callee)
        if s.quote:  # inside a string annotation: the other quote
            text = text.replace(s.quote, swap[s.quote])
        _replace_span(lines, s.line, s.ann if odd else s.call, text)
        if odd:
            case.odd.append((s.line, what))
        else:
            (case.planted if s.checked else case.unchecked).append((s.line, f"{s.kind}: {what}"))
    case.source = "\n".join(lines) + "\n"


def _drop_import(rng: random.Random, case: Case) -> None:
    """Comment out one import of the spmd names; every annotation that used them is now malformed."""
    lines = case.source.splitlines()
    choices = [i for i, ln in enumerate(lines) if ln.startswith(("from spmd_mypy import", "import spmd_mypy"))]
    if not choices:
        return
    i = rng.choice(choices)
    dropped = lines[i]
    lines[i] = "# " + dropped + "  (removed mid-edit)"
    case.source = "\n".join(lines) + "\n"
    case.edits.append(f"imports: dropped {dropped!r}")
    qualified = dropped.startswith("import spmd_mypy")
    planted = {ln for ln, _ in case.planted} | {ln for ln, _ in case.odd}  # odd lines keep no expectation
    for s in sites(case.source):
        uses_plain = not s.callee.startswith("spmd.")
        if s.line in planted or (qualified == uses_plain):
            continue
        target = case.planted if s.checked else case.unchecked
        target.append((s.line, f"{s.kind}: undefined after the import was dropped"))
        planted.add(s.line)


def _call_mutation(rng: random.Random, case: Case) -> None:
    lines = case.source.splitlines()
    pattern, repl = rng.choice(CALLS)
    hits = [i for i, ln in enumerate(lines) if re.search(pattern, ln) and "spmd." in ln]
    if not hits:
        return
    i = rng.choice(hits)
    lines[i] = re.sub(pattern, repl, lines[i], count=1)
    case.source = "\n".join(lines) + "\n"
    case.edits.append(f"calls: line {i + 1}: {pattern} -> {repl}")


_NAMES = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _editor_mutation(rng: random.Random, case: Case) -> None:
    src = case.source
    lines = src.splitlines()
    what = rng.choice(EDITS)
    i = rng.randrange(len(lines))
    if what == "truncate file":
        src = src[: rng.randrange(len(src))]
    elif what == "truncate line":
        ln = lines[i]
        lines[i] = ln[: rng.randrange(len(ln) + 1)]
        src = "\n".join(lines) + "\n"
    elif what in ("drop closer", "add opener"):
        pos = [m.start() for m in re.finditer(r"[)\]]" if what == "drop closer" else r"[(\[]", src)]
        if pos:
            p = rng.choice(pos)
            src = src[:p] + src[p + 1 :] if what == "drop closer" else src[:p] + src[p] + src[p:]
    elif what == "delete line":
        del lines[i]
        src = "\n".join(lines) + "\n"
    elif what == "duplicate line":
        lines.insert(i, lines[i])
        src = "\n".join(lines) + "\n"
    elif what == "swap lines" and i + 1 < len(lines):
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
        src = "\n".join(lines) + "\n"
    elif what == "typo":
        names = list(_NAMES.finditer(src))
        m = rng.choice(names)
        word = m.group()
        bad = word[:-1] if len(word) > 1 and rng.random() < 0.5 else word + rng.choice("xq_")
        src = src[: m.start()] + bad + src[m.end() :]
    elif what == "dedent":
        lines[i] = lines[i].lstrip()
        src = "\n".join(lines) + "\n"
    elif what == "half token":
        token = rng.choice(["spmd.", "Spmd(", "Annotated[", "x.", "-> ", ": ", "lambda", "@", "match x:"])
        ln = lines[i]
        col = rng.randrange(len(ln) + 1)
        lines[i] = ln[:col] + token + ln[col:]
        src = "\n".join(lines) + "\n"
    elif what == "duplicate keyword":
        src = re.sub(r"Spmd\((\w+)=(\w+)", r"Spmd(\1=\2, \1=\2", src, count=1)
    case.source = src
    case.edits.append(f"editor: {what} (line {i + 1})")


def make_case(name: str, seed_source: str, seed: int, editor: Optional[bool] = None) -> Case:
    """One mutated source.  editor=False: only line-preserving mutations (expectations hold)."""
    rng = random.Random(seed)
    case = Case(name, seed_source)
    _annotation_mutations(rng, case, rng.randint(1, 3))
    if rng.random() < 0.2:
        _drop_import(rng, case)
    for _ in range(rng.randint(0, 2)):
        _call_mutation(rng, case)
    if editor is None:
        editor = rng.random() < 0.4
    if editor:
        for _ in range(rng.randint(1, 3)):
            _editor_mutation(rng, case)
        # lines may have moved: no line expectations for an editor case
        case.odd += [(ln, f"(after edits) {w}") for ln, w in case.planted + case.unchecked]
        case.planted, case.unchecked = [], []
    return case
