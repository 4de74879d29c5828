"""The communication report of a function: from the collectives the checker
typed in it (comm_sites.py), the primitive steps each call runs in forward
and in backward (vocab/collectives.py's `plan` and `backward`, the rows the
runtime runs), the bytes each step moves as a formula (vocab/comm_volume.py),
and the redundant pairs.

Sizes: each call's formulas are in n(value), the element count on one rank
of the call's input as written; a step after one that grew or shrank the
tensor (a gather, a scatter, a slice) carries the power of the axis size.  A
backward step works on the gradient of the call's output, so its formula
carries the forward's growth too: the backward reduce_scatter of
`all_gather(w, "dp", src=S(0), dst=R)` receives (dp-1)/dp of dp * n(w).

Redundant pairs, on one axis (group), where the second step works on the
first one's result: an all_reduce followed by a convert that slices (one
reduce_scatter does both and receives half the bytes), and a gather followed
by a slice or a scatter that undoes it.  The second call works on the first
one's result when its input is that call or the name that call's result was
assigned to (the last such assignment before it in the function); in
backward the pairs run the other way round.

A site with a phase of its own (comm_sites.GRADIENT_SYNC: a sum the
gradient-sync contract's `spmd.sync_grads(model, "dp")` runs on one
parameter's gradient, plugin/gradsync.py) runs its steps in that phase
only, after backward, on the gradient of the parameter it names; the report
prints such phases after backward.  Uses no mypy API itself (sites are
plain data).
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..vocab.collectives import Step, backward, plan
from ..vocab.comm_volume import COMMUNICATING, Volume, grown, runtime_volume, step_volume
from ..vocab.localtype import kind
from ..vocab.pipeline import P2P_OPS, p2p_step
from .comm_sites import P2P, PHASE_COLLECTIVE, Site

__all__ = [
    "Entry",
    "Redundant",
    "FunctionReport",
    "configurations",
    "function_report",
    "report_text",
    "LEGEND",
    "UNKNOWN_GRAD",
]

LEGEND = (
    "bytes each rank receives (ring algorithms, vocab/comm_volume.py); n(x): elements of x on one rank, "
    "isz: bytes per element of its dtype, an axis name: its size"
)


class Entry(NamedTuple):
    site: Site
    phase: str  # "forward", "backward", UNKNOWN_GRAD or a site's own phase (GRADIENT_SYNC)
    step: Step
    volume: Volume

    @property
    def communicates(self) -> bool:
        return self.step.op in COMMUNICATING or bool(self.volume.runtime)

    def text(self) -> str:
        s = self.site
        where = s.axes[0] if len(s.axes) == 1 else "(" + ", ".join(s.axes) + ")"
        back = self.phase in ("backward", UNKNOWN_GRAD)
        of = f"grad of {s.value}" if back or s.phase else s.value
        origin = f" [backward of {s.op}({s.src}->{s.dst})]" if back else f" [{s.op}]" if s.phase else ""
        return f"line {s.line}: {self.step} over {where} on {of}{origin}: {self.volume.text()}"


class Redundant(NamedTuple):
    first: Entry
    second: Entry
    why: str

    def text(self) -> str:
        return f"redundant in {self.first.phase}, lines {self.first.site.line} and {self.second.site.line}: {self.why}"


class FunctionReport(NamedTuple):
    file: str
    function: str
    phases: Dict[str, List[Entry]]
    redundant: List[Redundant]
    configuration: str = ""  # a configured function's report is one configuration's


# The backward of a call whose input's type the checker does not know (a
# parameter's .grad from module.parameters()): it runs if the input has a gradient.
UNKNOWN_GRAD = "backward if its input has a gradient (input untyped)"

def _steps(site: Site) -> Tuple[Step, ...]:
    axis = site.axes if len(site.axes) > 1 else site.axes[0]
    return plan(PHASE_COLLECTIVE.get(site.phase, site.op), site.src, site.dst, axis=axis, expert_mode=True)


Size = Tuple[str, Dict[str, int]]  # n(name) times prod(axis ** exp)


PARTITIONED = "partitioned."
_SPLITS = "all_to_all with per-rank splits the routing decides"


def forward_entries(site: Site, size: Optional[Size] = None) -> List[Entry]:
    """The steps of one call in forward (a site with a phase of its own: in that phase)."""
    name, exps = size if size is not None else (site.value, {})
    if site.op.startswith(P2P):  # a message between pipeline stages (vocab/pipeline.py)
        step = p2p_step(site.op[len(P2P):], False)
        return [Entry(site, "forward", step, step_volume(step, site.axes, name, exps))]
    phase = site.phase or "forward"
    if site.op.startswith(PARTITIONED):  # seed 004: sizes known at run time only
        return [Entry(site, phase, Step(site.op, site.src, site.dst), runtime_volume(name, _SPLITS))]
    out = []
    for step in _steps(site):
        out.append(Entry(site, phase, step, step_volume(step, site.axes, name, exps)))
        exps = grown(exps, step, site.axes)
    return out


def backward_entries(site: Site, size: Optional[Size] = None) -> List[Entry]:
    """The backward of one call, in the order it runs, on the gradient of its output
    (none for an input without gradient, or for a site with a phase of its own)."""
    if site.nograd or site.phase:
        return []
    name, exps = size if size is not None else (site.value, {})
    if site.op.startswith(P2P):  # the gradient comes back the way the value went
        step = p2p_step(site.op[len(P2P):], True)
        return [Entry(site, "backward", step, step_volume(step, site.axes, name, exps))]
    if site.op.startswith(PARTITIONED):  # the pieces move back the way they came
        return [Entry(site, "backward", Step(site.op, site.dst, site.src), runtime_volume(name, _SPLITS))]
    steps = _steps(site)
    for step in steps:
        exps = grown(exps, step, site.axes)
    out = []
    for step in backward(steps):
        out.append(Entry(site, "backward", step, step_volume(step, site.axes, name, exps)))
        exps = grown(exps, step, site.axes)
    return out


def _received_name(site: Site) -> Optional[str]:
    """A receive between pipeline stages has no input: its size is named after
    the name its result is assigned to (`h = spmd.recv_prev(...)`: n(h))."""
    op = P2P_OPS.get(site.op[len(P2P):]) if site.op.startswith(P2P) else None
    return site.result if op is not None and not op.sends else None


def sizes(sites: Sequence[Site]) -> Dict[Site, Size]:
    """Each call's input size, named after the innermost input of a chain of nested
    calls that keep the size (`all_reduce(reinterpret(t, ...), ...)`: n(t))."""
    out: Dict[Site, Size] = {}
    at = {(s.line, s.column): s for s in sites}

    def size(s: Site) -> Size:
        if s not in out:
            out[s] = (_received_name(s) or s.value, {})
            inner = at.get(s.value_call) if s.value_call is not None else None
            if inner is not None and not inner.op.startswith((PARTITIONED, P2P)):
                name, exps = size(inner)
                for step in _steps(inner):
                    exps = grown(exps, step, inner.axes)
                if not exps:
                    out[s] = (name, exps)
        return out[s]

    for s in sites:
        size(s)
    return out


def producers(sites: Sequence[Site]) -> Dict[Site, Site]:
    """For each call whose input is another call's result: that call (the call
    written as its input, else the last earlier call assigned to its input's name)."""
    at = {(s.line, s.column): s for s in sites}
    out: Dict[Site, Site] = {}
    for k, s in enumerate(sites):
        inner = at.get(s.value_call) if s.value_call is not None else None
        named = (e for e in reversed(sites[:k]) if e.result is not None and e.result == s.value)
        found = inner if inner is not None else next(named, None)
        if found is not None:
            out[s] = found
    return out


