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

An out-of-place linear op reads zeros the same way (`total =
torch.zeros(()); for l in losses: total = total + l`): zeros_operand tells
a name that holds zeros where the op reads it -- bound once to zeros, read
nowhere before the op, rebound only by the op's own statement, and read by
no statement after the op that a loop around the op runs before it again.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, NamedTuple, Optional, Tuple

from mypy.nodes import (
    LDEF, AssignmentExpr, AssignmentStmt, Block, CallExpr, ClassDef, ComparisonExpr, Context, DelStmt,
    DictionaryComprehension, Expression, ForStmt, FuncDef, FuncItem, GeneratorExpr, IndexExpr, ListExpr,
    NameExpr, OpExpr, OperatorAssignmentStmt, StarExpr, Statement, TryStmt, TupleExpr, UnaryExpr, Var,
    WhileStmt, WithStmt,
)
from mypy.binder import CurrentType
from mypy.literals import literal_hash
from mypy.patterns import AsPattern, Pattern, StarredPattern
from mypy.typeops import make_simplified_union
from mypy.types import Type, UnionType, get_proper_type
from mypy.subtypes import is_same_type

from .expressions import call_receiver, makes_fresh, makes_zeros
from .grad_sites import assignments
from .tree import child_attrs


def _at(node: Context) -> Tuple[int, int]:
    return (node.line, node.column)


def fresh_binding(api: Any, context: Context) -> Optional[CallExpr]:
    """The call that made the receiver of the method call `context` (`out` of
    `out.index_add_(...)`) when nothing else can hold its value: `out` is an
    unannotated local of the function being checked whose first occurrence
    is its one binding, `out = <call>` where the call makes a new tensor
    (expressions.makes_fresh), before `context`; it is read nowhere from
    that binding to the end of `context`, nor bound again or named in a
    nested scope anywhere.  None otherwise."""
    receiver = _receiver(context)
    found = _local(api, receiver)
    uses = found[1].uses.get(id(found[0])) if found is not None else None
    if not uses:
        return None
    first, role, stmt, _, _ = uses[0]
    rvalue = stmt.rvalue if isinstance(stmt, AssignmentStmt) and stmt.lvalues == [first] else None
    if role != BIND or not isinstance(rvalue, CallExpr) or not makes_fresh(rvalue) or _at(first) >= _at(context):
        return None
    end = (context.end_line or context.line, context.end_column or context.column)
    for name, role, _, _, _ in uses[1:]:
        if name is not receiver and (role != READ or _at(name) <= end):
            return None  # bound again, captured, or read between the binding and the call
    return rvalue


def _local(api: Any, expr: Optional[Expression]) -> Optional[Tuple[Var, "_Index"]]:
    """The variable of `expr` where it names an unannotated local of the
    function being checked, with that function's index; None otherwise."""
    if not isinstance(expr, NameExpr) or expr.kind != LDEF:
        return None
    var = expr.node
    func = api.scope.current_function() if hasattr(api, "scope") else None
    if not isinstance(var, Var) or not var.is_inferred or not isinstance(func, FuncDef):
        return None
    if id(var) not in _per_pass(_FRESH, api, func, _fresh_vars):
        return None  # never bound to a new tensor: no walk of the function's expressions
    return var, _per_pass(_INDEXES, api, func, lambda f: _walk(f.body))


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


# Where a statement or expression binds names: the attributes holding its targets.
_TARGETS = {
    AssignmentStmt: ("lvalues",), OperatorAssignmentStmt: ("lvalue",), ForStmt: ("index",),
    WithStmt: ("target",), DelStmt: ("expr",), AssignmentExpr: ("target",), TryStmt: ("vars",),
    GeneratorExpr: ("indices",), DictionaryComprehension: ("indices",), AsPattern: ("name",),
    StarredPattern: ("capture",),
}
_NESTED = (FuncItem, ClassDef, GeneratorExpr, DictionaryComprehension)  # a scope of its own (lambdas too)
READ, BIND, NESTED = "read", "bind", "nested"


class _Index(NamedTuple):
    """A function's local names and loops, read in one walk of its body."""

    uses: Dict[int, list]  # id(Var) -> its occurrences (name, role, statement, loops, blocks), in source order
    around: Dict[int, Tuple[tuple, tuple]]  # id(call, operator or augmented assignment) -> its loops and blocks


_CALLS = (CallExpr, OpExpr, UnaryExpr, ComparisonExpr, IndexExpr, OperatorAssignmentStmt)
_INDEXES: Dict[int, Tuple[object, FuncDef, Any]] = {}  # id(func) -> (check owner, func, _Index)
_FRESH: Dict[int, Tuple[object, FuncDef, Any]] = {}  # id(func) -> (check owner, func, _fresh_vars)


