"""JAX's names (vocab/aliases.py): one table, the same objects, messages reworded."""

from __future__ import annotations

import spmd_mypy
from spmd_mypy.vocab.aliases import ALIASES, VOCABULARIES, reword
from spmd_mypy.vocab.localtype import I, P, R, V, grad_type


def test_the_names_are_the_letters() -> None:
    assert (spmd_mypy.Reduced, spmd_mypy.Unreduced, spmd_mypy.Invariant, spmd_mypy.Varying) == (R, P, I, V)
    assert spmd_mypy.Reduced is R and spmd_mypy.Unreduced is P


def test_reduced_unreduced_gradient_duality() -> None:
    # Seed 001: the cotangent of Reduced is Unreduced and back; I and V are their own.
    assert grad_type(ALIASES["Reduced"]) is ALIASES["Unreduced"]
    assert grad_type(ALIASES["Unreduced"]) is ALIASES["Reduced"]
    assert grad_type(ALIASES["Invariant"]) is ALIASES["Invariant"]
    assert grad_type(ALIASES["Varying"]) is ALIASES["Varying"]


def test_reword_letters_prose_and_idempotence() -> None:
    msg = ("F.softmax on axis 'tp' (scores is P): a Partial operand enters a nonlinear op. "
           "Hint: spmd.all_reduce(scores, 'tp', src=P, dst=R); reinterpret takes R->I, V->P")
    out = reword(msg, "jax")
    assert out == ("F.softmax on axis 'tp' (scores is Unreduced): an Unreduced operand enters a "
                   "nonlinear op. Hint: spmd.all_reduce(scores, 'tp', src=Unreduced, dst=Reduced); "
                   "reinterpret takes Reduced->Invariant, Varying->Unreduced")
    assert reword(out, "jax") == out
    assert reword(msg, "letters") == msg


def test_reword_leaves_quoted_axes_shards_and_identifiers() -> None:
    msg = "x is S(0) on axis 'P' where V_proj is P; P(x) and spmd.R and Spmd(tp=I)"
    assert reword(msg, "jax") == (
        "x is S(0) on axis 'P' where V_proj is Unreduced; P(x) and spmd.Reduced and Spmd(tp=Invariant)"
    )


def test_every_vocabulary_names_every_letter_or_none() -> None:
    for name, table in VOCABULARIES.items():
        assert set(table["letters"]) in (set(), {"R", "I", "V", "P"}), name


def test_config_reads_vocabulary(tmp_path, capsys) -> None:
    from spmd_mypy.plugin import config

    ini = tmp_path / "mypy.ini"
    ini.write_text("[mypy]\n[spmd_mypy]\nvocabulary = JAX\n")
    assert config.load(str(ini)).vocabulary == "jax"
    toml = tmp_path / "pyproject.toml"
    toml.write_text('[tool.spmd_mypy]\nvocabulary = "jax"\n')
    assert config.load(str(toml)).vocabulary == "jax"
    ini.write_text("[mypy]\n[spmd_mypy]\nvocabulary = shardy\n")
    assert config.load(str(ini)).vocabulary == "letters"
    assert "vocabulary = 'shardy' is unknown" in capsys.readouterr().err