def _why(a: Step, b: Step) -> Optional[str]:
    kb = (kind(b.src), kind(b.dst))
    slices = b.op == "convert" and kb[0] in "RI" and kb[1] in "VS"
    if a.op == "all_reduce" and slices:
        return (
            f"all_reduce({a.src}->{a.dst}) then convert({b.src}->{b.dst}) keeps a slice of the sum; "
            f"reduce_scatter(P->{b.dst}) does both and receives half the bytes"
        )
    if a.op == "all_gather" and (slices or b.op == "reduce_scatter"):
        return f"all_gather({a.src}->{a.dst}) then {b.op}({b.src}->{b.dst}) scatters what was just gathered"
    return None


def _pairs(chain: Sequence[Entry]) -> List[Redundant]:
    out = []
    for a, b in zip(chain, chain[1:]):
        why = _why(a.step, b.step) if a.site.axes == b.site.axes else None
        if why is not None:
            out.append(Redundant(a, b, why))
    return out


def configurations(function: str, sites: Sequence[Site]) -> List[str]:
    """The configurations `function` was checked in that recorded a site, in
    order of their first site ("" for a function without configurations)."""
    return list(dict.fromkeys(s.configuration for s in sites if s.function == function))


def function_report(file: str, function: str, sites: Sequence[Site], configuration: str = "") -> FunctionReport:
    """The report of `function` (of one configuration of a configured one)."""
    sites = [s for s in sites if s.function == function and s.configuration == configuration]
    own = [s for s in sites if s.phase]
    sites = [s for s in sites if not s.phase]
    size = sizes(sites)
    fwd = {s: forward_entries(s, size[s]) for s in sites}
    bwd = {s: backward_entries(s, size[s]) for s in sites}
    redundant: List[Redundant] = []
    for s in sites:
        redundant += _pairs(fwd[s]) + _pairs(bwd[s])
    for s, p in producers(sites).items():
        if fwd[p] and fwd[s]:
            redundant += _pairs([fwd[p][-1], fwd[s][0]])
        if bwd[s] and bwd[p]:
            redundant += _pairs([bwd[s][-1], bwd[p][0]])
    phases: Dict[str, List[Entry]] = {
        "forward": [e for s in sites for e in fwd[s]],
        "backward": [e for s in reversed(sites) if s.typed for e in bwd[s]],
        UNKNOWN_GRAD: [e for s in reversed(sites) if not s.typed for e in bwd[s]],
    }
    if not phases[UNKNOWN_GRAD]:
        del phases[UNKNOWN_GRAD]
    for s in own:
        for entry in forward_entries(s):
            phases.setdefault(entry.phase, []).append(entry)
    redundant.sort(key=lambda r: (r.first.phase, r.first.site.line, r.second.site.line))
    return FunctionReport(file, function, phases, redundant, configuration)


def total_text(entries: Sequence[Entry]) -> str:
    moving = list(dict.fromkeys(e.volume.text() for e in entries if e.communicates and e.volume.runtime))
    moving = [e.volume.text() for e in entries if e.communicates and not e.volume.runtime] + moving
    return " + ".join(moving) if moving else "0"


def report_text(report: FunctionReport, label: str) -> List[str]:
    """The report's lines: the function, each phase's communicating steps, totals, pairs."""
    lines = [f"{label}::{report.function}" + (f" [{report.configuration}]" if report.configuration else "")]
    for phase, entries in report.phases.items():
        moving = [e for e in entries if e.communicates]
        lines.append(f"  {phase}: {len(moving)} collective(s), {total_text(entries)} bytes")
        lines += [f"    {e.text()}" for e in moving]
    lines += [f"  {r.text()}" for r in report.redundant]
    return lines
