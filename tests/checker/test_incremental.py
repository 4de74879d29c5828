"""The plugin under a warm incremental cache and under the mypy daemon.

Each check runs mypy as users do (a subprocess with a config that loads the
plugin).  Between edits the tests wait more than a second: mypy and dmypy
notice an edit by size and whole-second mtime.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BUGGY = '''\
from typing import Annotated
import torch.nn.functional as F
from torch import Tensor
from spmd_mypy import Spmd, P

def router(scores: Annotated[Tensor, Spmd(tp=P)]) -> Tensor:
    return F.softmax(scores, dim=-1)
'''

FIXED = BUGGY.replace(
    "    return F.softmax(scores, dim=-1)",
    '    import spmd_mypy as spmd\n    from spmd_mypy import R\n'
    '    return F.softmax(spmd.all_reduce(scores, "tp", src=P, dst=R), dim=-1)',
)


def _project(tmp_path: Path) -> Path:
    (tmp_path / "mypy.ini").write_text(
        "[mypy]\nplugins = spmd_mypy.plugin\n"
        f"mypy_path = {ROOT / 'stubs' / 'torch-spmd'}:{ROOT}\n"
        "allow_redefinition = True\n"
    )
    (tmp_path / "model.py").write_text(BUGGY)
    return tmp_path


def _edit(path: Path, text: str) -> None:
    time.sleep(1.1)
    path.write_text(text)


def _run(args: list, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MYPYPATH"}
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env, timeout=600)


def _errors(out: subprocess.CompletedProcess) -> list:
    return [line for line in out.stdout.splitlines() if ": error:" in line]


def test_warm_cache_keeps_the_verdict_and_sees_edits(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    mypy = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", ".cache", "model.py"]
    cold = _run(mypy, proj)
    assert [e.split(":")[1] for e in _errors(cold)] == ["7"], cold.stdout + cold.stderr
    assert "[spmd-op]" in cold.stdout
    warm = _run(mypy, proj)
    assert _errors(warm) == _errors(cold), warm.stdout
    _edit(proj / "model.py", FIXED)
    fixed = _run(mypy, proj)
    assert fixed.returncode == 0 and not _errors(fixed), fixed.stdout + fixed.stderr


def test_daemon_reports_the_new_result_after_an_edit(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    dmypy = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(proj / ".dmypy.json")]
    run = dmypy + ["run", "--", "--config-file", "mypy.ini", "--cache-dir", ".cache", "model.py"]
    try:
        first = _run(run, proj)
        assert [e.split(":")[1] for e in _errors(first)] == ["7"], first.stdout + first.stderr
        _edit(proj / "model.py", FIXED)
        second = _run(run, proj)
        assert not _errors(second), second.stdout + second.stderr
        assert "Success" in second.stdout
        _edit(proj / "model.py", BUGGY)
        third = _run(run, proj)
        assert [e.split(":")[1] for e in _errors(third)] == ["7"], third.stdout
    finally:
        _run(dmypy + ["stop"], proj)


def test_plugin_never_imports_torch() -> None:
    code = "import sys, spmd_mypy.plugin; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


USER = '''\
from typing import Annotated
from torch import Tensor
from spmd_mypy import Spmd, S, V, P
import helper
from aliases import Act

def scaled(x: Annotated[Tensor, Spmd(dp=S(0))]) -> Annotated[Tensor, Spmd(dp=S(0))]:
    return x * helper.size()

def through_alias(x: Act) -> Act:
    y: Act = x * helper.size()
    return y

def wrong(x: Annotated[Tensor, Spmd(dp=P)]) -> Annotated[Tensor, Spmd(dp=V)]:
    return x

import torch
from spmd_mypy import I

def squashed(x: Annotated[Tensor, Spmd(dp=I)]) -> Annotated[Tensor, Spmd(dp=P)]:
    return torch.special.expit(x)
'''

ALIASES = '''\
from typing import Annotated
from torch import Tensor
from spmd_mypy import Spmd, S
Act = Annotated[Tensor, Spmd(dp=S(0), tp=S(1))]
'''


def test_a_module_made_stale_by_a_dependency_keeps_per_axis_returns(tmp_path: Path) -> None:
    # mypy re-parses a cached module whose dependency changed its interface
    # without calling get_additional_deps; the per-axis return check must
    # still apply there (else: false [return-value] errors on correct code),
    # and calls of torch's untyped modules must still be typed.
    proj = _project(tmp_path)
    (proj / "model.py").unlink()
    (proj / "helper.py").write_text("def size() -> int:\n    return 2\n")
    (proj / "aliases.py").write_text(ALIASES)
    (proj / "user.py").write_text(USER)
    mypy = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", ".cache",
            "user.py", "helper.py", "aliases.py"]
    expected = [
        "user.py:15: error: Returned value is P on axis 'dp' where V is expected",
        # a torch.special call: wrapped by the same rewrite (plugin/untyped.py)
        "user.py:21: error: Returned value is I on axis 'dp' where P is expected",
    ]
    for round_ in range(2):
        out = _run(mypy, proj)
        got = [e.split(" expected: ")[0] + " expected" for e in _errors(out)]
        assert got == expected, (round_, out.stdout + out.stderr)
        _edit(proj / "helper.py", (proj / "helper.py").read_text() + f"def more{round_}() -> int:\n    return 1\n")
    out = _run(mypy, proj)
    assert [e.split(" expected: ")[0] + " expected" for e in _errors(out)] == expected, out.stdout + out.stderr




SPECS = """\
from typing import Final
from spmd_mypy import R, V, Spmd

