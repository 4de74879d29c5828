"""The phantom carrier in stubs/torch-spmd behaves as DESIGN.md says, under real mypy."""

from __future__ import annotations

import textwrap
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[1]

SOURCE = '''
from typing import Literal
from torch import Tensor
from spmd_phantom import SpmdTensor

def wants_r(x: SpmdTensor[Literal["dp=R, tp=V"]]) -> Tensor:
    return x  # a carried tensor is a Tensor

def f(a: SpmdTensor[Literal["dp=R, tp=V"]], b: SpmdTensor[Literal["dp=R, tp=P"]]) -> None:
    c = [a]
    reveal_type(c[0])
    wants_r(a)
    wants_r(b)
'''


def test_phantom_carrier_keeps_the_literal_and_is_checked(tmp_path: Path) -> None:
    src = tmp_path / "use_phantom.py"
    src.write_text(textwrap.dedent(SOURCE))
    config = tmp_path / "mypy.ini"
    config.write_text(f"[mypy]\nmypy_path = {ROOT / 'stubs' / 'torch-spmd'}\n")
    out, err, _ = api.run(
        [
            str(src),
            "--config-file",
            str(config),
            "--no-error-summary",
            "--show-error-codes",
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
    )
    lines = [line.split(":", 1)[1] for line in out.strip().splitlines()]
    assert lines == [
        "11: note: Revealed type is \"spmd_phantom.SpmdTensor[Literal['dp=R, tp=V']]\"",
        '13: error: Argument 1 to "wants_r" has incompatible type '
        '"SpmdTensor[Literal[\'dp=R, tp=P\']]"; expected "SpmdTensor[Literal[\'dp=R, tp=V\']]"  '
        "[arg-type]",
    ], out + err
