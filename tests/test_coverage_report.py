"""The op coverage report enumerates torch and classifies from the tables."""

from __future__ import annotations

from spmd_mypy.coverage import coverage, main


def test_report_classifies_known_ops_and_lists_fallbacks(capsys) -> None:
    report = coverage()
    torch_fns, torch_fallback = report["torch"]
    tensor_methods, _ = report["Tensor"]
    assert torch_fns["matmul"] == "multilinear" and torch_fns["cat"] == "linear"
    assert tensor_methods["add_"] == "linear"  # in-place follows add's row
    assert tensor_methods["__matmul__"] == "multilinear"
    assert "exp" in torch_fallback  # not in a table: the nonlinear default
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.count("classified") == 3
