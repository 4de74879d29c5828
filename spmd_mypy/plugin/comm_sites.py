"""The collectives the checker typed, recorded at each call site: the facts of
the communication report (`python -m spmd_mypy.comms`, comm_report.py) and of
spmd.reveal_comms.

`comms.type_collective` (every typed collective and coercion goes through it:
spmd.*, spmd_types', megatron-core's) calls `record_call` once a call's
src/dst passed the vocabulary's `plan`; partitioned.py does for the
partitioned-shard conversions (op "partitioned.<name>"), pipeline.py for the
sends and receives between pipeline stages (op "p2p.<name>").  Sites are kept per file for the current
check of that file (a new check of the file, e.g. in the daemon, starts its
list again), deduplicated (mypy checks a deferred function or a function
generic over a layout variable more than once).

The name a call's result is assigned to (`h = spmd.convert(x, ...)`) comes
from the file's ast, only to link one call's result to the next call's
input; the types come from the checker.  It is looked up when the sites are
read (`sites_of`: a report), never while checking: parsing and walking
every checked file for it cost about a fifth of a whole check of the user's
code (bench_scale's distinct codebase, profiled).

Sites are recorded only where something will read them: while a report
collects (`collecting(True)`, python -m spmd_mypy.comms), and in a run
where some file calls spmd.reveal_comms (found in its bytes when mypy
loads it, `note_file`: the function it names may be in another module,
checked first).  A plain mypy run, the editor's among them, builds none.
"""

from __future__ import annotations

import ast
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from ..vocab.localtype import P, R, AxisType
from . import _mypy
from .carrier import spmd_of
from .sourcefile import FileIndex, statements

__all__ = [
    "Site", "GRADIENT_SYNC", "PHASE_COLLECTIVE", "P2P", "collecting", "note_file", "wanted", "record_site",
    "record_call", "record_gradient_sum", "sites_of", "files", "clear",
]

# The phase of the gradient-sync contract's sums (spmd.sync_grads and friends, plugin/gradsync.py).
GRADIENT_SYNC = "gradient sync"
# The collective a site of each phase of its own runs (its op names the API call).
PHASE_COLLECTIVE = {GRADIENT_SYNC: "all_reduce"}

P2P = "p2p."  # the op of a send or receive between pipeline stages: "p2p.send_next" (pipeline.py)


class Site(NamedTuple):
    """One typed collective or coercion call."""

    file: str
    line: int
    column: int
    function: str  # qualified name in its module; "<module>" at module level
    op: str
    axes: Tuple[str, ...]
    src: AxisType
    dst: AxisType
    value: str  # the input expression, as written
    value_call: Optional[Tuple[int, int]]  # (line, column) when the input is itself a call
    result: Optional[str]  # the name the result is assigned to, if any (filled by sites_of)
    nograd: bool = False  # the input carries no gradient (its type says nograd): no backward runs
    typed: bool = True  # the input's SPMD type is known (else whether it has a gradient is not)
    phase: str = ""  # "": a collective call (forward and its backward); else the one phase it runs in
    configuration: str = ""  # the configuration of a configured function checked (its label), else ""


_SITES: Dict[str, Tuple[int, Dict[Site, None]]] = {}  # file -> (checker, sites in order)

_COLLECTING = [False]  # a report reads every checked file's sites
_ASKED = [False]  # a file of this run (or this daemon's life) calls spmd.reveal_comms


def collecting(on: bool) -> None:
    """Record every file's sites (a report's run), or only where asked."""
    _COLLECTING[0] = on


def note_file(path: Optional[str]) -> None:
    """A file mypy loads (the plugin's per-file hook): one that calls
    spmd.reveal_comms makes every file's sites wanted from now on."""
    if not _ASKED[0] and _ASKS.of(path):
        _ASKED[0] = True


def wanted(api: Any) -> bool:
    """Whether the sites of the file `api` checks may be read."""
    return _COLLECTING[0] or _ASKED[0]


