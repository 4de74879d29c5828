"""Check programs with mypy (one batched run) and run them on simulated ranks.

`draw_distinct` draws a deterministic sample of distinct programs from a
hypothesis strategy (every differential test starts there).
`check_programs` writes one module per program and runs mypy once over all
of them (mypy_batch.py).  `judge` runs one program forward and backward on 4
simulated ranks (fake process group + LocalTensorMode) and holds the result
against the meaning defined in meaning.py.  `tally` does both for a sample
and counts the verdicts (with another `judge` for programs run once per
flag assignment).
"""

from __future__ import annotations

import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import torch
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from torch import Tensor

from . import meaning as M
from .mypy_batch import MypyReport, check_batch
from .programs import Program
from .regressions import known_finding

# -- drawing a sample --------------------------------------------------------------------------


def draw_distinct(strategy: "st.SearchStrategy[Any]", n: int, seed_value: int = 0) -> List[Any]:
    """n programs with distinct sources, the same for the same seed (the
    suite's fixed sample is seed 0); generation only, no shrinking."""
    drawn: List[Any] = []

    @settings(
        max_examples=2 * n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(p: Any) -> None:
        drawn.append(p)

    seed(seed_value)(collect)()
    seen, out = set(), []
    for p in drawn:
        src = p.source()
        if src not in seen:
            seen.add(src)
            out.append(p)
    return out[:n]


# -- running one program ---------------------------------------------------------------------


@dataclass
class Outcome:
    verdict: str  # agree | unsound | runtime-error | no-reference | ill-shaped
    detail: str = ""


def _unflatten(like: M.Tree, flat: List[Tensor]) -> M.Tree:
    it = iter(flat)
    return M.tree_like(like, lambda x: next(it))


def _denotation(inp: Any, gen: torch.Generator) -> M.Tree:
    """A random denotation for an input: decode random per-rank tensors of its local shape."""
    grid = {r: torch.randn(inp.shape, generator=gen, dtype=torch.float64) for r in range(M.WORLD)}
    tree = M.decode(inp.types, grid, check=False)
    return M.tree_like(tree, lambda x: x.detach().clone().requires_grad_())


def _local(t: Tensor, rank: int) -> Tensor:
    lt = getattr(t, "_local_tensors", None)
    return t if lt is None else lt[rank]


def run_on_ranks(
    source: str, name: str, mesh: Any, in_grids: List[Mapping[int, Tensor]], seed: Mapping[int, Tensor]
) -> Tuple[Dict[int, Tensor], List[Dict[int, Tensor]]]:
    """Execute the program's source on 4 simulated ranks: per-rank output and input grads."""
    from torch.distributed._local_tensor import LocalTensorMode

    import spmd_mypy as spmd

    ns: Dict[str, Any] = {"__name__": name}
    exec(compile(source, f"<{name}>", "exec"), ns)  # noqa: S102 - generated test code
    fn = ns["program"]
    with LocalTensorMode(M.WORLD) as mode, spmd.set_mesh(mesh):
        xs = []
        for grid in in_grids:
            xs.append(mode.rank_map(lambda r, g=grid: g[r].detach().clone()).requires_grad_())
        y = fn(*xs)
        y.backward(mode.rank_map(lambda r: seed[r].detach().clone()))
        out = {r: _local(y, r).detach().clone() for r in range(M.WORLD)}
        grads = []
        for x in xs:
            g = x.grad
            grads.append(
                {r: (torch.zeros_like(_local(x, r)) if g is None else _local(g, r).clone()) for r in range(M.WORLD)}
            )
    return out, grads


def judge(program: Program, index: int, mesh: Any) -> Outcome:
    """Run one program on the ranks and hold it against its meaning."""
    gen = torch.Generator().manual_seed(1000 + index)
    in_types = {x.name: x.types for x in program.inputs}
    try:
        denot = {x.name: _denotation(x, gen) for x in program.inputs}
        noise = M.make_noise(2000 + index)
        grids = {n: M.embed(in_types[n], denot[n], noise) for n in in_types}
        out_ref = M.decode(program.out_types, M.run(program, grids), check=False)
    except M.NoReference as e:
        return Outcome("no-reference", str(e))
    except (M.Mismatch, RuntimeError, IndexError, ValueError) as e:
        return Outcome("ill-shaped", f"reference run: {type(e).__name__}: {e}")
    # the loss and its true gradient
    g_tree = M.random_tree(out_ref, gen)
    loss = sum((g * o).sum() for g, o in zip(M.leaves(g_tree), M.leaves(out_ref)))
    flat_in = [leaf for n in in_types for leaf in M.leaves(denot[n])]
    grads_flat = torch.autograd.grad(loss, flat_in, allow_unused=True) if loss.requires_grad else [None] * len(flat_in)
    grads_flat = [torch.zeros_like(x) if g is None else g for x, g in zip(flat_in, grads_flat)]
    ref_grads: Dict[str, M.Tree] = {}
    pos = 0
    for n in in_types:
        k = len(M.leaves(denot[n]))
        ref_grads[n] = _unflatten(denot[n], grads_flat[pos : pos + k])
        pos += k
    problems = []
    # a P input's meaning must not depend on how its sum is split
    if any("P" in t.values() for t in in_types.values()):
        other = M.meaning(program, in_types, program.out_types, denot, M.make_noise(3000 + index))
        if not M.trees_close(other, out_ref):
            problems.append("the output depends on how a P input's sum is split over the ranks")
    # the ranks
    seed = M.embed(M.grad_types(program.out_types), M.tree_like(g_tree, lambda t: t.detach()), M.make_noise(4000 + index))
    try:
        out, grads = run_on_ranks(
            program.source(), f"prog{index}", mesh,
            [{r: grids[n][r].detach() for r in range(M.WORLD)} for n in in_types],
            {r: seed[r] for r in range(M.WORLD)},
        )
    except Exception as e:  # noqa: BLE001 - every failure is reported with its kind
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return Outcome("runtime-error", last[:400])
    try:
        got = M.decode(program.out_types, out, check=True)
        if not M.trees_close(got, out_ref):
            problems.append("forward: the ranks' output does not decode to the meaning")
    except M.Mismatch as e:
        problems.append(f"forward: {e}")
    for k, n in enumerate(in_types):
        gt = M.grad_types(in_types[n])
        try:
            got_g = M.decode(gt, grads[k], check=True)
        except M.Mismatch as e:
            problems.append(f"gradient of {n} ({_fmt(in_types[n])}, grad {_fmt(gt)}): {e}")
            continue
        if not M.trees_close(got_g, ref_grads[n], rtol=1e-6):
            problems.append(f"gradient of {n} ({_fmt(in_types[n])}): differs from d loss / d {n}")
    if problems:
        return Outcome("unsound", "; ".join(problems))
    return Outcome("agree")


def _fmt(types: Mapping[str, str]) -> str:
    return ", ".join(f"{a}={t}" for a, t in types.items())


# -- the whole experiment ------------------------------------------------------------------------


@dataclass
class Tally:
    generated: int = 0
    accepted: int = 0
    rejected: int = 0
    agreeing: int = 0
    unsound: int = 0
    known: Counter = field(default_factory=Counter)  # unsound, under an open finding
    accepted_other: Counter = field(default_factory=Counter)  # runtime-error / no-reference / ill-shaped
    rejected_outcomes: Counter = field(default_factory=Counter)
    generator_disagrees: int = 0  # the generator's rules and the checker differ
    reject_codes: Counter = field(default_factory=Counter)
    findings: List[Tuple[int, str, str, str]] = field(default_factory=list)  # index, verdict, detail, source

    def line(self) -> str:
        other = ", ".join(f"{k} {v}" for k, v in sorted(self.accepted_other.items())) or "none"
        rej = ", ".join(f"{k} {v}" for k, v in sorted(self.rejected_outcomes.items()))
        codes = ", ".join(f"{k} {v}" for k, v in self.reject_codes.most_common())
        known = "".join(f" (+{v} under open finding {k})" for k, v in sorted(self.known.items()))
        return (
            f"generated {self.generated}, accepted {self.accepted}, rejected {self.rejected}, "
            f"agreeing {self.agreeing}, unsound {self.unsound}{known}; accepted but not run to a verdict: {other}; "
            f"rejected programs when run: {rej}; checker vs generator's rules: {self.generator_disagrees} "
            f"differ; rejection codes: {codes}"
        )


def check_programs(named: Mapping[str, Program], workdir: Path, cache_dir: Path) -> MypyReport:
    """One mypy run over every program, one module each (named by the key)."""
    return check_batch({k: p.source() for k, p in named.items()}, workdir, cache_dir)


Judge = Callable[[Any, int, Any], Outcome]


def tally(
    named: Mapping[str, Program], report: MypyReport, mesh: Any, run_rejected: bool = True,
    judge_one: Optional[Judge] = None,
) -> Tally:
    """Run every program on the ranks and count the verdicts (`judge_one`:
    how one program is judged, `judge` unless given)."""
    judge_one = judge_one or judge
    out = Tally(generated=len(named))
    for i, (key, p) in enumerate(named.items()):
        errs = report.errors.get(key, [])
        accepted = not errs
        if accepted != p.expect_ok:
            out.generator_disagrees += 1
        if not accepted:
            out.rejected += 1
            for _, code, _ in errs:
                out.reject_codes[code or "?"] += 1
            if run_rejected:
                out.rejected_outcomes[judge_one(p, i, mesh).verdict] += 1
            continue
        out.accepted += 1
        o = judge_one(p, i, mesh)
        if o.verdict == "agree":
            out.agreeing += 1
            continue
        if o.verdict == "unsound":
            known = known_finding(p.source())
            if known:
                out.known[known] += 1
                continue
            out.unsound += 1
        else:
            out.accepted_other[o.verdict] += 1
        out.findings.append((i, o.verdict, o.detail, p.source()))
    return out
