"""Every hint of the fixture suite, applied, fixes its error and adds none.

For each expected error of a YAML fixture case whose message ends in a hint
that is code (`Hint: spmd.all_reduce(h, 'tp', src=P, dst=R)`, `... in place
of this call`, `Hint: r += spmd...`, `Hint: r = r + v (...)`), the case's
source is edited the way the hint says: the expression the hint's call
takes as its first argument is replaced by the call; a hint "in place of
this call" replaces the spmd call on the line; a hint that is a statement
replaces the statement.  The edited program and the original go through
mypy in one batch: the edited one must have exactly the original's errors
less the fixed one (same line and code), nothing new.

Hints that are advice in words ("name 'tp' in the annotation", "in the
branch that gives these types, ...", a product to redo with its bias added
after the reduction) are not applied; the test prints how
many of each kind it saw.  A hint made of several calls joined by " and "
applies each.  One new error is part of a fix: a later reduction of the
value the hint reduced, whose own error says "drop this call".
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest
import yaml

from soundness.mypy_batch import run_mypy

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
_EXPECTED = re.compile(r"#\s*E:\s*(?P<msg>.*?)\s*\[(?P<code>spmd-[a-z-]+)\](?=\s*(?:# [EN]:|$))")
_HINT = re.compile(r"\. Hint: (?P<hint>.*)$")


@dataclass
class Applied:
    name: str  # module name of the edited program
    original: str  # module name of the original
    case: str  # fixture file stem :: case name
    line: int
    code: str
    hint: str


def _cases() -> List[Tuple[str, str]]:
    """(case id, main source) of every case mypy checks with the suite's base config."""
    out = []
    for path in sorted(FIXTURES.glob("*.yml")):
        for case in yaml.safe_load(path.read_text()) or []:
            if any(k in case for k in ("files", "mypy_config", "env", "regex", "out", "skip")):
                continue
            if "import spmd_types" in case["main"]:
                continue  # its hints name spmd_mypy's calls, while `spmd` there is spmd_types
            out.append((f"{path.stem}::{case['case']}", case["main"]))
    return out


def _call_part(hint: str) -> str:
    """A hint that is a call followed by words ("... to sum the ranks' losses",
    "..., then reduce it"): the call; of two forms ("A, then ...; or B"), the
    one that wraps the expression as written (B)."""
    if "; or spmd." in hint:
        hint = hint.rpartition("; or ")[2]
    if not hint.startswith("spmd."):
        return hint
    depth = 0
    for k, ch in enumerate(hint):
        depth += ch == "("
        depth -= ch == ")"
        if ch == ")" and depth == 0:
            rest = hint[k + 1 :]
            return hint[: k + 1] if rest.startswith((" to ", ", then ")) else hint
    return hint


def _node_at(stmt: ast.AST, want: ast.AST) -> Optional[ast.AST]:
    """The sub-expression of `stmt` written as `want` (compared as trees)."""
    target = ast.dump(want)
    for node in ast.walk(stmt):
        if isinstance(node, ast.expr) and ast.dump(node) == target:
            return node
    return None


def _spmd_call(stmt: ast.AST) -> Optional[ast.Call]:
    for node in ast.walk(stmt):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "spmd"
        ):
            return node
    return None


def _call_taking(stmt: ast.AST, arg: ast.AST) -> Optional[ast.Call]:
    target = ast.dump(arg)
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and node.args and ast.dump(node.args[0]) == target:
            return node
    return None


def _replace(line: str, node: ast.AST, text: str) -> str:
    return line[: node.col_offset] + text + line[node.end_col_offset :]  # type: ignore[attr-defined]