ACT: Final = Spmd(tp=V)
"""

SPEC_USER = """\
from typing import Annotated
from torch import Tensor
import spmd_mypy as spmd
from spmd_mypy import Spmd, R
from specs import ACT

def f(x: Annotated[Tensor, Spmd(tp=R)]) -> None:
    spmd.assert_spmd(x, ACT)
"""


def test_a_warm_run_sees_the_new_value_of_an_imported_final_spec(tmp_path: Path) -> None:
    # The value of `ACT: Final = Spmd(...)` is no part of the mypy type of
    # ACT (Spmd), so an edit of the value alone left user.py fresh in the
    # cache, keeping the old verdict; the specs' digest is in specs.py's
    # interface now (spec_argument.final_specs_digest).
    proj = _project(tmp_path)
    (proj / "model.py").unlink()
    (proj / "specs.py").write_text(SPECS)
    (proj / "user.py").write_text(SPEC_USER)
    mypy = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", ".cache", "user.py"]
    wrong = ["user.py:8: error: spmd.assert_spmd on axis 'tp': x is R, not V"]
    for round_ in range(2):  # cold, then warm: the same verdict
        out = _run(mypy, proj)
        assert [e.split(";")[0] for e in _errors(out)] == wrong, (round_, out.stdout + out.stderr)
    _edit(proj / "specs.py", SPECS.replace("Spmd(tp=V)", "Spmd(tp=R)"))
    out = _run(mypy, proj)
    assert out.returncode == 0 and not _errors(out), out.stdout + out.stderr
    _edit(proj / "specs.py", SPECS)
    out = _run(mypy, proj)
    assert [e.split(";")[0] for e in _errors(out)] == wrong, out.stdout + out.stderr



def test_a_warm_run_sees_the_new_member_of_an_imported_enum_alias(tmp_path: Path) -> None:
    # `TP = Axis.TP` is typed Axis whatever the member: the alias statements
    # are in the module's digest too, so an edit of the member re-checks users.
    proj = _project(tmp_path)
    (proj / "model.py").unlink()
    (proj / "axes.py").write_text('import enum\n\nclass Axis(enum.StrEnum):\n    TP = "tp"\n    DP = "dp"\n')
    (proj / "names.py").write_text("from axes import Axis\n\nTP = Axis.TP\n")
    (proj / "user.py").write_text(
        "import torch\nimport spmd_types as spmd\nfrom names import TP\n\n"
        "def f(x: torch.Tensor) -> None:\n"
        '    spmd.assert_type(x, {"tp": spmd.R})\n'
        "    spmd.assert_type(x, {TP: spmd.P})\n"
    )
    mypy = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", ".cache", "user.py"]
    wrong = ["user.py:7: error: spmd_types.assert_type on axis 'tp': x is R, not P"]
    for round_ in range(2):  # cold, then warm
        out = _run(mypy, proj)
        assert [e.split(";")[0] for e in _errors(out)] == wrong, (round_, out.stdout + out.stderr)
    _edit(proj / "names.py", "from axes import Axis\n\nTP = Axis.DP\n")  # x has no dp yet: P there is fine
    out = _run(mypy, proj)
    assert out.returncode == 0 and not _errors(out), out.stdout + out.stderr


ALIAS_USER = '''\
from typing import Annotated
from torch import Tensor
from spmd_mypy import Spmd, S
from aliases import Act

def keep(x: Act) -> Annotated[Tensor, Spmd(dp=S(0), tp=S(1))]:
    return x
'''


def test_daemon_rechecks_the_users_of_an_edited_alias(tmp_path: Path) -> None:
    # A reference to an alias of a carrier is the carrier itself
    # (_mypy.alias_reference); the alias is still recorded as used, so an
    # edit of the alias alone reaches its users, also when it stops being one.
    proj = _project(tmp_path)
    (proj / "model.py").unlink()
    (proj / "aliases.py").write_text(ALIASES)
    (proj / "user.py").write_text(ALIAS_USER)
    dmypy = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(proj / ".dmypy.json")]
    run = dmypy + ["run", "--", "--config-file", "mypy.ini", "--cache-dir", ".cache", "user.py", "aliases.py"]
    partial = ALIASES.replace("Spmd, S", "Spmd, S, P").replace("dp=S(0)", "dp=P")
    try:
        first = _run(run, proj)
        assert "Success" in first.stdout, first.stdout + first.stderr
        _edit(proj / "aliases.py", partial)
        second = _run(run, proj)
        assert [e.split(": error: ")[1][:48] for e in _errors(second)] == [
            "Returned value is P on axis 'dp' where S(0) is e"
        ], second.stdout + second.stderr
        assert _errors(second)[0].startswith("user.py:7:"), second.stdout
        _edit(proj / "aliases.py", ALIASES)
        third = _run(run, proj)
        assert "Success" in third.stdout, third.stdout + third.stderr
        # no longer an alias but a class: mypy's own verdict, no crash
        _edit(proj / "aliases.py", "class Act:\n    pass\n")
        fourth = _run(run, proj)
        assert "Traceback" not in fourth.stdout + fourth.stderr, fourth.stdout + fourth.stderr
        assert [e.split(":")[1] for e in _errors(fourth)] == ["7"], fourth.stdout + fourth.stderr
        assert "[return-value]" in fourth.stdout, fourth.stdout
    finally:
        _run(dmypy + ["stop"], proj)


NAMES_ONLY = '''\
import torch
from spmd_types import all_reduce, assert_type, no_typecheck, P, R, V
import helper


def f(x: torch.Tensor) -> torch.Tensor:
    assert_type(x, {"tp": V})
    with no_typecheck():
        y = x * helper.size()
    reveal_type(y)
    return all_reduce(x, "tp", src=P, dst=R)
'''


def test_a_stale_module_importing_names_from_spmd_types_keeps_its_regions(tmp_path: Path) -> None:
    # The no_typecheck region's values are wrapped in calls through a name the
    # rewrite binds to spmd_types (the file never imports the module itself).
    # Re-parsed from a stale cache, the rewrite runs during semantic analysis,
    # after the imports: the name must still be bound (it once was not:
    # `Name "_spmd_types_" is not defined` at line 9 and y of type Any).
    proj = _project(tmp_path)
    (proj / "model.py").unlink()
    (proj / "helper.py").write_text("def size() -> int:\n    return 2\n")
    (proj / "user.py").write_text(NAMES_ONLY)
    mypy = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", ".cache", "user.py", "helper.py"]
    expected = [
        'user.py:10: note: Revealed type is "spmd_phantom.SpmdTensor[Any]"',
        "user.py:11: error: spmd.all_reduce on axis 'tp': src=P, but x is V there",
    ]
    for round_ in range(3):  # cold, then twice re-parsed from a stale cache
        out = _run(mypy, proj)
        got = [line.split(";")[0] for line in out.stdout.splitlines() if line.startswith("user.py:")]
        assert got == expected, (round_, out.stdout + out.stderr)
        _edit(proj / "helper.py", (proj / "helper.py").read_text() + f"def more{round_}() -> int:\n    return 1\n")


LOCAL = '''\
from typing import Annotated
from torch import Tensor
import spmd_mypy as spmd
from spmd_mypy import Spmd, PartitionSpec as PS

X = Annotated[Tensor, Spmd(spec=PS("dp", None))]
W = Annotated[Tensor, Spmd(spec=PS(None, "dp"))]

def f(x: X, w: W) -> None:
    y = x + w
'''


def test_daemon_sees_code_made_global_by_an_edit(tmp_path: Path) -> None:
    """global_mode remembers, per check of a file, that the file has no global
    scope; the daemon's check after the edit that adds one is a new check."""
    proj = _project(tmp_path)
    (proj / "model.py").write_text(LOCAL)
    dmypy = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(proj / ".dmypy.json")]
    run = dmypy + ["run", "--", "--config-file", "mypy.ini", "--cache-dir", ".cache", "model.py"]
    try:
        first = _run(run, proj)
        assert first.returncode == 0 and not _errors(first), first.stdout + first.stderr
        _edit(proj / "model.py", LOCAL.replace("def f(", "@spmd.global_spmd\ndef f("))
        second = _run(run, proj)
        assert [e.split(":")[1] for e in _errors(second)] == ["11"], second.stdout + second.stderr
        assert "[spmd-global]" in second.stdout
    finally:
        _run(dmypy + ["stop"], proj)


