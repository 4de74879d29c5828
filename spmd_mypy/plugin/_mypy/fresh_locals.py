"""A local name bound to a new tensor that nothing has read since.

Real code fills a buffer in place: `out = torch.zeros(n, d)` then
`out.index_add_(0, idx, tokens)` (Megatron's MoE unpermutation writes
`scatter_add_`).  The buffer is R and holds no gradient; the op makes it V
(or P).  An in-place op keeps a tensor's type, so this was an spmd-inplace
error whose fix was to rebind the name to the out-of-place op.  When no
other name can hold the buffer -- the name is a local bound once, to a call
that makes a new tensor, and read nowhere between that binding and the end
of the in-place call -- the in-place op is that rebinding, and the checker
treats it so: mypy's allow_redefinition widens the variable and narrows the
name to the op's type, exactly as for `out = out.index_add(...)`.  Such a
name also still holds zeros at the call when its binding made zeros, so a
selection does not count it as a term.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Tuple

from mypy.nodes import (
    LDEF, Block, CallExpr, Context, Expression, FuncDef, NameExpr, OperatorAssignmentStmt, Statement, Var,
)
from mypy.binder import CurrentType
from mypy.literals import literal_hash
from mypy.typeops import make_simplified_union
from mypy.types import Type

from .expressions import call_receiver, makes_fresh, makes_zeros
from .grad_sites import assignments
from .tree import child_attrs


def _at(node: Context) -> Tuple[int, int]:
    return (node.line, node.column)


def _names(body: Block, var: Var) -> Iterator[NameExpr]:
    """Every occurrence of `var`'s name in `body`, nested functions,
    lambdas and comprehensions included."""
    todo: list = [body]
    while todo:
        node = todo.pop()
        if isinstance(node, (list, tuple)):
            todo.extend(node)
        elif isinstance(node, NameExpr):
            if node.node is var:
                yield node
        elif isinstance(node, (Statement, Expression, Block)):
            todo.extend(getattr(node, name, None) for name in child_attrs(type(node)))


def fresh_binding(api: Any, context: Context) -> Optional[CallExpr]:
    """The call that made the receiver of the method call `context` (`out` of
    `out.index_add_(...)`) when nothing else can hold its value: `out` is an
    unannotated local of the function being checked, bound once there, by
    `out = <call>` where the call makes a new tensor (expressions.makes_fresh),
    before `context`, and read nowhere from that binding to the end of
    `context`.  None otherwise."""
    receiver = _receiver(context)
    if not isinstance(receiver, NameExpr) or receiver.kind != LDEF:
        return None
    var = receiver.node
    func = api.scope.current_function() if hasattr(api, "scope") else None
    if not isinstance(var, Var) or not var.is_inferred or not isinstance(func, FuncDef):
        return None
    bindings = [a for a in assignments(func) if any(isinstance(lv, NameExpr) and lv.node is var for lv in a.lvalues)]
    if len(bindings) != 1:
        return None
    binding = bindings[0]
    rvalue = binding.rvalue
    if len(binding.lvalues) != 1 or not isinstance(rvalue, CallExpr) or not makes_fresh(rvalue):
        return None
    if _at(binding) >= _at(context):
        return None
    end = (context.end_line or context.line, context.end_column or context.column)
    for name in _names(func.body, var):
        if name is receiver or name is binding.lvalues[0]:
            continue
        if _at(binding) <= _at(name) <= end:
            return None  # read (or bound again) between the binding and the call
        if _at(name) < _at(binding):
            return None  # named before its one binding: a loop may carry another value in
    return rvalue


def _receiver(context: Context) -> Optional[Expression]:
    """`x` of `x.m(...)` or of `x += y`."""
    return context.lvalue if isinstance(context, OperatorAssignmentStmt) else call_receiver(context)


def operator_assigned(context: Context) -> bool:
    """The call is an augmented assignment's (`x += y`)."""
    return isinstance(context, OperatorAssignmentStmt)


def holds_zeros(api: Any, context: Context) -> bool:
    """The receiver of the method call `context` still holds the zeros its
    one binding made (fresh_binding, of torch.zeros and the like)."""
    bound = fresh_binding(api, context)
    return bound is not None and makes_zeros(bound)


def rebind_local(api: Any, context: Context, now: Type, zeros: bool) -> bool:
    """Narrow the local name the in-place call `context` changes (its
    receiver) to `now`, as mypy's allow_redefinition does for `name = <a
    value of type now>`: the variable's type widens to the union of both,
    the name reads as `now` from here on.  Where its binding made zeros,
    which fit any type, the name is `now` from that binding on instead (a
    loop of `acc += p` after `acc = torch.zeros(n)` leaves acc P, not R or
    P).  False (and nothing changed) where the run does not allow
    redefinition."""
    receiver = _receiver(context)
    if not getattr(api.options, "allow_redefinition", False) or not isinstance(receiver, NameExpr):
        return False
    var = receiver.node
    key = literal_hash(receiver)
    if not isinstance(var, Var) or var.type is None or key is None:
        return False
    binder = api.binder
    if zeros:
        var.type = now
        for frame in binder.frames:  # the binding's own narrowing, where a loop reads it back
            if key in frame.types:
                frame.types[key] = CurrentType(now, frame.types[key].from_assignment)
    else:
        var.type = make_simplified_union([var.type, now])
        api.widened_vars.append(var.name)  # a loop around the call is checked again
    binder.put(receiver, now)
    binder.declarations[key] = var.type
    return True
