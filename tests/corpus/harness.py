"""Runs the checker on the realcode corpus and on its seeded mutations.

Shared by tests/corpus/test_realcode.py and bench/bench_realcode.py.  Two
mypy runs in all, each in a child process (mypy.api, exit without freeing
mypy's heap): the clean corpus, and one batch holding every mutation as its
own package (`mut_<id>`: the mutated file plus the corpus files it imports,
unchanged), so one invocation checks them all.  Imports neither torch nor mypy.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS = HERE / "realcode"
KNOWN_GAPS = HERE / "known_gaps.txt"
sys.path.insert(0, str(HERE))

from realcode.bugs import MUTATIONS, Mutation  # noqa: E402

_ERROR = re.compile(r"^(?P<path>[^:]+\.py):(?P<line>\d+): error: (?P<msg>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$")
_IMPORT = re.compile(r"^from \.(\w+) import", re.M)
_CHILD = (
    "import json, os, sys\n"
    "from mypy import api\n"
    "result = api.run(sys.argv[1:])\n"
    "sys.stdout.write(json.dumps(result))\n"
    "sys.stdout.flush()\n"
    "os._exit(0)\n"
)


@dataclass(frozen=True)
class Error:
    file: str  # path relative to the checked root (e.g. "megatron_layers.py")
    line: int
    code: str
    message: str

    def key(self) -> str:
        return f"{self.file}:{self.line}: {self.code}"


def mypy_ini(cache_dir: Path, plugin: bool = True) -> str:
    stubs = ROOT / "stubs" / "torch-spmd"
    lines = ["[mypy]", "python_version = 3.11"]
    if plugin:
        lines.append("plugins = spmd_mypy.plugin")
    lines += [
        f"mypy_path = {stubs}:{ROOT}",
        "allow_redefinition = True",
        "show_error_codes = True",
        f"cache_dir = {cache_dir}",
        "[mypy-spmd_mypy.*]",
        "follow_imports = silent",
        # As a user of this codebase configures the checker (README): the
        # getters of the parallel state's groups name their axes, and the
        # default generator is seeded alike on the tp ranks (Megatron's
        # dropout outside the TP regions).
        "[spmd_mypy]",
        "groups = realcode.parallel_state.get_tensor_model_parallel_group: tp,",
        "    realcode.parallel_state.get_data_parallel_group: dp,",
        "    realcode.parallel_state.ProcessGroupManager.tp_group: tp,",
        "    realcode.parallel_state.ProcessGroupManager.dp_group: dp",
        "synced_rng = tp",
        "",
    ]
    return "\n".join(lines)


def _under(path: str, workdir: Path) -> str:
    """The path of a reported file relative to workdir (mypy may print it from another base)."""
    for base in (workdir, ROOT, Path.cwd()):
        candidate = (base / path).resolve()
        if candidate.exists():
            try:
                return str(candidate.relative_to(workdir))
            except ValueError:
                continue
    return path


def run_mypy(targets: Sequence[Path], workdir: Path, cache_dir: Path, plugin: bool = True) -> Tuple[List[Error], str]:
    """One mypy run; its errors with paths relative to workdir, and the raw report."""
    workdir, cache_dir = workdir.resolve(), cache_dir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    ini = cache_dir.parent / f"{cache_dir.name}.ini"  # beside the cache, never in the corpus
    ini.write_text(mypy_ini(cache_dir, plugin))
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, "--config-file", str(ini), *(str(t) for t in targets)],
        cwd=workdir, capture_output=True, text=True, timeout=1800,
    )
    try:
        out, err, status = json.loads(proc.stdout)
    except ValueError:
        raise RuntimeError(f"mypy did not finish (exit {proc.returncode}):\n{proc.stderr[-3000:]}") from None
    if status not in (0, 1) or "Traceback" in out + err:
        raise RuntimeError(f"mypy failed (exit {status}):\n{out[-3000:]}\n{err[-3000:]}")
    errors = []
    for text in out.splitlines():
        m = _ERROR.match(text)
        if m:
            errors.append(Error(_under(m["path"], workdir), int(m["line"]), m["code"] or "", m["msg"]))
    return errors, out


def check_clean(workdir: Path, cache_dir: Path, plugin: bool = True) -> List[Error]:
    """Errors on the unedited corpus, paths relative to the corpus package."""
    errors, _ = run_mypy([CORPUS], CORPUS.parent, cache_dir, plugin)
    prefix = CORPUS.name + "/"
    return [Error(e.file[len(prefix):] if e.file.startswith(prefix) else e.file, e.line, e.code, e.message)
            for e in errors]


def _deps(name: str, seen: Optional[Set[str]] = None) -> Set[str]:
    """The corpus modules `name` imports, transitively (by its relative imports)."""
    seen = set() if seen is None else seen
    for dep in _IMPORT.findall((CORPUS / name).read_text()):
        file = f"{dep}.py"
        if file not in seen:
            seen.add(file)
            _deps(file, seen)
    return seen


def write_mutants(batch: Path, mutations: Sequence[Mutation] = MUTATIONS) -> List[Path]:
    """One package per mutation under batch/: the mutated file and its corpus imports."""
    if batch.exists():
        shutil.rmtree(batch)
    packages = []
    for mut in mutations:
        pkg = batch / f"mut_{mut.id}"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        for name in _deps(mut.file) - {mut.file}:
            shutil.copyfile(CORPUS / name, pkg / name)
        (pkg / mut.file).write_text(mut.apply((CORPUS / mut.file).read_text()))
        packages.append(pkg)
    return packages


@dataclass(frozen=True)
class Outcome:
    mutation: Mutation
    status: str  # "caught" (an spmd error at the expected line), "elsewhere", "missed"
    new_errors: Tuple[Error, ...]  # errors of the mutated file absent from the clean run
    expected_line: int

    @property
    def code_matches(self) -> bool:
        return any(e.line == self.expected_line and e.code == self.mutation.code for e in self.new_errors)


def _shifted(clean: Sequence[Error], mut: Mutation) -> Set[Tuple[int, str, str]]:
    """The clean run's errors of the mutated file: a one-line mutation keeps line numbers."""
    return {(e.line, e.code, e.message) for e in clean if e.file == mut.file}