NAMED = "from spmd_mypy import V as T\n"
NAME_USER = '''\
from typing import Annotated
from torch import Tensor
from spmd_mypy import Spmd
from names import T


def f(x: Annotated[Tensor, Spmd(tp=T)]) -> None:
    reveal_type(x)
'''


def test_daemon_reads_an_annotation_again_when_a_name_in_it_changes_meaning(tmp_path: Path) -> None:
    # A decoded annotation is reused while the names it looked up resolve the
    # same (decoding.decode_annotation): here `T` comes to mean R in another
    # module, the annotation's text unchanged.
    proj = _project(tmp_path)
    (proj / "model.py").unlink()
    (proj / "names.py").write_text(NAMED)
    (proj / "user.py").write_text(NAME_USER)
    dmypy = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(proj / ".dmypy.json")]
    run = dmypy + ["run", "--", "--config-file", "mypy.ini", "--cache-dir", ".cache", "user.py", "names.py"]
    try:
        first = _run(run, proj)
        assert "Literal['tp=V']" in first.stdout, first.stdout + first.stderr
        _edit(proj / "names.py", "from spmd_mypy import R as T\n")
        second = _run(run, proj)
        assert "Literal['tp=R']" in second.stdout, second.stdout + second.stderr
        _edit(proj / "names.py", "T = 3\n")
        third = _run(run, proj)
        assert "Malformed SPMD annotation" in third.stdout, third.stdout + third.stderr
    finally:
        _run(dmypy + ["stop"], proj)