def apply_hint(source: str, line_no: int, hint: str) -> Optional[str]:
    """The source with `hint` applied at `line_no`; None for advice in words or
    a hint whose expression the line does not hold (counted as a failure by
    the caller when the hint is code)."""
    # how another API's call maps onto ours (megatron-core's): not part of the hint
    hint = re.sub(r" \([\w.]+, read as spmd-mypy's spmd\.\w+\)$", "", hint)
    lines = source.split("\n")
    line = lines[line_no - 1]
    code = line.split("#", 1)[0].rstrip()
    indent = code[: len(code) - len(code.lstrip())]
    try:
        stmt = ast.parse(code.strip())
    except SyntaxError:
        return None
    body = hint.removesuffix(" in place of this call")
    body = re.sub(r" \([^()]* is then [^()]*\)$", "", body)
    try:
        fix = ast.parse(body)
    except SyntaxError:
        return None
    fixed_stmt = fix.body[0] if fix.body else None
    if isinstance(fixed_stmt, (ast.AugAssign, ast.Assign)) or (
        isinstance(fixed_stmt, ast.Expr) and not isinstance(fixed_stmt.value, ast.Call)
    ):
        lines[line_no - 1] = indent + body  # a statement: in place of the line's
        return "\n".join(lines)
    if not isinstance(fixed_stmt, ast.Expr) or not isinstance(fixed_stmt.value, ast.Call):
        return None
    call = fixed_stmt.value
    if isinstance(call.func, ast.Attribute) and not (
        isinstance(call.func.value, ast.Name) and call.func.value.id == "spmd"
    ):
        lines[line_no - 1] = indent + body  # r.add_(spmd...): a statement
        return "\n".join(lines)
    offset = len(indent)
    if hint.endswith(" in place of this call"):
        # the spmd call on the line, else (another API's call the checker reads
        # as a collective: megatron-core's) the call taking the hint's first argument
        target = _spmd_call(stmt) or (_call_taking(stmt, call.args[0]) if call.args else None)
    else:
        # The hint's call wraps the expression the line holds, perhaps through
        # another call (all_reduce(reinterpret(n, ...), ...)): the innermost.
        target, inner = None, call
        while target is None and isinstance(inner, ast.Call) and inner.args:
            target = _node_at(stmt, inner.args[0])
            inner = inner.args[0]
    if target is None:
        return None
    shifted = " " * offset + code.strip()
    lines[line_no - 1] = _replace(shifted, _Shift(target, offset), body)
    return "\n".join(lines)


class _Shift:
    """A node's columns moved right by the indentation stripped before parsing."""

    def __init__(self, node: ast.AST, offset: int) -> None:
        self.col_offset = node.col_offset + offset  # type: ignore[attr-defined]
        self.end_col_offset = node.end_col_offset + offset  # type: ignore[attr-defined]


_NAMES = "import spmd_mypy as spmd; from spmd_mypy import I, P, R, S, V; "


def _with_names(source: str) -> str:
    """The names a hint uses, imported on the first line that is no
    __future__ import (on the same line: line numbers stay)."""
    lines = source.split("\n")
    k = next(i for i, ln in enumerate(lines) if not ln.startswith("from __future__"))
    lines[k] = _NAMES + lines[k]
    return "\n".join(lines)


def _collect() -> Tuple[Dict[str, str], List[Applied], List[str], int]:
    """(module -> source, applied hints, hints that are code but did not apply,
    hints in words)."""
    sources: Dict[str, str] = {}
    applied: List[Applied] = []
    unapplied: List[str] = []
    words = 0
    for k, (case_id, main) in enumerate(_cases()):
        original = f"case_{k:04d}"
        hints = []
        for n, line in enumerate(main.split("\n"), start=1):
            for m in _EXPECTED.finditer(line):
                h = _HINT.search(m["msg"])
                if h:
                    hints.append((n, m["code"], h["hint"]))
        if not hints:
            continue
        main = _with_names(main)
        sources[original] = main
        for j, (n, code, hint) in enumerate(hints):
            if ", and add " in hint or not re.match(r"^(spmd\.|[A-Za-z_][\w.]* ?(\+|-|\*|/|@)?= |[A-Za-z_][\w.]*\.\w+_\()", hint):
                words += 1
                continue
            hint = _call_part(hint)
            edited: Optional[str] = main
            for part in re.split(r" and (?=spmd\.)", hint):
                edited = apply_hint(edited, n, part) if edited is not None else None
            if edited is None:
                unapplied.append(f"{case_id}:{n}: {hint}")
                continue
            name = f"{original}_fix{j}"
            sources[name] = edited
            applied.append(Applied(name, original, case_id, n, code, hint))
    return sources, applied, unapplied, words