def _record(api: Any, site: Site) -> None:
    """Keep `site` for its file's current check by `api`, with the
    configuration being checked (a configured function's body is checked once
    per configuration, and each runs its own collectives)."""
    checker = _mypy.checker_identity(api)
    found = _mypy.current_configuration(api) if _mypy.FLAG_NAMES else None
    if found is not None:
        site = site._replace(configuration=found[0].label)
    held = _SITES.get(site.file)
    if held is None or held[0] != checker:
        held = _SITES[site.file] = (checker, {})
    held[1][site] = None


def record_site(
    ctx: Any, op: str, axes: Tuple[str, ...], src: AxisType, dst: AxisType, value: str, *,
    at: Optional[_mypy.Expression] = None, value_call: Optional[Tuple[int, int]] = None,
    nograd: bool = False, typed: bool = True, phase: str = "",
) -> None:
    """A site in the function the hook's `ctx` checks, at the hook's call (or
    at `at`): `op` over `axes` from src to dst on `value` (as written)."""
    file = _mypy.checker_path(ctx.api)
    if file is None or not wanted(ctx.api):
        return
    where = at if at is not None else ctx.context
    site = Site(
        file, where.line, where.column, _mypy.checking_function(ctx.api), op, axes, src, dst, value,
        value_call, None, nograd, typed, phase,
    )
    _record(ctx.api, site)


def record_call(
    ctx: Any, op: str, x: Tuple[_mypy.Expression, _mypy.Type], axes: Tuple[str, ...], src: AxisType, dst: AxisType
) -> None:
    """The call of a hook's `ctx`: `op` on `x` over `axes` from src to dst."""
    if not wanted(ctx.api):
        return  # before reading x's types
    found = [spmd_of(t) for t in _mypy.union_alternatives(x[1]) or [x[1]]]
    nograd = all(t is not None and t.nograd for t in found)
    record_site(
        ctx, op, axes, src, dst, _mypy.expr_text(x[0]),
        value_call=_mypy.call_position(x[0]), nograd=nograd, typed=None not in found,
    )


def record_gradient_sum(ctx: Any, call: _mypy.Expression, op: str, axis: str, param: str) -> None:
    """A gradient sum the contract API `call` (op: its name, e.g. "sync_grads")
    runs over `axis` on the gradient of `param` (as written, `model.w`): an
    all-reduce of P into R, outside autograd, in the phase GRADIENT_SYNC."""
    record_site(ctx, op, (axis,), P, R, param, at=call, phase=GRADIENT_SYNC)


def sites_of(file: str, function: Optional[str] = None) -> List[Site]:
    """The sites recorded in `file` (of one function), in source order, each
    call's `result` read from the file."""
    held = _SITES.get(file)
    found = [s for s in held[1] if function is None or s.function == function] if held else []
    named = [s if s.phase else s._replace(result=assigned_name(file, s.line, s.column)) for s in found]
    return sorted(named, key=lambda s: (s.line, s.column))


def files() -> List[str]:
    return sorted(_SITES)


def clear() -> None:
    _SITES.clear()
    _TARGETS.cache.clear()
    _ASKS.cache.clear()
    _ASKED[0] = False


def assigned_name(file: str, line: int, column: int) -> Optional[str]:
    """The target of `target = <the call at line:column>`, as written; None if the
    call is not the whole right-hand side of a single-target assignment."""
    return _TARGETS.of(file).get((line, column))


def _targets(tree: ast.AST) -> Dict[Tuple[int, int], str]:
    out: Dict[Tuple[int, int], str] = {}
    for node in statements(tree):
        value = getattr(node, "value", None)
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target: ast.expr = node.targets[0]
        elif isinstance(node, ast.AnnAssign) and value is not None:
            target = node.target
        else:
            continue
        if isinstance(value, ast.Call):
            out[(value.lineno, value.col_offset)] = ast.unparse(target)
    return out


# call position -> the name its result is assigned to, per file version
_TARGETS: FileIndex[Dict[Tuple[int, int], str]] = FileIndex(lambda data: True, _targets, {})
# Files that call spmd.reveal_comms (parsed only when their bytes mention it).
_ASKS: FileIndex[bool] = FileIndex(lambda data: b"reveal_comms" in data, lambda tree: True, False)