TWICE = '''\
from typing import Annotated
from torch import Tensor
from spmd_mypy import Spmd, V, R


def f(x: Annotated[Tensor, Spmd(tp=V)], y: Annotated[Tensor, Spmd(tp=V)]) -> None:
    reveal_type(x)
    reveal_type(y)
'''


def test_daemon_builds_the_carriers_of_an_edited_file_anew(tmp_path: Path) -> None:
    # The analyzer builds a carrier's literal once per tree and text
    # (_mypy.carrier_in_analyzer): both annotations read the same, and an
    # edit of one of them changes its type only.
    proj = _project(tmp_path)
    (proj / "model.py").write_text(TWICE)
    dmypy = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(proj / ".dmypy.json")]
    run = dmypy + ["run", "--", "--config-file", "mypy.ini", "--cache-dir", ".cache", "model.py"]
    try:
        first = _run(run, proj)
        notes = [line for line in first.stdout.splitlines() if "Revealed type" in line]
        assert len(notes) == 2 and all("Literal['tp=V']" in n for n in notes), first.stdout + first.stderr
        _edit(proj / "model.py", TWICE.replace("y: Annotated[Tensor, Spmd(tp=V)]", "y: Annotated[Tensor, Spmd(tp=R)]"))
        second = _run(run, proj)
        notes = [line for line in second.stdout.splitlines() if "Revealed type" in line]
        assert len(notes) == 2, second.stdout + second.stderr
        assert "Literal['tp=V']" in notes[0] and "Literal['tp=R']" in notes[1], second.stdout
    finally:
        _run(dmypy + ["stop"], proj)