def check_mutants(batch: Path, cache_dir: Path, clean: Sequence[Error],
                  mutations: Sequence[Mutation] = MUTATIONS) -> List[Outcome]:
    batch = batch.resolve()
    packages = write_mutants(batch, mutations)
    errors, _ = run_mypy(packages, batch, cache_dir)
    outcomes = []
    for mut in mutations:
        expected = mut.expected_line((CORPUS / mut.file).read_text())
        mine = [e for e in errors if e.file == f"mut_{mut.id}/{mut.file}"]
        old = _shifted(clean, mut)
        new = tuple(e for e in mine if (e.line, e.code, e.message) not in old)
        if any(e.line == expected and e.code.startswith("spmd-") for e in mine):
            status = "caught"
        elif new:
            status = "elsewhere"
        else:
            status = "missed"
        outcomes.append(Outcome(mut, status, new, expected))
    return outcomes


def read_known_gaps(path: Path = KNOWN_GAPS) -> Tuple[List[Tuple[str, str]], Dict[str, Tuple[str, str]]]:
    """known_gaps.txt: the false alarms [("file:line: code", reason)] (a key may repeat) and
    the mutations not caught {id: (status, reason)}.

    Lines: `file:line: code -- reason` or `mutation <id> <elsewhere|missed> -- reason`; `#` comments.
    """
    alarms: List[Tuple[str, str]] = []
    mutants: Dict[str, Tuple[str, str]] = {}
    for raw in path.read_text().splitlines():
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        head, sep, reason = text.partition(" -- ")
        if not sep or not reason.strip():
            raise ValueError(f"{path.name}: every entry needs ' -- reason': {text!r}")
        if head.startswith("mutation "):
            ident, status = head[len("mutation "):].split()
            mutants[ident] = (status, reason.strip())
        else:
            alarms.append((head.strip(), reason.strip()))
    return alarms, mutants
