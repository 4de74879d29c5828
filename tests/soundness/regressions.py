"""Minimal programs the differential test found, kept as regression cases.

Each case is a Program (programs.py) with a status:

  "xfail"  the checker accepts it and the ranks disagree with its meaning: a
           plugin bug, open until fixed (the test is a strict xfail, so a fix
           shows up as XPASS and the case can then become "sound")
  "sound"  must hold now: rejected by the checker, or accepted and agreeing

The same findings, with their explanation, are in the lead's findings file
(/tmp/helpers/D_findings.md at the time of writing).
"""

from __future__ import annotations

from typing import NamedTuple, Tuple

from .programs import Input, Program, Stmt


class Regression(NamedTuple):
    id: str
    program: Program
    status: str  # "xfail" or "sound"
    reason: str


def _prog(inputs: Tuple[Input, ...], lines: Tuple[Stmt, ...], out: dict, prelude: str = "") -> Program:
    return Program(inputs, lines, lines[-1].name, out, expect_ok=False, prelude=prelude)


CASES: Tuple[Regression, ...] = (
    Regression(
        "special_expit_escapes_the_rules",
        _prog(
            (Input("x0", {"dp": "R", "tp": "I"}, (2, 4)),),
            (Stmt("v0", expr="torch.special.expit(x0)"),),
            {"dp": "R", "tp": "P"},
        ),
        "sound",
        "was accepted (S1): torch.special / torch.linalg / torch.fft functions are Any to mypy, "
        "so the plugin never saw the call and its Any result fitted any annotated return (an I "
        "value returned as P); now their calls are wrapped and typed (plugin/untyped.py)",
    ),
    Regression(
        "helper_typed_on_fewer_axes_hides_a_partial",
        _prog(
            (Input("x0", {"dp": "P", "tp": "R"}, (2, 4)),),
            (Stmt("v0", expr="helper(x0)"),),
            {"dp": "P", "tp": "R"},
            prelude=(
                "def helper(a: Annotated[Tensor, Spmd(tp=R)]) -> Annotated[Tensor, Spmd(tp=R)]:\n"
                "    return F.gelu(a)\n"
            ),
        ),
        "sound",
        "was accepted (S2): a dp=P value fitted a parameter annotated on tp only, the helper "
        "applied gelu to each rank's addend, and its result, unknown on dp, fitted the dp=P "
        "return; now spmd-arg (P on an axis the parameter does not name)",
    ),
    Regression(
        "helper_typed_on_fewer_axes_forgets_a_varying",
        _prog(
            (Input("x0", {"dp": "S(0)", "tp": "R"}, (2, 4)),),
            (Stmt("v0", expr="part_helper(x0)"),),
            {"dp": "R", "tp": "R"},
            prelude=(
                "def part_helper(a: Annotated[Tensor, Spmd(tp=R)]) -> Annotated[Tensor, Spmd(tp=R)]:\n"
                "    return torch.tanh(a)\n"
            ),
        ),
        "sound",
        "was accepted (S2b): the helper's result was unknown on dp and fitted a dp=R return; "
        "now the result keeps the argument's dp=V and the return is spmd-return",
    ),
    Regression(
        "spec_form_loses_its_replicated_axes",
        _prog(
            (Input("x0", {"dp": "R", "tp": "S(1)"}, (2, 4), spec_form=True),),
            (Stmt("v0", expr="x0 * 2.0"),),
            {"dp": "I", "tp": "V"},
        ),
        "sound",
        "was accepted (S5): an op on spec=(None, tp) dropped the implicit dp=R, which then fitted "
        "a dp=I return; now dp=R is kept and the return is spmd-return",
    ),
    Regression(
        "union_through_a_torch_function_is_untyped",
        _prog(
            (Input("x0", {"dp": "R", "tp": "R"}, (2, 4)), Input("x1", {"dp": "R", "tp": "V"}, (2, 4))),
            (Stmt("v0", expr="x0 if FLAG else x1"), Stmt("v1", expr="F.gelu(v0)")),
            {"dp": "R", "tp": "R"},
            prelude="FLAG: bool = False\n",
        ),
        "sound",
        "was accepted (S3): F.gelu of a Union (R | V on tp) was SpmdTensor[Any] and fitted the "
        "tp=R return; now typed per alternative and the return is spmd-return",
    ),
    Regression(
        "union_through_a_collective_loses_the_other_axes",
        _prog(
            (Input("x0", {"dp": "P", "tp": "R"}, (2, 4)), Input("x1", {"dp": "P", "tp": "V"}, (2, 4))),
            (
                Stmt("v0", expr="x0 if FLAG else x1"),
                Stmt("v1", op="all_gather", arg="v0", axis="tp", src="V", dst="R"),
                Stmt("v2", expr="F.gelu(v1)"),
            ),
            {"dp": "P", "tp": "R"},
            prelude="FLAG: bool = False\n",
        ),
        "sound",
        "was accepted (S4): all_gather(src=V) of an R | V Union was not checked per alternative "
        "and dropped dp=P; now spmd-collective (src) and spmd-op (gelu of dp=P)",
    ),
    Regression(
        "union_in_a_list_through_stack_is_untyped",
        _prog(
            (Input("x0", {"dp": "R", "tp": "R"}, (2, 4)), Input("x1", {"dp": "R", "tp": "I"}, (2, 4))),
            (Stmt("v0", expr="x0 if FLAG else x1"), Stmt("v1", expr="torch.stack([v0, v0])")),
            {"dp": "R", "tp": "R"},
            prelude="FLAG: bool = False\n",
        ),
        "sound",
        "was accepted (S6): torch.stack of a list of Union values (R | I on tp) was "
        "SpmdTensor[Any]; now typed per alternative and the return is spmd-return",
    ),
    Regression(
        "union_on_both_sides_of_an_operator_is_untyped",
        _prog(
            (Input("x0", {"dp": "R", "tp": "R"}, (2, 4)), Input("x1", {"dp": "R", "tp": "V"}, (2, 4))),
            (Stmt("v0", expr="x0 if FLAG else x1"), Stmt("v1", expr="v0 + v0")),
            {"dp": "R", "tp": "R"},
            prelude="FLAG: bool = False\n",
        ),
        "sound",
        "was accepted (S7): an operator with a Union on the right (v0 + v0) gave a plain Tensor "
        "(mypy asks for the hook of '__radd__ of TensorBase'); now typed per alternative",
    ),
    Regression(
        "spec_form_argument_through_a_per_axis_helper",
        _prog(
            (Input("x0", {"dp": "R", "tp": "S(1)"}, (2, 4), spec_form=True),),
            (
                Stmt("v0", expr="part_helper(x0)"),
                Stmt("v1", op="all_gather", arg="v0", axis="tp", src="S(1)", dst="I"),
                Stmt("v2", expr="v1.sum()"),
            ),
            {"dp": "I", "tp": "I"},
            prelude=(
                "def part_helper(a: Annotated[Tensor, Spmd(tp=S(1))]) -> Annotated[Tensor, Spmd(tp=V)]:\n"
                "    return torch.tanh(a)\n"
            ),
        ),
        "sound",
        "was accepted (S8): a spec-form argument is R on the axes its spec does not name (dp), "
        "but through a helper typed on tp only the result came back unknown on dp and fitted "
        "a dp=I return; now the result keeps *=R and the return is spmd-return",
    ),
)


# Open findings the generator can reach: an accepted program that disagrees
# with its meaning and contains all of a finding's markers is counted under
# the finding's name instead of as a new unsound acceptance.  Remove an entry when its
# regression case above passes.
KNOWN_OPEN: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()


def known_finding(source: str) -> str:
    """The open finding an unsound accepted program falls under (all its markers occur), or ''."""
    return next((name for name, markers in KNOWN_OPEN if all(m in source for m in markers)), "")
