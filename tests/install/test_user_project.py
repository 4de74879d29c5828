"""What a user gets: this checkout installed into a fresh environment, and
mypy, pyright and pyrefly run from a project of the user's own, outside the
clone, with no PYTHONPATH or MYPYPATH.

Each case makes a virtual environment in pytest's temp dir, installs the
checkout with `--no-deps` (editable, as the README says, or regular), writes
a tiny project there and type-checks it.  torch, mypy, hatchling and the other
checkers come from the environment running the tests: a line in the new
environment's site-packages puts that environment's site-packages after its
own (plain directories: their .pth files, such as this checkout's own
editable install, are not read), so the checkout's copy under test is the
only spmd_mypy the new environment sees.  (`--system-site-packages` would
not do: run from a virtual environment, as in CI, it exposes the base
interpreter's packages, not that environment's.)
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path
from typing import Dict, List, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]

MODEL = '''\
from typing import Annotated

from torch import Tensor

import spmd_mypy as spmd
from spmd_mypy import P, R, Spmd, V

Act = Annotated[Tensor, Spmd(tp=V)]
Out = Annotated[Tensor, Spmd(tp=R)]


def row_parallel(h: Act, w: Act) -> Out:
    out = spmd.reinterpret(h @ w.T, "tp", src=V, dst=P)
    out = spmd.all_reduce(out, "tp", src=P, dst=R)
    return out


def forgot_the_reduction(h: Act, w: Act) -> Out:
    return h @ w.T
'''
# forgot_the_reduction's return: V on tp where R is declared (the one error).
WRONG_LINE = 19

# Read by pyright and pyrefly only: there the carrier is a plain Tensor.
PROBE = '''\
from typing import assert_type

from torch import Tensor

from model import Act, row_parallel


def probe(h: Act, w: Act) -> None:
    assert_type(h, Tensor)
    assert_type(row_parallel(h, w), Tensor)
'''

MYPY_INI = """\
[mypy]
plugins = spmd_mypy.plugin
allow_redefinition = True
"""

MYPY_SEES = (
    f"model.py:{WRONG_LINE}: error: Returned value is V on axis 'tp' where R is expected: the ranks hold "
    "different values where one value per 'tp' group is expected  [spmd-return]"
)
# Reported once, at the first annotated Tensor of the project (the alias Act).
NO_STUB = (
    "model.py:8: error: spmd-mypy: mypy cannot find the carrier stub package 'spmd_phantom'; install "
    "spmd-mypy into the environment mypy runs in (pip install spmd-mypy, or pip install -e <clone>), "
    "or add <clone>/stubs/torch-spmd to mypy_path. SPMD types are not checked until then  [spmd-setup]"
)


def _user_env() -> Dict[str, str]:
    """The environment a user's shell has: none of this suite's search paths."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "MYPYPATH", "PYTHONSAFEPATH"):
        env.pop(name, None)
    return env


def _run(args: List[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=_user_env(), capture_output=True, text=True, timeout=600)


def _make_env(where: Path) -> Path:
    """A fresh virtual environment that sees this test run's packages after its own."""
    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    own = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], where)
    outer = [p for p in site.getsitepackages() if Path(p).is_dir()]
    Path(own.stdout.strip(), "zz_test_run_packages.pth").write_text("\n".join(outer) + "\n")
    return python


def _install(python: Path, editable: bool) -> None:
    args = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q"]
    if importlib.util.find_spec("hatchling") is not None:  # in the test extras: no download
        args.append("--no-build-isolation")
    args += ["-e", str(ROOT)] if editable else [str(ROOT)]
    done = _run(args, ROOT.parent)
    assert done.returncode == 0, done.stdout + done.stderr


def _mypy(python: Path, project: Path) -> List[str]:
    done = _run([str(python), "-m", "mypy", "--cache-dir", str(project / ".mypy_cache"),
                 "--no-error-summary", "model.py"], project)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.stdout.splitlines()