def _per_pass(cache: Dict[int, Tuple[object, FuncDef, Any]], api: Any, func: FuncDef, build: Any) -> Any:
    """build(func), kept once per check pass over its file (a daemon
    recheck analyses the tree again, with new Vars)."""
    owner = getattr(api, "scope", None)
    hit = cache.get(id(func))
    if hit is not None and hit[0] is owner and hit[1] is func:
        return hit[2]
    if len(cache) >= 256:
        cache.clear()
    made = build(func)
    cache[id(func)] = (owner, func, made)
    return made


def _fresh_vars(func: FuncDef) -> FrozenSet[int]:
    """id() of each local variable that some statement of `func` binds to a
    call making a new tensor (`out = torch.zeros(n)`): a walk of statements
    only, which spares the full walk (_walk) in the functions that have
    none."""
    return frozenset(
        id(a.lvalues[0].node) for a in assignments(func)
        if len(a.lvalues) == 1 and isinstance(a.lvalues[0], NameExpr) and makes_fresh(a.rvalue)
    )


def _walk(body: Block) -> _Index:
    """Every occurrence of a local variable's name in `body` as (name, role,
    statement, loops around it, blocks around it), and the loops and blocks
    around each call.  A role is
    READ, BIND (an assignment, for, with, del, walrus, except or match
    target, through tuples and stars) or NESTED (inside a function, lambda,
    class or comprehension)."""
    index = _Index({}, {})
    todo: list = [(body, (), (), False, False, None)]
    while todo:
        node, loops, blocks, nested, bound, stmt = todo.pop()
        if isinstance(node, (list, tuple)):
            todo.extend((n, loops, blocks, nested, bound, stmt) for n in node)
            continue
        if isinstance(node, NameExpr):
            if isinstance(node.node, Var) and node.kind == LDEF:
                role = NESTED if nested else BIND if bound else READ
                index.uses.setdefault(id(node.node), []).append((node, role, stmt, loops, blocks))
            continue
        if not isinstance(node, (Statement, Expression, Block, Pattern)):
            continue
        if isinstance(node, _CALLS):
            index.around[id(node)] = (loops, blocks)
        stmt = node if isinstance(node, Statement) else stmt
        loops = loops + (node,) if isinstance(node, (ForStmt, WhileStmt)) else loops
        blocks = blocks + (node,) if isinstance(node, Block) else blocks
        nested = nested or isinstance(node, _NESTED)
        targets = _TARGETS.get(type(node), ())
        through = bound and isinstance(node, (TupleExpr, ListExpr, StarExpr))  # (a, *b) = ...
        for attr in child_attrs(type(node)):
            todo.append((getattr(node, attr, None), loops, blocks, nested, through or attr in targets, stmt))
    for found in index.uses.values():
        found.sort(key=lambda use: _at(use[0]))
    return index


def zeros_operand(api: Any, expr: Expression, context: Context) -> Optional[bool]:
    """Whether the name `expr`, an operand of the call `context`, holds zeros
    there: True where the op's own statement rebinds it (`total = total +
    l`), False where it does not, None where the name may hold anything else.
    A statement that rebinds it to a value holding the op (`total = total +
    a - b`: the op is `total + a`) counts as rebinding it there (False
    here; where that value is a sum whose left spine holds the op,
    retype_zeros with the sum as `root` retypes the name)."""
    found = _zeros_binding(api, expr, context)
    return found if found is None else found is context


def _zeros_binding(api: Any, expr: Expression, context: Context) -> Optional[object]:
    """zeros_operand's finding: None where the name `expr` may hold anything
    but zeros at the op `context`; else the value of the statement that
    rebinds it (`context` itself, or a value holding it), or False where no
    statement holding the op rebinds it.
    It holds zeros where it is an unannotated local of the function being
    checked whose first occurrence is its one binding `name = <zeros>`
    (expressions.makes_zeros), in a block that holds the op (so the op is
    reached through it), and whose every other occurrence is the op's
    own operand or rebinding, or follows the op outside the loops that run
    the op again (a later read could not feed the op, nor change the buffer
    it reads); none lies in a nested scope."""
    if makes_zeros(expr):
        return False if _without_gradient(expr) else None  # torch.zeros(n) + p
    found = _local(api, expr)
    if found is None:
        return None
    uses, around = found[1].uses.get(id(found[0])), found[1].around.get(id(context))
    if around is None or not uses:
        return None
    first, role, stmt, loops, blocks = uses[0]
    if role != BIND or not isinstance(stmt, AssignmentStmt) or stmt.lvalues != [first]:
        return None
    if not any(block is blocks[-1] for block in around[1]):
        return None  # the binding's block does not hold the op: a path may reach the op without it
    if not makes_zeros(stmt.rvalue) or not _without_gradient(stmt.rvalue) or _at(first) >= _at(context):
        return None
    again = [loop for loop in around[0] if not any(loop is outer for outer in loops)]  # loops not around the binding
    end = (context.end_line or context.line, context.end_column or context.column)
    rebound: object = False
    for name, role, stmt, loops, _ in uses[1:]:
        if name is expr:
            continue
        if role == BIND and isinstance(stmt, AssignmentStmt) and stmt.lvalues == [name] and _holds(stmt.rvalue, context):
            rebound = stmt.rvalue  # total = total + l, total + a - b, f(total + a) - b
        elif role == NESTED or _at(name) <= end or any(loop is inner for loop in again for inner in loops):
            return None
    return rebound