FUNCTIONS = '''\
import torch
import spmd_types as spmd


class QK(torch.autograd.Function):
    @staticmethod
    def spmd_typecheck(*, x, wq):
        return spmd.rules.einsum("tk,ak->ta", x, wq)

    @staticmethod
    def forward(ctx, x: torch.Tensor, wq: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x @ wq.T


class Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def typecheck_forward(x: torch.Tensor) -> torch.Tensor:
        spmd.assert_type(x, {"tp": spmd.V})
        out = Gather.apply(x)
        spmd.assert_type(out, {"tp": spmd.V})
        return out

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:
        return g
'''

APPLIES = '''\
import torch
import spmd_types as spmd
from fns import QK, Gather


def f(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
    spmd.assert_type(x, {"tp": spmd.V})
    reveal_type(Gather.apply(x))
    spmd.assert_type(w, {"tp": spmd.S(0)})
    spmd.assert_type(y, {"tp": spmd.R})
    reveal_type(QK.apply(y, w))
'''


def test_a_function_module_is_checked_each_run_so_warm_types_as_cold(tmp_path: Path) -> None:
    # torchtitan's dist_gemm.py applies Functions that linear.py defines.  A
    # module mypy loads from its cache keeps no function bodies, so the
    # typecheck hooks could not be read there (once an internal error, then
    # an unknown result with a note).  Such a module's cache entry is never
    # fresh (report_config_data): a warm run checks it again and types the
    # calls as the cold run did; a module that only applies them stays cached.
    proj = _project(tmp_path)
    (proj / "model.py").unlink()
    (proj / "fns.py").write_text(FUNCTIONS)
    (proj / "user.py").write_text(APPLIES)
    (proj / "other.py").write_text(APPLIES.replace("reveal_type(", "print("))
    mypy = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", ".cache", "user.py", "fns.py",
            "other.py"]
    typed = [
        "user.py:8: note: Revealed type is \"spmd_phantom.SpmdTensor[Literal['tp=V']]\"",
        "user.py:11: note: Revealed type is \"spmd_phantom.SpmdTensor[Literal['tp=S(1)']]\"",
    ]
    cold = _run(mypy, proj)
    assert [line for line in cold.stdout.splitlines() if line.startswith("user.py:")] == typed, cold.stdout + cold.stderr
    _edit(proj / "user.py", APPLIES + "# edited\n")
    warm = _run(mypy + ["-v"], proj)
    assert [line for line in warm.stdout.splitlines() if line.startswith("user.py:")] == typed, warm.stdout + warm.stderr
    assert "Metadata abandoned for fns: plugin configuration differs" in warm.stderr, warm.stderr
    abandoned = [line for line in warm.stderr.splitlines() if "Metadata abandoned for" in line]
    assert len(abandoned) == 2, abandoned  # user.py, edited, and fns.py; other.py, which imports fns, is not
    assert "Metadata fresh for other" in warm.stderr, warm.stderr


