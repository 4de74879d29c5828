"""Boundary annotations the codemod adds, only where a typed call fixes the type.

The rule (conservative; README "Migrating existing code"):
- a parameter annotated exactly `Tensor` (torch's) becomes
  `Annotated[Tensor, Spmd(<axis>=<src>)]` when the function never rebinds it,
  holds no nested function, lambda or class, and every use of the parameter is
  the tensor argument of a converted call on a named axis, all with the same
  axis and src: the call's src is then the only type the parameter can have;
- a return annotated exactly `Tensor` becomes `Annotated[Tensor,
  Spmd(<axis>=<dst>)]` when every `return` of the function returns a
  converted call on a named axis directly, all with the same axis and dst.
A call whose axis is a process-group expression fixes nothing (its axis name
is not known), and an unannotated function is left unannotated (annotating it
would make mypy check its whole body).
"""

from __future__ import annotations

from typing import Callable, Collection, Dict, Iterable, List, Optional, Set, Tuple

import libcst as cst

from .calls import fill

TENSOR_NAMES = frozenset({"torch.Tensor", "torch._tensor.Tensor"})

# (axis name, type text) a converted call fixes
Fixed = Tuple[str, str]


class _Scan(cst.CSTVisitor):
    """Returns of one function body (nested scopes excluded) and whether it nests scopes."""

    def __init__(self) -> None:
        self.returns: List[cst.Return] = []
        self.nested = False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.nested = True
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.nested = True
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self.nested = True
        return False

    def visit_Return(self, node: cst.Return) -> None:
        self.returns.append(node)


def scan(body: cst.BaseSuite) -> _Scan:
    s = _Scan()
    body.visit(s)
    return s


def one(fixed: Iterable[Optional[Fixed]]) -> Optional[Fixed]:
    """The single (axis, type) all uses agree on, else None (also for no use or an unfixed one)."""
    seen: Set[Optional[Fixed]] = set(fixed)
    if len(seen) != 1 or None in seen:
        return None
    return next(iter(seen))


def param_type(
    accesses: Collection[cst.CSTNode], assignments: int, tensor_args: Dict[int, Fixed]
) -> Optional[Fixed]:
    """What a parameter's uses fix: every access a converted call's tensor argument."""
    if assignments != 1 or not accesses:
        return None
    return one(tensor_args.get(id(node)) for node in accesses)


def return_type(returns: List[cst.Return], results: Dict[int, Fixed]) -> Optional[Fixed]:
    if not returns:
        return None
    return one(results.get(id(r.value)) if r.value is not None else None for r in returns)


def annotated(
    annotation: cst.BaseExpression,
    fixed: Fixed,
    annotated_name: str,
    spmd_name: str,
    type_text: Callable[[str], str],
) -> cst.BaseExpression:
    """`Annotated[<annotation>, Spmd(<axis>=<type>)]`."""
    axis, typ = fixed
    return fill(f"{annotated_name}[__t__, {spmd_name}({axis}={type_text(typ)})]", {"__t__": annotation})