_SUMS = ("+", "-")


def _holds(value: Expression, op: Context) -> bool:
    """`op` is `value` or a part of it, so the statement binding `value`
    to a name runs the op first (`total = f(total + a) - b`)."""
    todo: list = [value]
    while todo:
        node = todo.pop()
        if node is op:
            return True
        if isinstance(node, (list, tuple)):
            todo.extend(node)
        elif isinstance(node, Expression) and not isinstance(node, _NESTED):
            todo.extend(getattr(node, attr, None) for attr in child_attrs(type(node)))
    return False


def sum_terms(root: Context) -> Tuple[Tuple[OpExpr, Expression], ...]:
    """(op, operand) of each name an op on the left spine of the sum `root`
    reads, below `root` itself (`total` of `total + a` in `total + a -
    b`): where a name holding zeros may be rebound through that sum."""
    found = []
    node = root.left if isinstance(root, OpExpr) and root.op in _SUMS else None
    while isinstance(node, OpExpr) and node.op in _SUMS:
        found += [(node, side) for side in (node.left, node.right) if isinstance(side, NameExpr)]
        node = node.left
    return tuple(found)


def zeros_candidate(expr: Expression) -> bool:
    """What zeros_operand may find holding zeros: a call of torch.zeros and
    the like, or a local name (a cheap test before its walk)."""
    return (isinstance(expr, NameExpr) and expr.kind == LDEF) or makes_zeros(expr)


def _without_gradient(call: Expression) -> bool:
    """A factory call that asks for no gradient (no requires_grad= written)."""
    return isinstance(call, CallExpr) and "requires_grad" not in call.arg_names


def retype_zeros(api: Any, name: Expression, context: Context, now: Type, root: Optional[Context] = None) -> None:
    """An operand `name` of the linear op `context` whose statement rebinds
    it to `root` (the op itself by default, or a sum holding it: sum_terms),
    which held zeros before (zeros_operand): zeros fit any type, so it has
    the type `now` of `root` from its binding on: its narrowed type in every
    frame becomes `now` (a branch or loop that skips the op leaves it `now`,
    not "zeros' type or now"), and so, once mypy has widened it at this
    assignment and checks the loop around it again, do the variable and its
    declaration (a loop of `total = total + l` leaves total P, not "R or P")."""
    if not isinstance(name, NameExpr) or name.kind != LDEF:
        return
    if _zeros_binding(api, name, context) is not (context if root is None else root):
        return  # the op's statement does not rebind the name to root
    var, key = name.node, literal_hash(name)
    if not getattr(api.options, "allow_redefinition", False) or not isinstance(var, Var) or key is None:
        return
    for frame in api.binder.frames:  # where the binding narrowed it: a branch or loop merges these
        if key in frame.types:
            frame.types[key] = CurrentType(now, frame.types[key].from_assignment)
    declared = get_proper_type(var.type)
    if isinstance(declared, UnionType) and any(is_same_type(t, now) for t in declared.items):
        # widened by mypy at this assignment on an earlier pass (it reads the
        # variable's type before the value's, so the first pass keeps it)
        var.type = now
        api.binder.declarations[key] = now


def retype_sum(api: Any, root: Context, now: Type) -> None:
    """The sum `root` of type `now` (`total + a - b`), where a statement
    rebinds a name that held zeros and is read by an op on its left spine
    (`total` of `total + a`): the name has the type `now` from its binding
    on (retype_zeros with `root`).  A test of `root`'s class ends it for
    most calls: the op lane asks it of every op it answers."""
    left = getattr(root, "left", None)
    if left.__class__ is not OpExpr or getattr(root, "op", None) not in _SUMS:
        return
    for op, name in sum_terms(root):
        retype_zeros(api, name, op, now, root)