def test_daemon_started_on_a_warm_cache_reads_function_hooks(tmp_path: Path) -> None:
    # dmypy started with --use-fine-grained-cache loads modules from mypy's
    # cache: the module of the Functions is checked at start all the same,
    # so an edit of a module applying them is typed.
    proj = _project(tmp_path)
    (proj / "model.py").unlink()
    (proj / "fns.py").write_text(FUNCTIONS)
    (proj / "user.py").write_text(APPLIES)
    args = ["--config-file", "mypy.ini", "--cache-dir", ".cache", "user.py", "fns.py"]
    cold = _run([sys.executable, "-m", "mypy", "--cache-fine-grained", *args], proj)
    assert "SpmdTensor[Literal['tp=V']]" in cold.stdout, cold.stdout + cold.stderr
    dmypy = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(proj / ".dmypy.json")]
    try:
        _run(dmypy + ["start", "--", "--use-fine-grained-cache", *args[:4]], proj)
        _edit(proj / "user.py", APPLIES + "# edited\n")
        out = _run(dmypy + ["check", "user.py", "fns.py"], proj)
        reveals = [line.split("Revealed type is ")[1] for line in out.stdout.splitlines() if "Revealed type" in line]
        assert reveals == [
            "\"spmd_phantom.SpmdTensor[Literal['tp=V']]\"", "\"spmd_phantom.SpmdTensor[Literal['tp=S(1)']]\""
        ], out.stdout + out.stderr
    finally:
        _run(dmypy + ["stop"], proj)


def test_daemon_reads_an_edited_function_hook_in_another_module(tmp_path: Path) -> None:
    # The hooks kept by class (typecheck_hooks._KEPT, spmd_types_rules._KEPT)
    # are checked against the hook's node: an edit of the hook's module makes
    # new nodes, read anew, so the user module sees the edited types.
    proj = _project(tmp_path)
    (proj / "model.py").unlink()
    (proj / "fns.py").write_text(FUNCTIONS)
    (proj / "user.py").write_text(APPLIES)
    dmypy = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(proj / ".dmypy.json")]
    run = dmypy + ["run", "--", "--config-file", "mypy.ini", "--cache-dir", ".cache", "user.py", "fns.py"]

    def reveals(out: subprocess.CompletedProcess) -> list:
        return [line.split("Revealed type is ")[1] for line in out.stdout.splitlines() if "Revealed type" in line]

    try:
        first = _run(run, proj)
        assert reveals(first) == [
            "\"spmd_phantom.SpmdTensor[Literal['tp=V']]\"", "\"spmd_phantom.SpmdTensor[Literal['tp=S(1)']]\""
        ], first.stdout + first.stderr
        _edit(proj / "fns.py", FUNCTIONS.replace('spmd.assert_type(out, {"tp": spmd.V})', 'spmd.assert_type(out, {"tp": spmd.P})'))
        second = _run(run, proj)
        assert "Traceback" not in second.stdout + second.stderr, second.stdout + second.stderr
        assert reveals(second)[0] == "\"spmd_phantom.SpmdTensor[Literal['tp=P']]\"", second.stdout + second.stderr
    finally:
        _run(dmypy + ["stop"], proj)


ALIAS_VALUES = '''\
from typing import Annotated
import torch
from spmd_mypy import Spmd, R, V
from dep import helper

TensorT = torch.Tensor
Count = Annotated[str, Spmd(tp=R)]
Act = Annotated[TensorT, Spmd(tp=V)]

def f(x: Act) -> None:
    reveal_type(x)
    helper()
'''


def test_alias_values_read_again_when_a_dependency_changes(tmp_path: Path) -> None:
    """An Spmd(...) beside an alias of Tensor or a non-tensor in an alias's
    value is read by a rewrite before analysis; a module that mypy re-parses
    because a dependency's interface changed gets the same verdict as a cold
    run, and so does the run after it (the module is parsed anew each run)."""
    proj = _project(tmp_path)
    (proj / "model.py").write_text(ALIAS_VALUES)
    (proj / "dep.py").write_text("def helper() -> int:\n    return 1\n")
    mypy = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", ".cache", "model.py", "dep.py"]
    runs = [_run(mypy, proj)]
    _edit(proj / "dep.py", "def helper() -> str:\n    return 'a'\n")
    runs += [_run(mypy, proj), _run(mypy, proj)]
    for out in runs:
        assert [e.split(":")[1] for e in _errors(out)] == ["7"], out.stdout + out.stderr
        assert "annotates str" in out.stdout
        assert "Revealed type is \"spmd_phantom.SpmdTensor[Literal['tp=V']]\"" in out.stdout, out.stdout