def _key(error: Tuple[int, str, str]) -> Tuple[int, str, str]:
    axis = re.search(r"axis '(\w+)'", error[2])
    return error[0], error[1], axis.group(1) if axis else ""


def _errors(report: object, stem: str) -> Set[Tuple[int, str, str]]:
    return {(line, code, msg) for line, code, msg in report.errors.get(stem, [])}  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Tuple[object, List[Applied], List[str], int]:
    sources, applied, unapplied, words = _collect()
    work = tmp_path_factory.mktemp("hints")
    files = []
    for name, text in sources.items():
        path = work / f"{name}.py"
        path.write_text(text)
        files.append(path)
    store = getattr(request.config, "cache", None)
    cache = Path(store.mkdir("spmd-hints-mypy-cache")) if store is not None else work / ".cache"
    report = run_mypy(files, work, cache)
    assert report.exit_status in (0, 1), report.stdout[-3000:] + report.stderr[-3000:]
    return report, applied, unapplied, words


def test_every_hint_that_is_code_applies(batch: Tuple[object, List[Applied], List[str], int]) -> None:
    _, applied, unapplied, words = batch
    print(f"\nhints applied: {len(applied)}, in words: {words}, not applicable: {len(unapplied)}")
    assert len(applied) >= 50  # the suite has well over that many
    assert not unapplied, "hints whose expression the line does not hold:\n" + "\n".join(unapplied)


# Hints known not to fix their error, each with the reason; the test fails if
# one of them starts to work (then remove it) or another joins them.
KNOWN: Dict[Tuple[str, int], str] = {
    ("test_modules::module_forward_body_checked_with_parameters", 19): (
        "`return out + self.bias` with P declared: the fix is to add the bias after the "
        "reduction, outside this function; the op hook cannot see the declared return "
        "through the return's rewrite, so it offers the reduction"
    ),
}


def test_an_applied_hint_fixes_its_error_and_adds_none(batch: Tuple[object, List[Applied], List[str], int]) -> None:
    report, applied, _, _ = batch
    problems = []
    known_seen: Set[Tuple[str, int]] = set()
    for a in applied:
        before = _errors(report, a.original)
        after = _errors(report, a.name)
        fixed = {e for e in before if e[0] == a.line and e[1] == a.code and a.hint in e[2]}
        if not fixed:
            problems.append(f"{a.original}:{a.line}: the original has no such error: {a.hint}")
            continue
        # A later reduction of the value the hint reduced is now a second
        # one: its own error says to drop it, and that is the rest of the fix.
        # Another error on the line (another axis) stays, its text now quoting
        # the fixed expression: the same error, matched by line, code and axis.
        kept = {_key(e) for e in before - fixed}
        new = {e for e in after if _key(e) not in kept and "or drop this call if" not in e[2]}
        still = {e for e in after if _key(e) in {_key(f) for f in fixed}}
        if (new or still) and (a.case, a.line) in KNOWN:
            known_seen.add((a.case, a.line))
        elif new or still:
            problems.append(
                f"{a.original}:{a.line} hint {a.hint!r}:\n"
                + "".join(f"    new: {ln}: {msg}  [{code}]\n" for ln, code, msg in sorted(new))
            )
    assert not problems, f"{len(problems)} of {len(applied)} hints:\n" + "\n".join(problems)
    assert known_seen == set(KNOWN), f"known exceptions that now apply cleanly: {set(KNOWN) - known_seen}"
