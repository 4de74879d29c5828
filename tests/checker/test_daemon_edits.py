"""What the daemon carries from one version of an edited file to the next.

A module call's answer is remembered across edits (answers.remembered), and
a file's annotation index is carried over an edit that writes no type
(annotation_edits.carried).  Each test edits a file under a running dmypy
and holds the revealed types to what a fresh check says.
"""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

from tests.checker.test_incremental import (
    FINAL_SPEC_USER, FINAL_SPECS, TRUSTED_CLASS, TRUSTED_CLASS_USER, _edit, _project, _run,
)

MODULE = '''\
from typing import Annotated
from torch import Tensor, nn
import spmd_mypy as spmd
from spmd_mypy import Spmd, R, V


class Up(nn.Module):
    def forward(self, x: Annotated[Tensor, Spmd(tp=R)]) -> Annotated[Tensor, Spmd(tp=V)]:
        return spmd.convert(x, "tp", src=R, dst=V)


def use(layer: Up, x: Annotated[Tensor, Spmd(tp=R)]) -> None:
    reveal_type(layer(x))
'''

MODULE_EDITED = MODULE.replace(
    "-> Annotated[Tensor, Spmd(tp=V)]:\n        return spmd.convert(x, \"tp\", src=R, dst=V)",
    "-> Annotated[Tensor, Spmd(tp=R)]:\n        return x",
)


def _revealed(out: str) -> List[str]:
    return [ln.split("Revealed type is ")[1].strip('"') for ln in out.splitlines() if "Revealed type is" in ln]


def _lines(out: str) -> List[int]:
    return [int(ln.split(":")[1]) for ln in out.splitlines() if "Revealed type is" in ln]


@contextmanager
def _daemon(tmp_path: Path, files: Dict[str, str]) -> Iterator[Tuple[Path, Callable[[], subprocess.CompletedProcess]]]:
    """A project holding `files` (name -> text) under a dmypy: yields the
    project and a `dmypy run` of the files; the daemon is stopped after."""
    proj = _project(tmp_path)
    for name, text in files.items():
        (proj / name).write_text(text)
    dmypy = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(proj / ".dmypy.json")]
    run = dmypy + ["run", "--", "--config-file", "mypy.ini", "--cache-dir", ".cache", *files]
    try:
        yield proj, lambda: _run(run, proj)
    finally:
        _run(dmypy + ["stop"], proj)


def test_a_module_call_follows_an_edit_of_its_forward(tmp_path: Path) -> None:
    # the class stays the same object across the edit; its forward's
    # declared type is part of the remembered question
    with _daemon(tmp_path, {"model.py": MODULE}) as (proj, check):
        first = check()
        assert _revealed(first.stdout) == ["spmd_phantom.SpmdTensor[Literal['tp=V']]"], first.stdout + first.stderr
        _edit(proj / "model.py", MODULE_EDITED)
        second = check()
        assert _revealed(second.stdout) == ["spmd_phantom.SpmdTensor[Literal['tp=R']]"], second.stdout + second.stderr


ALIASES = """\
from typing import Annotated
from torch import Tensor
from spmd_mypy import Spmd, V

Out = Annotated[Tensor, Spmd(tp=V)]
"""

LAYER = """\
from typing import Annotated
from torch import Tensor, nn
import spmd_mypy as spmd
from spmd_mypy import Spmd, R
from aliases import Out


class Up(nn.Module):
    def forward(self, x: Annotated[Tensor, Spmd(tp=R)]) -> Out:
        return spmd.convert(x, "tp", src=R, dst=spmd.V)
"""

CALLER = """\
from typing import Annotated
from torch import Tensor
from spmd_mypy import Spmd, R
from layer import Up


def use(layer: Up, x: Annotated[Tensor, Spmd(tp=R)]) -> None:
    reveal_type(layer(x))
"""


def test_a_module_call_follows_an_edit_of_an_alias_its_forward_returns(tmp_path: Path) -> None:
    # the edit is in a third module: the class's module is analysed again
    # and its forward gets a new declared type, which the remembered
    # question holds by identity
    with _daemon(tmp_path, {"aliases.py": ALIASES, "layer.py": LAYER, "caller.py": CALLER}) as (proj, check):
        first = check()
        assert _revealed(first.stdout) == ["spmd_phantom.SpmdTensor[Literal['tp=V']]"], first.stdout + first.stderr
        _edit(proj / "aliases.py", ALIASES.replace("Spmd, V", "Spmd, P").replace("tp=V", "tp=P"))
        second = check()
        assert _revealed(second.stdout) == ["spmd_phantom.SpmdTensor[Literal['tp=P']]"], second.stdout + second.stderr


PARAMETER = """\
from typing import Annotated
from torch import Tensor
from spmd_mypy import Spmd, R, V


def take(x: Annotated[Tensor, Spmd(tp=R)]) -> None:
    pass


def give(h: Annotated[Tensor, Spmd(tp=V)]) -> None:
    take(h)
"""


