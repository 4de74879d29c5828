"""`python -m spmd_mypy.coverage PATHS`: the share of typed tensor expressions and the unchecked calls.

The expected counts are worked out by hand from the rules in
spmd_mypy/plugin/_mypy/typed_share.py (see the comments in SOURCE), not by the tool.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SOURCE = '''\
from typing import Annotated, Any, Optional, TypedDict

import torch
from torch import Tensor

from spmd_mypy import R, Spmd

Rep = Annotated[Tensor, Spmd(tp=R)]


def f(x: Rep, y: Tensor) -> None:
    a = x + x  # typed: x + x, x, x (the target a is not counted)
    b = y * 2  # untyped: y * 2, y (2 is no tensor)


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, t: Tensor) -> Tensor:
        return t  # untyped: t


def g(x: Rep) -> None:
    c = Fn.apply(x)  # typed: x; untyped: Fn.apply(x), an unchecked call


def h(z: Optional[Rep]) -> None:
    w = z  # typed: z (an Optional carrier)


class Batch(TypedDict):
    one: Tensor


def k(x: Rep) -> None:
    b = Batch(one=x)  # typed: x (the rewrite's keyword_item(x, Batch) around it is not counted)
'''
# typed: 3 (f) + 1 (g) + 1 (h) + 1 (k) = 6; untyped: 2 (f) + 1 (Fn.forward) + 1 (g) = 4.
APPLY_LINE = SOURCE.splitlines().index("    c = Fn.apply(x)  # typed: x; untyped: Fn.apply(x), an unchecked call") + 1


def _run(tmp_path: Path, *args: str) -> str:
    cache = ROOT / ".pytest_mypy" / "typed_share_cache"
    ini = tmp_path / "mypy.ini"
    ini.write_text(
        "[mypy]\npython_version = 3.11\nplugins = spmd_mypy.plugin\n"
        f"mypy_path = {ROOT / 'stubs' / 'torch-spmd'}:{ROOT}\nallow_redefinition = True\n"
        f"cache_dir = {cache}\n[mypy-spmd_mypy.*]\nfollow_imports = silent\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "spmd_mypy.coverage", "--config-file", str(ini), *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_share_and_unchecked_calls(tmp_path: Path) -> None:
    src = tmp_path / "sample.py"
    src.write_text(SOURCE)
    out = _run(tmp_path, str(src))
    m = re.search(r"sample\.py: (\S+) typed \((\d+) of (\d+) tensor expressions\); (\d+) unchecked calls", out)
    assert m is not None, out
    assert (m[1], int(m[2]), int(m[3]), int(m[4])) == ("60.0%", 6, 10, 1), out
    assert re.search(rf"sample\.py:{APPLY_LINE}: unchecked call Fn\.apply -> ", out), out
    assert "total: 60.0% typed (6 of 10 tensor expressions in 1 files)" in out, out


def test_without_paths_lists_the_op_tables() -> None:
    out = subprocess.run([sys.executable, "-m", "spmd_mypy.coverage"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0
    assert re.search(r"^torch\.nn\.functional: \d+ of \d+ classified", out.stdout, re.M), out.stdout


DIST_NN_SOURCE = '''\
from typing import Annotated

import torch.distributed as dist
import torch.distributed.nn.functional as dnnf
from torch import Tensor

import spmd_mypy as spmd
from spmd_mypy import P, Spmd


def f(x: Annotated[Tensor, Spmd(tp=P)], g: Annotated[dist.ProcessGroup, spmd.Axis("tp")], h: dist.ProcessGroup) -> None:
    a = dnnf.all_reduce(x, group=g)  # typed: all_reduce(P -> R)
    b = dnnf.all_reduce(x, op=dist.ReduceOp.MAX, group=g)  # unchecked: not the sum
    c = dnnf.broadcast(x, 0, group=g)  # unchecked: no typed collective
    d = dnnf.all_gather(x, group=h)  # unchecked: h names no axis (a tuple of tensors)
    e = dnnf.scatter([x, x], 0, group=g)  # unchecked: typed tensors inside a list
'''


def test_dist_nn_calls_listed_unchecked(tmp_path: Path) -> None:
    """torch.distributed.nn.functional imported under an alias: the calls the
    plugin cannot type (a note says so) are listed, the typed one is not."""
    src = tmp_path / "collectives.py"
    src.write_text(DIST_NN_SOURCE)
    out = _run(tmp_path, str(src))
    lines = DIST_NN_SOURCE.splitlines()
    listed = [int(n) for n in re.findall(r"collectives\.py:(\d+): unchecked call dnnf\.", out)]
    expected = [i + 1 for i, line in enumerate(lines) if "# unchecked" in line]
    assert listed == expected, out
    assert re.search(r"collectives\.py: \S+ typed \(\d+ of \d+ tensor expressions\); 4 unchecked calls", out), out


CALLABLE_SOURCE = '''\
from typing import Annotated, Callable

from torch import Tensor

import spmd_mypy as spmd
from spmd_mypy import Spmd, V


def helper(t: Tensor) -> Tensor: ...


def f(x: Annotated[Tensor, Spmd(tp=V)], act: Callable[[Tensor], Tensor], declared: spmd.Activation) -> None:
    a = act(x)  # unchecked, hinted: a Callable value
    b = helper(x)  # unchecked: a function without SPMD types, no hint
    c = declared(x)  # typed: an elementwise activation
'''


def test_a_callable_value_is_hinted_spmd_activation(tmp_path: Path) -> None:
    """An unchecked call of a value typed Callable says how to have it typed;
    the declared spmd.Activation is typed (not listed); a function is listed
    without the hint (its definition is there to annotate)."""
    src = tmp_path / "values.py"
    src.write_text(CALLABLE_SOURCE)
    out = _run(tmp_path, str(src))
    lines = CALLABLE_SOURCE.splitlines()
    act_line = next(i + 1 for i, line in enumerate(lines) if "a = act(x)" in line)
    helper_line = next(i + 1 for i, line in enumerate(lines) if "b = helper(x)" in line)
    assert re.search(
        rf"values\.py:{act_line}: unchecked call act -> \S+ \(a Callable value: declare it spmd\.Activation", out
    ), out
    assert re.search(rf"values\.py:{helper_line}: unchecked call helper -> \S+\n", out), out
    assert "unchecked call declared" not in out, out
    assert re.search(r"values\.py: \S+ typed \(\d+ of \d+ tensor expressions\); 2 unchecked calls", out), out
