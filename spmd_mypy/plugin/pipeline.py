"""Pipeline stages in the checker: spmd.send_next / send_prev / recv_prev /
recv_next (runtime/pipeline.py; the rows and messages: vocab/pipeline.py).

    Hidden = Annotated[Tensor, Spmd(tp=S(0))]       # the boundary type, shared
    h = spmd.recv_prev(shape, "pp", spmd=Hidden)    # h: pp=V, tp=S(0)
    spmd.send_next(y, "pp", spmd=Hidden)            # y checked against tp=S(0), pp=V

The boundary type (`spmd=`: a type alias of an annotated tensor, the one
the stage functions' signatures use, or an Spmd(...) written in the call or
a module-level Final spec, read like assert_spmd's) is the contract between
two stages: the receiving stage's value has it (V on the pipeline axis), and
the value a send carries must fit it on every axis it names and be V on the
pipeline axis (spmd-arg errors at the send, with both types, what goes
wrong in forward and in backward, and the fixing call).  A boundary that
declares the pipeline axis other than V is an spmd-annotation error; a
receive without spmd= is declared by its target's annotation (`h: Hidden =
spmd.recv_prev(...)`), and one with neither is an spmd-annotation error.  A
send returns the sending stage's addend of the pipeline's loss (a zero; P on
the pipeline axis: vocab.pipeline.handle_type), on which that stage runs
backward.  Each stage's code is thereby checked on its own, against the
declaration it shares with its neighbour.  Every typed send and receive is
recorded for the communication report (comm_sites, op "p2p.<name>": the
message in forward, the gradient's message back in backward).
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ..vocab.localtype import V
from ..vocab.pipeline import (
    P2P_OPS,
    P2POp,
    SendProblem,
    boundary_axis_problem,
    boundary_problems,
    handle_type,
    received_type,
    send_message,
)
from ..vocab.spec import Spmd
from . import _mypy, collective_args, comm_sites
from .annotations import AnnotationError, Meta
from .callsite import one_arg, unknown_in_spmd_file
from .carrier import carrier, spmd_of
from .comm_sites import P2P
from .config import Settings
from .decoding import decode
from .errors import SPMD_ANNOTATION, SPMD_ARG, SPMD_GROUP
from .groups import axis_of, unnamed_axis_message
from .guard import default_return, guarded
from .reading import check_axes
from .sourcefile import FileIndex, statements
from .spec_argument import spec_argument

__all__ = ["HOOKS", "configure"]

_API = "spmd_mypy.runtime.pipeline."

_SETTINGS: List[Settings] = []


def configure(settings: Settings) -> None:
    _SETTINGS[:] = [settings]


def _settings() -> Optional[Settings]:
    return _SETTINGS[-1] if _SETTINGS else None


def _boundary(ctx: Any, op: P2POp, axis: str) -> Optional[Tuple[Spmd, str]]:
    """The declared boundary type and its text; None (reported) if unreadable:
    a type alias of an annotated tensor (`spmd=Hidden`), an Spmd(...) written
    in the call, or a module-level Final spec."""
    arg = one_arg(ctx, "spmd")
    if arg is None:
        return None
    text = _mypy.expr_text(arg[0])
    try:
        boundary = _read_boundary(ctx, arg[0], text)
    except AnnotationError as e:
        ctx.api.fail(f"Malformed SPMD annotation: {e}", ctx.context, code=SPMD_ANNOTATION)
        return None
    if boundary is None:
        return None
    bad = boundary_axis_problem(boundary, axis)
    if bad is not None:
        ctx.api.fail(
            f"spmd.{op.name} over {axis!r}: the boundary type {text} declares {bad} on the pipeline axis, but "
            f"each stage holds its own value there (V); a value is never {bad} across stages. "
            f"Hint: leave {axis!r} out of the boundary type (the received value is V there)",
            ctx.context,
            code=SPMD_ANNOTATION,
        )
        return None
    return boundary, text


def _read_boundary(ctx: Any, expr: _mypy.Expression, text: str) -> Optional[Spmd]:
    alias = _mypy.alias_target(expr)
    if alias is not None:
        found = spmd_of(alias)
        if found is None:
            raise AnnotationError(
                f"the boundary type {text} is a type alias of no annotated tensor: "
                f"write {text} = Annotated[Tensor, Spmd(...)]",
                0,
            )
        return found
    if _mypy.final_name(expr) is None and _mypy.call_parts(expr) is None:
        raise AnnotationError(
            f"the boundary type {text} is not read statically: pass a type alias of an annotated tensor "
            f"(Hidden = Annotated[Tensor, Spmd(...)], the type the stages' signatures use), an Spmd(...) "
            f"written in the call, or a module-level Final spec",
            0,
        )
    node, resolve = spec_argument(ctx.api, expr)
    boundary = decode(Meta((node,), ctx.context.line), resolve)
    settings = _settings()
    if boundary is not None and settings is not None:
        check_axes(boundary, settings)
    return boundary


def _pipeline_axis(ctx: Any, op: P2POp) -> Optional[str]:
    """The pipeline axis the call names (one axis), else None (reported if unnamed)."""
    axis_arg = one_arg(ctx, "axis")
    if axis_arg is None:
        return None
    axis = axis_of(axis_arg[0], axis_arg[1], ctx.api)
    if axis is None:
        ctx.api.fail(unnamed_axis_message(f"spmd.{op.name}", axis_arg[0], axis_arg[1], ctx.api), ctx.context, code=SPMD_GROUP)
        return None
    if isinstance(axis, tuple):  # never silently unchecked
        ctx.api.fail(
            f"spmd.{op.name} over {axis!r}: a pipeline is one mesh axis; a send or receive over a flattened "
            f"group of axes is not checked. Hint: name the pipeline axis alone (spmd.{op.name}(..., {axis[0]!r}, ...))",
            ctx.context,
            code=SPMD_GROUP,
        )
        return None
    if not collective_args.axes_known(ctx, op.name, (axis,), _settings()):
        return None
    return axis


def _send(ctx: Any, op: P2POp) -> _mypy.Type:
    default = ctx.default_return_type
    x = one_arg(ctx, "x")
    axis = _pipeline_axis(ctx, op)
    found = _boundary(ctx, op, axis) if axis is not None else None
    if x is None or axis is None or found is None:
        return unknown_in_spmd_file(ctx, default)
    boundary, text = found
    comm_sites.record_call(ctx, P2P + op.name, x, (axis,), V, V)
    value = _mypy.expr_text(x[0])
    reported = set()
    for alternative in _mypy.union_alternatives(x[1]) or [x[1]]:
        actual = spmd_of(alternative)
        if actual is None:
            continue
        for a, got, want in boundary_problems(actual, boundary, axis):
            if (a, str(got)) in reported:
                continue
            reported.add((a, str(got)))
            problem = SendProblem(op, axis, a, value, got, want, text)
            ctx.api.fail(send_message(problem), ctx.context, code=SPMD_ARG)
    return _mypy.replace_tensors(default, carrier(ctx.api, handle_type(axis)))


def _recv(ctx: Any, op: P2POp) -> _mypy.Type:
    default = ctx.default_return_type
    axis = _pipeline_axis(ctx, op)
    if axis is None:
        return unknown_in_spmd_file(ctx, default)
    flag = one_arg(ctx, "requires_grad")
    nograd = flag is not None and _mypy.is_false(flag[0])
    if one_arg(ctx, "spmd") is None:  # `h: Hidden = spmd.recv_prev(...)`: the annotation declares it
        _record_recv(ctx, op, axis, nograd)
        if not _annotated_target(_mypy.checker_path(ctx.api), ctx.context.line, ctx.context.column):
            ctx.api.fail(
                f"spmd.{op.name} over {axis!r} declares no boundary type, so the received value's type is "
                f"unknown and nothing checks it against what the {op.peer} stage sends. Hint: pass "
                f"spmd=<the alias the {op.peer} stage's send passes> (Hidden = Annotated[Tensor, Spmd(...)]), "
                f"or annotate the target (h: Hidden = spmd.{op.name}(...))",
                ctx.context,
                code=SPMD_ANNOTATION,
            )
        return unknown_in_spmd_file(ctx, default)
    found = _boundary(ctx, op, axis)
    if found is None:
        return unknown_in_spmd_file(ctx, default)
    _record_recv(ctx, op, axis, nograd)
    return _mypy.replace_tensors(default, carrier(ctx.api, received_type(found[0], axis, nograd)))


def _annotated_calls(tree: ast.AST) -> Set[Tuple[int, int]]:
    """The positions of calls that are the value of an annotated assignment (`h: T = call`)."""
    return {
        (node.value.lineno, node.value.col_offset)
        for node in statements(tree)
        if isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Call)
    }


_ANNOTATED: FileIndex[Set[Tuple[int, int]]] = FileIndex(lambda data: True, _annotated_calls, set())


def _annotated_target(file: Optional[str], line: int, column: int) -> bool:
    """Is the call at line:column the value of an annotated assignment (`h: T = call`)?"""
    return (line, column) in _ANNOTATED.of(file)


def _record_recv(ctx: Any, op: P2POp, axis: str, nograd: bool) -> None:
    """A receive for the communication report (its size is named by the name its
    result is assigned to, which the report reads: comm_report.sizes)."""
    comm_sites.record_site(ctx, P2P + op.name, (axis,), V, V, "received value", nograd=nograd)


def _hook(op: P2POp) -> Callable[[Any], _mypy.Type]:
    check = _send if op.sends else _recv
    return guarded(lambda ctx: check(ctx, op), default_return)


HOOKS: Dict[str, Callable[[Any], _mypy.Type]] = {_API + name: _hook(op) for name, op in P2P_OPS.items()}