def test_a_call_follows_an_edit_of_the_parameter_it_is_checked_against(tmp_path: Path) -> None:
    # the edited signature's parameter types are new objects; what the
    # signature hook computed from them is looked up by their value
    with _daemon(tmp_path, {"model.py": PARAMETER}) as (proj, check):
        first = check()
        wrong = "model.py:11: error: Argument \"x\" to \"take\" is V on axis 'tp' where R is expected"
        assert wrong in first.stdout, first.stdout
        _edit(proj / "model.py", PARAMETER.replace("x: Annotated[Tensor, Spmd(tp=R)]", "x: Annotated[Tensor, Spmd(tp=V)]"))
        second = check()
        assert "error" not in second.stdout, second.stdout
        _edit(proj / "model.py", PARAMETER)
        third = check()
        assert wrong in third.stdout, third.stdout


INDEXED = '''\
from typing import Annotated
from torch import Tensor
from spmd_mypy import Spmd, R, S, V


def f(x: Annotated[Tensor, Spmd(tp=V)]) -> None:
    y = x * 2.0
    reveal_type(y)


def g(
    w: Annotated[
        Tensor,
        Spmd(tp=S(0)),
    ],
) -> None:
    reveal_type(w)
'''


def test_an_edit_that_writes_no_type_keeps_the_annotations_in_their_new_places(tmp_path: Path) -> None:
    v, s0, s1 = (f"spmd_phantom.SpmdTensor[Literal['{t}']]" for t in ("tp=V", "tp=S(0)", "tp=S(1)"))
    with _daemon(tmp_path, {"model.py": INDEXED}) as (proj, check):
        first = check()
        assert _revealed(first.stdout) == [v, s0] and _lines(first.stdout) == [8, 17], first.stdout + first.stderr
        # two lines added above g: its annotation is carried two lines down
        _edit(proj / "model.py", INDEXED.replace("    y = x * 2.0\n", "    y = x * 2.0\n    y = y * 3.0\n    y = y + 1.0\n"))
        second = check()
        assert _revealed(second.stdout) == [v, s0] and _lines(second.stdout) == [10, 19], second.stdout + second.stderr
        # a line inside g's multi-line annotation: read again
        third_text = INDEXED.replace("        Spmd(tp=S(0)),", "        Spmd(tp=S(1)),")
        _edit(proj / "model.py", third_text)
        third = check()
        assert _revealed(third.stdout) == [v, s1] and _lines(third.stdout) == [8, 17], third.stdout + third.stderr


def test_a_call_of_a_trusted_functions_apply_follows_an_edit_of_its_decorator(tmp_path: Path) -> None:
    # the rewrite's apply attribute is typed by mypy, so the daemon's
    # dependencies re-check the caller in the other module, and the
    # decorator's removal gives the call back to forward
    files = {"function.py": TRUSTED_CLASS, "caller.py": TRUSTED_CLASS_USER, "dep.py": "def helper() -> int:\n    return 1\n"}
    with _daemon(tmp_path, files) as (proj, check):
        first = check()
        assert _revealed(first.stdout) == ["spmd_phantom.SpmdTensor[Literal['tp=R']]"], first.stdout + first.stderr
        assert "[spmd-arg]" in first.stdout
        _edit(proj / "function.py", TRUSTED_CLASS.replace("Spmd(tp=I)", "Spmd(tp=V)").replace("Spmd(tp=R)", "Spmd(tp=V)"))
        second = check()
        assert _revealed(second.stdout) == ["spmd_phantom.SpmdTensor[Literal['tp=V']]"], second.stdout + second.stderr
        assert "error" not in second.stdout
        _edit(proj / "function.py", TRUSTED_CLASS.replace("@spmd.trusted(in_types=(Spmd(tp=I),), out_types=Spmd(tp=R))\n", ""))
        third = check()
        assert _revealed(third.stdout) == ["spmd_phantom.SpmdTensor[Any]"], third.stdout + third.stderr


def test_an_annotation_naming_a_final_spec_follows_an_edit_of_its_value(tmp_path: Path) -> None:
    # the spec's type (Spmd) stays the same: the decoded annotation is not
    # kept across the edit, and the module digest re-checks the importer
    with _daemon(tmp_path, {"specs.py": FINAL_SPECS, "model.py": FINAL_SPEC_USER}) as (proj, check):
        first = check()
        assert _revealed(first.stdout) == ["spmd_phantom.SpmdTensor[Literal['tp=S(0)']]"], first.stdout + first.stderr
        _edit(proj / "specs.py", FINAL_SPECS.replace("tp=S(0)", "tp=R"))
        second = check()
        assert _revealed(second.stdout) == ["spmd_phantom.SpmdTensor[Literal['tp=R']]"], second.stdout + second.stderr