class Installed(NamedTuple):
    kind: str  # "editable" or "regular"
    python: Path  # the environment's interpreter
    venv: Path
    project: Path  # the user's project: model.py, probe.py, mypy.ini


def _project(where: Path) -> Path:
    where.mkdir()
    (where / "model.py").write_text(MODEL)
    (where / "probe.py").write_text(PROBE)
    (where / "mypy.ini").write_text(MYPY_INI)
    return where


@pytest.fixture(scope="module", params=["editable", "regular"])
def installed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """This checkout installed into a fresh environment, and a user project beside it."""
    base = tmp_path_factory.mktemp(request.param)
    python = _make_env(base / "venv")
    _install(python, editable=request.param == "editable")
    return Installed(request.param, python, base / "venv", _project(base / "project"))


def test_the_environment_imports_the_installed_copy(installed: Installed) -> None:
    where = _run([str(installed.python), "-c", "import spmd_mypy; print(spmd_mypy.__file__)"], installed.project)
    found = Path(where.stdout.strip())
    if installed.kind == "editable":
        assert found == ROOT / "spmd_mypy" / "__init__.py", where.stdout + where.stderr
    else:
        assert installed.venv in found.parents, where.stdout + where.stderr


def test_mypy_in_a_user_project(installed: Installed) -> None:
    assert _mypy(installed.python, installed.project) == [MYPY_SEES]


def test_missing_carrier_stub_is_one_line(tmp_path: Path) -> None:
    """A regular install that lost its stub package: one line saying what to add."""
    python = _make_env(tmp_path / "venv")
    _install(python, editable=False)
    stub = next((tmp_path / "venv").glob("lib/python*/site-packages/spmd_phantom"))
    shutil.rmtree(stub)
    assert _mypy(python, _project(tmp_path / "project")) == [NO_STUB]


@pytest.mark.parametrize("checker", ["basedpyright", "pyrefly"])
def test_other_checkers_in_a_user_project(installed: Installed, checker: str) -> None:
    """pyright and pyrefly resolve both packages and see the carrier as a Tensor."""
    if importlib.util.find_spec(checker) is None:
        pytest.skip(f"{checker} is not installed (it is in the test extras)")
    project = installed.project
    if checker == "basedpyright":
        (project / "pyrightconfig.json").write_text('{"typeCheckingMode": "standard"}\n')
        args = ["-m", "basedpyright", "--pythonpath", str(installed.python), "model.py", "probe.py"]
    else:
        (project / "pyrefly.toml").write_text("")
        args = ["-m", "pyrefly", "check", "--python-interpreter-path", str(installed.python), "--summary=none",
                "model.py", "probe.py"]
    done = _run([sys.executable, *args], project)
    assert done.returncode == 0, done.stdout + done.stderr


MEGATRON = '''\
from typing import Annotated

from torch import Tensor

from megatron.core.tensor_parallel import copy_to_tensor_model_parallel_region
from spmd_mypy import I, Spmd


def region(x: Annotated[Tensor, Spmd(tp=I)]) -> None:
    reveal_type(copy_to_tensor_model_parallel_region(x))
'''


def test_megatron_stubs_found_without_configuration(installed: Installed) -> None:
    """The megatron-stubs package is found beside an installed megatron-core
    (no mypy_path, no ignore_missing_imports), and the plugin types the call."""
    if importlib.util.find_spec("megatron.core") is None:
        pytest.skip("megatron-core is not installed (it is in the test extras)")
    (installed.project / "megatron_model.py").write_text(MEGATRON)
    done = _run([str(installed.python), "-m", "mypy", "--cache-dir", str(installed.project / ".mypy_cache"),
                 "--no-error-summary", "megatron_model.py"], installed.project)
    assert done.stdout.splitlines() == [
        "megatron_model.py:10: note: Revealed type is \"spmd_phantom.SpmdTensor[Literal['tp=R']]\""
    ], done.stdout + done.stderr