TRUSTED_CLASS = '''\
from typing import Any
import torch
from torch import Tensor
import spmd_mypy as spmd
from spmd_mypy import Spmd, I, R, V
from dep import helper

@spmd.trusted(in_types=(Spmd(tp=I),), out_types=Spmd(tp=R))
class Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        helper()
        return x
'''

TRUSTED_CLASS_USER = '''\
from typing import Annotated
from torch import Tensor
from spmd_mypy import Spmd, V
from function import Copy

def f(v: Annotated[Tensor, Spmd(tp=V)]) -> None:
    reveal_type(Copy.apply(v))
'''


def test_trusted_class_typed_again_when_a_dependency_changes(tmp_path: Path) -> None:
    """`@spmd.trusted(...)` above an autograd Function types its apply
    through a rewrite before analysis.  A caller in another module keeps the
    verdict of a cold run when the Function's module is re-parsed because
    its dependency changed, and when the caller alone is checked again (the
    Function's module from the cache)."""
    proj = _project(tmp_path)
    (proj / "model.py").write_text(TRUSTED_CLASS_USER)
    (proj / "function.py").write_text(TRUSTED_CLASS)
    (proj / "dep.py").write_text("def helper() -> int:\n    return 1\n")
    files = ["model.py", "function.py", "dep.py"]
    mypy = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", ".cache", *files]
    runs = [_run(mypy, proj)]
    _edit(proj / "dep.py", "def helper() -> str:\n    return 'a'\n")
    runs.append(_run(mypy, proj))
    _edit(proj / "model.py", TRUSTED_CLASS_USER + "# edited\n")
    runs.append(_run(mypy, proj))
    for out in runs:
        assert [e.split(":")[:2] for e in _errors(out)] == [["model.py", "7"]], out.stdout + out.stderr
        assert "[spmd-arg]" in out.stdout
        assert "Revealed type is \"spmd_phantom.SpmdTensor[Literal['tp=R']]\"" in out.stdout, out.stdout


FINAL_SPECS = '''\
from typing import Final
from spmd_mypy import R, S, Spmd

COLUMN: Final = Spmd(tp=S(0))
'''

FINAL_SPEC_USER = '''\
from typing import Annotated
from torch import Tensor
import spmd_mypy as spmd
from specs import COLUMN

def f(a: Annotated[Tensor, COLUMN]) -> None:
    reveal_type(a)
'''


# The same spec in a class's body (`Layout.COLUMN`), named through the class.
CLASS_FINAL_SPECS = FINAL_SPECS.replace("COLUMN:", "class Layout:\n    COLUMN:")
CLASS_FINAL_SPEC_USER = FINAL_SPEC_USER.replace("import COLUMN", "import Layout").replace(
    "Tensor, COLUMN]", "Tensor, Layout.COLUMN]"
)


@pytest.mark.parametrize(
    "specs, user", [(FINAL_SPECS, FINAL_SPEC_USER), (CLASS_FINAL_SPECS, CLASS_FINAL_SPEC_USER)], ids=["module", "class"]
)
def test_annotation_naming_a_final_spec_follows_an_edit_of_its_value(tmp_path: Path, specs: str, user: str) -> None:
    """`Annotated[Tensor, COLUMN]` with COLUMN a Final spec of another module
    (at its top level, or in a class's body: `Layout.COLUMN`) is read from
    that module's source (the user's file never writes Spmd); an edit of the
    value alone gives the importer's next run the new type."""
    proj = _project(tmp_path)
    (proj / "model.py").write_text(user)
    (proj / "specs.py").write_text(specs)
    mypy = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", ".cache", "model.py", "specs.py"]
    cold = _run(mypy, proj)
    assert "Revealed type is \"spmd_phantom.SpmdTensor[Literal['tp=S(0)']]\"" in cold.stdout, cold.stdout + cold.stderr
    _edit(proj / "specs.py", specs.replace("tp=S(0)", "tp=R"))
    warm = _run(mypy, proj)
    assert "Revealed type is \"spmd_phantom.SpmdTensor[Literal['tp=R']]\"" in warm.stdout, warm.stdout + warm.stderr
