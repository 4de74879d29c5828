"""The codemod on fresh-written inputs: golden outputs, idempotence, comments, the report, the CLI,
and the migrated files under mypy with the plugin."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tokenize
from contextlib import redirect_stdout
from pathlib import Path
from typing import List

import pytest

from migrate_paths import EXPECTED, INPUTS, PROGRAMS, ROOT, STANDINS
from spmd_mypy.migrate import migrate_source
from spmd_mypy.migrate.__main__ import main

FILES = (*PROGRAMS, "unconverted")


def _comments(code: str) -> List[str]:
    return [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type == tokenize.COMMENT]


@pytest.mark.parametrize("name", FILES)
def test_golden(name: str) -> None:
    got = migrate_source((INPUTS / f"{name}.py").read_text(), path=f"{name}.py")
    assert got.code == (EXPECTED / f"{name}.py").read_text()


@pytest.mark.parametrize("name", FILES)
def test_idempotent(name: str) -> None:
    once = (EXPECTED / f"{name}.py").read_text()
    again = migrate_source(once)
    assert again.code == once
    assert again.converted == again.annotated == 0


@pytest.mark.parametrize("name", FILES)
def test_comments_kept(name: str) -> None:
    source = (INPUTS / f"{name}.py").read_text()
    before = _comments(source)
    assert before, "each input has comments"
    after = _comments(migrate_source(source).code)
    assert sorted(after) == sorted(before)


def test_counts() -> None:
    """Every helper call of the four programs is converted; the annotations the rule allows."""
    got = {n: migrate_source((INPUTS / f"{n}.py").read_text()) for n in PROGRAMS}
    assert {n: (r.converted, r.annotated, len(r.notes)) for n, r in got.items()} == {
        "megatron_mlp": (8, 4, 0),
        "neox_mlp": (8, 1, 0),
        "nanotron_mlp": (6, 0, 0),  # group expressions: the axis name is not known, no annotation
        "picotron_mlp": (3, 3, 0),
    }


REPORT = [
    "29: copy_to_tensor_model_parallel_region: not converted: called with *args or **kwargs: "
    "the arguments are not known statically",
    "30: gather_from_sequence_parallel_region: not converted: tensor_parallel_output_grad= is a non-literal "
    "value: the typed call depends on it (write True or False)",
    "31: gather_from_sequence_parallel_region: not converted: use_global_buffer=True has no typed "
    "equivalent (only its default)",
    "32: gather_from_sequence_parallel_region: not converted: seq_dim= is not an int literal: "
    "the sharded dim is not known statically",
    "33: MyAllReduce.apply: not converted: an autograd Function this codemod does not know: its result is "
    "untyped; replace it with the typed call it equals, or annotate the function that calls it",
    "34: LinearWithAsyncAllReduce.apply: not converted: a fused linear with its own backward all-reduce: "
    "write convert(x, axis, src=I, dst=R) before an F.linear",
    "35: all_to_all: not converted: ragged all_to_all: write spmd.all_to_all(x, axis, src=V, dst=V, "
    "split_sizes=(in, out))",
    "36: reduce_from_tensor_model_parallel_region: not converted: a comment inside its arguments would be "
    "lost: move it out of the call",
    "40: scatter_to_tensor_model_parallel_region: not converted: keyword argument bogus= is not a "
    "parameter of the helper",
    "45: copy_to_tensor_model_parallel_region: not converted: referenced, not called: convert its calls by hand",
]


def test_report_and_cli(tmp_path: Path) -> None:
    """Diff by default (file untouched), --check exits 1, --write rewrites, then --check passes."""
    target = tmp_path / "unconverted.py"
    shutil.copy(INPUTS / "unconverted.py", target)
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([str(tmp_path)]) == 0
    text = out.getvalue()
    assert target.read_text() == (INPUTS / "unconverted.py").read_text()
    assert "+        spmd.all_reduce(x, \"tp\", src=P, dst=I),  # converted\n" in text
    notes = [line for line in text.splitlines() if ": not converted: " in line]
    assert notes == [f"{target}:{line}" for line in REPORT]
    assert text.splitlines()[-1] == "1 calls converted, 0 annotations added; 1 files would change; 10 not converted"
    with redirect_stdout(io.StringIO()):
        assert main(["--check", str(target)]) == 1
        assert main(["--write", str(target)]) == 0
        assert main(["--check", str(target)]) == 0
    assert target.read_text() == (EXPECTED / "unconverted.py").read_text()


def test_axis_option() -> None:
    src = "from megatron.mpu import copy_to_model_parallel_region as f\n\ndef g(x):\n    return f(x)\n"
    got = migrate_source(src, axis="model")
    assert got.code == (
        "import spmd_mypy as spmd\nfrom spmd_mypy import I, R\n\n"
        'def g(x):\n    return spmd.convert(x, "model", src=I, dst=R)\n'
    )


def test_name_collisions() -> None:
    """A file that already uses `spmd`, `I` or `S` gets the qualified spellings."""
    src = (
        "from megatron.core import tensor_parallel as tp\n\nspmd = 1\nI = 2\n\n"
        "def g(x):\n    return tp.scatter_to_tensor_model_parallel_region(x)\n"
    )
    got = migrate_source(src)
    assert 'spmd_mypy.convert(x, "tp", src=spmd_mypy.I, dst=S(-1))' in got.code
    assert "import spmd_mypy\n" in got.code and "from spmd_mypy import S\n" in got.code


def _mypy_ini(cache: Path) -> str:
    return "\n".join(
        [
            "[mypy]",
            "python_version = 3.11",
            "plugins = spmd_mypy.plugin",
            f"mypy_path = {ROOT / 'stubs' / 'torch-spmd'}:{ROOT}:{STANDINS}",
            "allow_redefinition = True",
            "show_error_codes = True",
            f"cache_dir = {cache / 'cache'}",
            # The nanotron-style program passes plain ProcessGroups; naming them as
            # axes (spmd.Axis, README "Process groups as mesh axes") is the user's
            # next edit, which the codemod does not make: its group calls are
            # spmd-group errors until then, and not what this test checks.
            "[mypy-nanotron_mlp]",
            "disable_error_code = spmd-group",
            "[mypy-spmd_mypy.*]",
            "follow_imports = silent",
            # The Megatron-style module's group may be None (the default tp group):
            # the codemod wrote `g if g is not None else "tp"`, checked on tp once
            # the attribute is named as the group of tp.
            "[spmd_mypy]",
            "groups = megatron_mlp.ParallelMLP.tp_group: tp, mutant.ParallelMLP.tp_group: tp",
            "",
        ]
    )


def test_migrated_files_pass_mypy(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    """One mypy run (plugin in strict mode): the migrated programs are clean, and a copy of one
    with a wrong src is reported at that line (the plugin does check these files)."""
    cache_root = getattr(request.config, "cache", None)
    base = Path(cache_root.mkdir("spmd_migrate_mypy")) if cache_root is not None else tmp_path_factory.mktemp("mypy")
    work = tmp_path_factory.mktemp("migrated")
    for name in PROGRAMS:
        shutil.copy(EXPECTED / f"{name}.py", work / f"{name}.py")
    good = (EXPECTED / "megatron_mlp.py").read_text()
    wrong_line = 'return spmd.all_reduce(partial, "tp", src=P, dst=I)'
    assert wrong_line in good
    (work / "mutant.py").write_text(good.replace("def leave_row(partial: Annotated[Tensor, Spmd(tp=P)])",
                                                 "def leave_row(partial: Annotated[Tensor, Spmd(tp=R)])"))
    line = next(i for i, text in enumerate(good.splitlines(), 1) if wrong_line in text)
    ini = base / "mypy.ini"
    ini.write_text(_mypy_ini(base))
    env = dict(os.environ, SPMD_MYPY_STRICT="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ini), *sorted(str(p) for p in work.glob("*.py"))],
        capture_output=True, text=True, cwd=work, env=env, timeout=600,
    )
    errors = [ln for ln in proc.stdout.splitlines() if ": error:" in ln]
    assert len(errors) == 1 and errors[0].startswith(f"mutant.py:{line}: error: spmd.all_reduce on axis 'tp'"), (
        proc.stdout + proc.stderr
    )


def test_removed_imports_keep_the_layout() -> None:
    """Megatron's files (real code, d98e8a6): a parenthesized import that loses
    its last names keeps `)` on its own line, and the blank line before a
    removed import line stays (libcst's own visitor dropped both)."""
    src = (
        "import torch\n\n"
        "from megatron.core import tensor_parallel\n"
        "from megatron.core.tensor_parallel import (\n"
        "    ColumnParallelLinear,\n"
        "    gather_from_sequence_parallel_region,\n"
        ")\n\n\n"
        "def f(x):\n"
        "    return tensor_parallel.gather_from_tensor_model_parallel_region(x), "
        "gather_from_sequence_parallel_region(x), ColumnParallelLinear\n"
    )
    assert migrate_source(src).code == (
        "import torch\n\n"
        "from megatron.core.tensor_parallel import (\n"
        "    ColumnParallelLinear,\n"
        ")\n"
        "import spmd_mypy as spmd\n"
        "from spmd_mypy import I, R, S\n\n\n"
        "def f(x):\n"
        '    return spmd.all_gather(x, "tp", src=S(-1), dst=I), '
        'spmd.all_gather(x, "tp", src=S(0), dst=R), ColumnParallelLinear\n'
    )


def test_a_file_without_helpers_is_not_parsed_and_one_libcst_cannot_parse_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import libcst

    def refuse(code: str) -> None:
        raise AssertionError("parsed")

    with monkeypatch.context() as m:
        m.setattr(libcst, "parse_module", refuse)
        plain = "import torch\n\ndef f(x):\n    return torch.relu(x)\n"
        assert migrate_source(plain).code == plain
    broken = "from megatron.core.tensor_parallel import gather_from_sequence_parallel_region\ndef f(:\n    pass\n"
    got = migrate_source(broken, path="broken.py")
    assert got.code == broken and got.converted == 0
    assert [(n.path, n.what, n.why.split(" (")[0]) for n in got.notes] == [
        ("broken.py", "module", "libcst cannot parse it, nothing converted")
    ]
    assert got.notes[0].line in (2, 3)  # where libcst's parser says it failed


_PICOTRON_OWN = (
    "import torch\n"
    "import torch.nn.functional as F\n\n\n"
    "class CopyToModelParallelRegion(torch.autograd.Function):\n"
    "    @staticmethod\n"
    "    def forward(ctx, x):\n"
    "        return x\n\n\n"
    "def linear_with_all_reduce(x, weight, bias):\n"
    "    input_parallel = CopyToModelParallelRegion.apply(x)\n"
    "    return F.linear(input_parallel, weight, bias)\n"
)


def test_a_style_module_converts_its_own_helpers() -> None:
    """Real picotron (59714b1): tp_communications.py applies its own Function
    in linear_with_all_reduce.  In that module (known by its path) the local
    name is the helper; elsewhere an unknown local Function is a note."""
    got = migrate_source(_PICOTRON_OWN, path="src/picotron/tensor_parallel/tp_communications.py")
    assert got.converted == 1 and got.notes == []
    assert '    input_parallel = spmd.convert(x, "tp", src=I, dst=R)\n' in got.code
    elsewhere = migrate_source(_PICOTRON_OWN, path="mine/tp_communications.py")
    assert elsewhere.converted == 0 and elsewhere.code == _PICOTRON_OWN
    assert [(n.line, n.what) for n in elsewhere.notes] == [(12, "CopyToModelParallelRegion.apply")]
    # A helper's own definition in its module is no reference to it.
    mappings = "def copy_to_tensor_model_parallel_region(input_, group=None):\n    return input_\n"
    assert migrate_source(mappings, path="megatron/core/tensor_parallel/mappings.py").notes == []
    # The helpers' implementation (nanotron's primitives: Functions whose
    # backward applies each other, helpers applying them) is left as it is.
    primitives = (
        "import torch\n\n\n"
        "class DifferentiableIdentity(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad_output):\n"
        "        return DifferentiableAllReduceSum.apply(grad_output, ctx.group), None\n\n\n"
        "class DifferentiableAllReduceSum(torch.autograd.Function):\n"
        "    pass\n\n\n"
        "def differentiable_identity(tensor, group=None):\n"
        "    return DifferentiableIdentity.apply(tensor, group)\n"
    )
    path = "src/nanotron/parallel/tensor_parallel/distributed_differentiable_primitives.py"
    untouched = migrate_source(primitives, path=path)
    assert untouched.code == primitives and untouched.converted == 0 and untouched.notes == []


def test_picotron_linear_with_all_reduce_is_reported() -> None:
    """A fused copy-and-linear has no single typed call: a note says what to write."""
    src = (
        "from picotron.tensor_parallel.tp_communications import linear_with_all_reduce\n\n\n"
        "def f(x, w, b):\n"
        "    return linear_with_all_reduce(x, w, b)\n"
    )
    got = migrate_source(src, path="layer.py")
    assert got.code == src
    assert [(n.line, n.what, n.why) for n in got.notes] == [(
        5, "linear_with_all_reduce",
        "a linear whose input enters the region (identity forward, all-reduce backward): "
        "write F.linear(spmd.convert(x, axis, src=I, dst=R), weight, bias)",
    )]


def test_the_helpers_own_module_reports_nothing_of_its_implementation() -> None:
    """Real gpt-neox (ea7aefd8): megatron/mpu/mappings.py defines each helper
    as the `.apply` of a private Function.  Those calls are the helpers'
    implementation, in a helper the table converts or in one it leaves alone
    (copy_to_expert_model_parallel_region); elsewhere such a call is a note."""
    mappings = (
        "import torch\n\n\n"
        "class _CopyToModelParallelRegion(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, input_):\n"
        "        return input_\n\n\n"
        "class _CopyToExpertModelParallelRegion(torch.autograd.Function):\n"
        "    pass\n\n\n"
        "def copy_to_model_parallel_region(input_):\n"
        "    return _CopyToModelParallelRegion.apply(input_)\n\n\n"
        "def copy_to_expert_model_parallel_region(input_, tokens_per_expert):\n"
        "    return _CopyToExpertModelParallelRegion.apply(input_, tokens_per_expert)\n"
    )
    own = migrate_source(mappings, path="gpt-neox/megatron/mpu/mappings.py")
    assert own.code == mappings and own.converted == 0 and own.notes == []
    elsewhere = migrate_source(mappings, path="mine/mappings.py")
    assert [(n.line, n.what) for n in elsewhere.notes] == [
        (15, "_CopyToModelParallelRegion.apply"), (19, "_CopyToExpertModelParallelRegion.apply"),
    ]


def test_a_function_applied_inside_another_function_is_reported_outside_the_helper_modules() -> None:
    """Real torchtitan (b5bcd76, distributed/linear.py): a Function applied
    inside another Function's method of a user module stays a note; only a
    style's own module keeps its implementation quiet."""
    src = (
        "import torch\n\n\n"
        "class Inner(torch.autograd.Function):\n"
        "    pass\n\n\n"
        "class Outer(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        return Inner.apply(x)\n"
    )
    got = migrate_source(src, path="torchtitan/distributed/linear.py")
    assert [(n.line, n.what) for n in got.notes] == [(11, "Inner.apply")]


_RELATIVE = (
    "from .mappings import copy_to_model_parallel_region, reduce_from_model_parallel_region\n"
    "from .. import mpu\n\n\n"
    "def f(x):\n"
    "    return reduce_from_model_parallel_region(copy_to_model_parallel_region(x))\n\n\n"
    "def g(x):\n"
    "    return mpu.copy_to_model_parallel_region(x)\n"
)


def test_relative_imports_resolve_against_the_files_directories() -> None:
    """Real fairscale (146f160): nn/model_parallel/layers.py imports its helpers
    with `from .mappings import ...`, which libcst names `.mappings.<name>`;
    the file's directories say which package that is.  (Megatron-core's own
    tensor_parallel/layers.py does the same: its 8 calls were silently left.)"""
    got = migrate_source(_RELATIVE, path="repo/fairscale/nn/model_parallel/layers.py")
    assert got.converted == 2 and got.notes == []
    assert '    return spmd.all_reduce(spmd.convert(x, "tp", src=I, dst=R), "tp", src=P, dst=I)\n' in got.code
    assert "    return mpu.copy_to_model_parallel_region(x)\n" in got.code  # fairscale.nn.mpu: no such module
    # `from .. import mpu` one level up from megatron/model: gpt-neox's megatron.mpu
    neox = migrate_source(_RELATIVE, path="gpt-neox/megatron/model/layers.py")
    assert neox.converted == 1
    assert '    return spmd.convert(x, "tp", src=I, dst=R)\n' in neox.code
    # a package of another name: nothing resolves, nothing changes
    mine = migrate_source(_RELATIVE, path="mine/parallel/layers.py")
    assert mine.converted == 0 and mine.code == _RELATIVE
    # fairscale's helpers imported by their package's name
    absolute = "from fairscale.nn.model_parallel import gather_from_model_parallel_region as g\n\ny = g(x)\n"
    assert 'y = spmd.all_gather(x, "tp", src=S(-1), dst=I)\n' in migrate_source(absolute).code
