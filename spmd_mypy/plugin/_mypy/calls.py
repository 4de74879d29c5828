"""The checker side of a call: reporting errors, a hook context's actual and
formal arguments, the signatures calls are routed to (Module.forward,
Function.forward), and typing an expression again."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple

from mypy.errorcodes import ErrorCode
from mypy.nodes import (
    ARG_POS, ARG_STAR, ARG_STAR2, CallExpr, Context, Decorator, Expression, FuncDef, ListExpr, OverloadedFuncDef,
    RefExpr, SymbolNode, TupleExpr, TypeInfo, Var,
)
from mypy.plugin import FunctionContext
from mypy.typeops import bind_self, callable_type
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    Overloaded,
    Type,
    TypeOfAny,
    TypeType,
    TypeVarId,
    TypeVarType,
    get_proper_type,
)

from .analyzer import node_of
from .call_keys import Same
from .region_errors import region_dropped
from .tensor_types import erase_carriers


def error_code(code: str, description: str) -> ErrorCode:
    return ErrorCode(code, description, "SPMD")


def fail(api: Any, msg: str, context: Context, code: ErrorCode) -> None:
    api.fail(msg, context, code=code)


def note(api: Any, msg: str, context: Context, code: ErrorCode) -> bool:
    """A note at `context` through the checker's or the type analyzer's api;
    False when `api` can take none."""
    method = getattr(api, "note", None)
    if method is None:
        return False
    method(msg, context, code=code)
    return True


def fail_past_filters(api: Any, msg: str, context: Context, code: ErrorCode) -> None:
    """Report an error that mypy's active error filters would swallow.

    mypy checks a reflected operator method with errors filtered and turns any
    error there into "Unsupported operand types" [operator]; the SPMD error is
    the one the user needs, and the operator itself is fine."""
    errors = api.msg.errors
    saved = errors._watchers
    # in an unchecked region the error is dropped (its watcher is among those
    # skipped here); the watchers above it still see an error, as they would
    if not region_dropped(api, context.line, code.code):
        errors._watchers = []
        try:
            api.fail(msg, context, code=code)
        finally:
            errors._watchers = saved
    # The watchers above the first filter would have seen it (among them a
    # hook's own watch, call_keys.error_watch): they still do.
    for watcher in reversed(saved):
        if watcher._filter is not False:
            break
        watcher._has_new_errors = True


@contextmanager
def errors_held(api: Any) -> Iterator[List[Tuple[str, Optional[ErrorCode]]]]:
    """The errors reported inside, held back: on exit the list holds their
    (message, code), for the caller to report (fail_past_filters)."""
    held: List[Tuple[str, Optional[ErrorCode]]] = []
    with api.msg.filter_errors(save_filtered_errors=True) as watcher:
        yield held
    held.extend((info.message, info.code) for info in watcher.filtered_errors())


def checker_path(api: Any) -> Optional[str]:
    """The file the checker is checking now."""
    return getattr(api, "path", None)


def formal_groups(ctx: Any) -> List[Tuple[Optional[str], List[Expression], List[Type]]]:
    """(parameter name, actual expressions, their types) per formal of the callee."""
    names = getattr(ctx, "callee_arg_names", None) or [None] * len(ctx.args)
    return list(zip(names, ctx.args, ctx.arg_types))


def call_args(ctx: Any) -> Tuple[Tuple[Optional[str], Expression, Type], ...]:
    """Flatten a Function/MethodContext's actual arguments: (name, expr, type).
    Kept for the last context (a hook asks several times per call)."""
    last = _LAST_CALL_ARGS
    if last[0] is ctx:
        return last[1]
    out: List[Tuple[Optional[str], Expression, Type]] = []
    for names, exprs, types in zip(ctx.arg_names, ctx.args, ctx.arg_types):
        out.extend(zip(names, exprs, types))
    last[0], last[1] = ctx, tuple(out)
    return last[1]


_LAST_CALL_ARGS: List[Any] = [None, ()]


def size_rank(ctx: Any) -> Optional[int]:
    """The rank a factory's sizes give (`zeros(3, n)`, `ones((3, 4))`,
    `empty(size=[b, s, h])`, `full((3, 4), x)`): the count of int positional
    arguments, or the length of a first tuple or list display; None otherwise (`zeros(shape)`,
    `zeros(*shape)`)."""
    if any(k in (ARG_STAR, ARG_STAR2) for kinds in ctx.arg_kinds for k in kinds):
        return None
    sizes = [(e, t) for name, e, t in call_args(ctx) if name is None or name == "size"]
    if sizes and isinstance(sizes[0][0], (TupleExpr, ListExpr)):  # full((3, 4), 0.5): the fill follows
        return len(sizes[0][0].items)
    ints = [get_proper_type(t) for _, t in sizes]
    if ints and all(isinstance(t, Instance) and t.type.fullname == "builtins.int" for t in ints):
        return len(ints)
    return None


def first_args(ctx: Any) -> Dict[Optional[str], Tuple[Expression, Type]]:
    """The first actual argument bound to each parameter that has one, by the
    parameter's name: (expression, type) (formal_args' first item, for all
    parameters in one pass)."""
    return {
        name: (exprs[0], types[0]) for name, exprs, types in zip(ctx.callee_arg_names, ctx.args, ctx.arg_types) if exprs
    }


def formal_args(ctx: Any, formal: str) -> List[Tuple[Expression, Type]]:
    """The actual arguments bound to the callee's parameter named `formal`."""
    try:
        i = ctx.callee_arg_names.index(formal)
    except (AttributeError, ValueError):
        return []
    return list(zip(ctx.args[i], ctx.arg_types[i]))


def forward_signature(ctx: Any) -> Optional[CallableType]:
    """The bound signature of `forward` of the nn.Module subclass being called
    (the first item if forward is overloaded)."""
    return forward_of(get_proper_type(ctx.type))


def forward_of(module: Any) -> Optional[CallableType]:
    """The bound signature of `forward` of the nn.Module subclass `module`
    (its first item if overloaded); None if it declares none, or `module`
    is no module instance."""
    bound = _bound_forward(module)
    return bound.items[0] if bound is not None and bound.items else None


def forward_as_written(ctx: Any, module: Optional[Instance] = None) -> Optional[CallableType]:
    """forward_signature(ctx) (or forward_of(module)), or, for a module whose
    forward is written without annotations (`def forward(self, x):`, torch's
    nn.Sequential), its implicit signature, every type Any: the forward a
    typed tensor enters unchecked (untyped_regions).  A module of a class
    that defines no forward below nn.Module (nn.Module itself: the values of
    an nn.ModuleDict, a base class) runs a forward nobody knows:
    `(*args: Any, **kwargs: Any) -> Any`.  None when the callee is no module."""
    receiver = get_proper_type(ctx.type) if module is None else module
    sig = forward_of(receiver)
    if sig is not None:
        return sig
    node = _forward_node(receiver)
    function = ctx.api.named_type("builtins.function")
    if node is None and isinstance(receiver, Instance) and receiver.type.has_base(_MODULE):
        anything = AnyType(TypeOfAny.special_form)
        return CallableType([anything, anything], [ARG_STAR, ARG_STAR2], [None, None], anything, function)
    if not isinstance(node, FuncDef) or node.type is not None:
        return None
    return callable_type(node, function)


def _bound_forward(receiver: Any) -> Optional[FunctionLike]:
    """`forward` of the nn.Module subclass `receiver`, bound to it."""
    sig = _declared_forward(receiver)
    return bind_self(sig, receiver) if sig is not None else None


def forward_definition(ctx: Any) -> Optional[Same]:
    """The declared type of `forward` of the module being called, as a key
    part (call_keys.Same): the first type seen equal to it, so that an
    equal type mypy builds again (a daemon edit re-analyses the class) asks
    the same question, and a changed one another.  The receiver's type, in
    the key beside it, binds it the same way each time.  Types are compared
    once per object (their hash walks them, and hashes each argument kind,
    an Enum, in Python)."""
    sig = _declared_forward(get_proper_type(ctx.type))
    if sig is None:
        return None
    seen = _SEEN_FORWARDS.get(id(sig))
    if seen is None or seen[0] is not sig:
        if len(_SEEN_FORWARDS) >= 4096:
            _SEEN_FORWARDS.clear()
            _FIRST_EQUAL.clear()
        seen = _SEEN_FORWARDS[id(sig)] = (sig, Same(_FIRST_EQUAL.setdefault(sig, sig)))
    return seen[1]


# id of a forward's declared type -> (the type, Same(the first type equal to it))
_SEEN_FORWARDS: Dict[int, Tuple[FunctionLike, Same]] = {}
_FIRST_EQUAL: Dict[FunctionLike, FunctionLike] = {}


def _declared_forward(receiver: Any) -> Optional[FunctionLike]:
    """The unbound type of the `forward` an nn.Module subclass defines
    below Module, None for anything else."""
    node = _forward_node(receiver)
    sig = get_proper_type(getattr(node, "type", None)) if node is not None else None
    return sig if isinstance(sig, FunctionLike) else None


_MODULE = "torch.nn.modules.module.Module"


def _forward_node(receiver: Any) -> Optional[SymbolNode]:
    """The definition of the `forward` an nn.Module subclass defines below
    Module (a function, an overload, a decorated one), None for anything else."""
    if not isinstance(receiver, Instance):
        return None
    info: TypeInfo = receiver.type
    if not info.has_base(_MODULE):
        return None
    for base in info.mro:
        if base.fullname == _MODULE:
            return None  # forward is not overridden below Module
        node = base.names.get("forward")
        if node is not None:
            return node.node
    return None


CHECKPOINT = "torch.utils.checkpoint.checkpoint"
# checkpoint's own keywords (preserve_rng_state is taken from its **kwargs)
_CHECKPOINT_OWN = frozenset({"use_reentrant", "context_fn", "determinism_check", "debug", "early_stop", "preserve_rng_state"})


def checkpointed(ctx: Any) -> Optional[Tuple[CallableType, Tuple[Tuple[Optional[str], Expression, Type], ...]]]:
    """For `checkpoint(function, *args, **kwargs)` (torch.utils.checkpoint):
    the signature `function` runs with (a function, a bound method, or an
    nn.Module's forward) and the arguments checkpoint passes on to it, as
    call_args gives them.  None when a starred argument or a callee of no
    single signature leaves them unknown."""
    given = formal_args(ctx, "function")
    if len(given) != 1:
        return None
    callee = get_proper_type(given[0][1])
    if isinstance(callee, Instance):  # checkpoint(self.block, h): the module's forward
        bound = _bound_forward(callee)
        callee = bound.items[0] if bound is not None and len(bound.items) == 1 else None
    if not isinstance(callee, CallableType):
        return None
    rest = [i for i, formal in enumerate(ctx.callee_arg_names) if formal in ("args", "kwargs")]
    passed = _passed_on(ctx, rest)
    if passed is None:
        return None
    return callee, tuple(a for a in passed if a[0] not in _CHECKPOINT_OWN)


def _passed_on(ctx: Any, formals: List[int]) -> Optional[List[Tuple[Optional[str], Expression, Type]]]:
    """The actual arguments of the callee's formals at these indices, as
    call_args gives them; None when one is starred (its items are unknown)."""
    out: List[Tuple[Optional[str], Expression, Type]] = []
    for i in formals:
        for name, expr, typ, kind in zip(ctx.arg_names[i], ctx.args[i], ctx.arg_types[i], ctx.arg_kinds[i]):
            if kind == ARG_STAR or kind == ARG_STAR2:
                return None
            out.append((name, expr, typ))
    return out


PARTIAL = "functools.partial"


def partial_parts(ctx: Any) -> Optional[Tuple[CallableType, Tuple[Tuple[Optional[str], Expression, Type], ...]]]:
    """For `functools.partial(fn, *args, **kwargs)`: fn's signature (a
    function or a bound method) and the arguments bound now, as call_args
    gives them; None for another callee or a starred argument."""
    if len(ctx.arg_types) != 3 or len(ctx.arg_types[0]) != 1:
        return None
    fn = get_proper_type(ctx.arg_types[0][0])
    if not isinstance(fn, CallableType) or fn.is_type_obj():
        return None
    bound = _passed_on(ctx, [1, 2])
    return (fn, tuple(bound)) if bound is not None else None


def mypys_partial(ctx: Any, callee: Optional[Type] = None) -> Type:
    """mypy's own typing of functools.partial (its plugin), with `callee` in
    place of the first argument's type when given."""
    from mypy.plugins.functools import handle_partial_with_callee, partial_new_callback

    return partial_new_callback(ctx) if callee is None else handle_partial_with_callee(ctx, callee)


def given_function(ctx: Any, formal: str) -> Optional[Type]:
    """The type of the argument bound to the callee's parameter `formal` when
    it is a function (a callable or an overload); None when none is given.
    An argument that is no function: the call's default result type."""
    given = formal_args(ctx, formal)
    if not given:
        return None
    typ = given[0][1]
    return typ if isinstance(get_proper_type(typ), FunctionLike) else ctx.default_return_type


def identity_decorator(api: Any) -> CallableType:
    """`def [F] (F) -> F`: a decorator that gives back what it decorates."""
    var = TypeVarType(
        "F", "F", TypeVarId(-1), [], api.named_generic_type("builtins.object", []),
        AnyType(TypeOfAny.from_omitted_generics),
    )
    return CallableType(
        [var], [ARG_POS], [None], var, api.named_generic_type("builtins.function", []),
        name="decorator", variables=[var],
    )


def function_class(callee_type: object) -> Optional[TypeInfo]:
    """For `Fn.apply(...)`: the class Fn when it is a torch.autograd.Function
    subclass (the receiver's type is its class object), else None."""
    p = get_proper_type(callee_type) if isinstance(callee_type, Type) else None
    info: Optional[TypeInfo] = None
    if isinstance(p, FunctionLike) and p.is_type_obj():
        info = p.type_object()
    elif isinstance(p, TypeType) and isinstance(p.item, Instance):
        info = p.item.type
    return info if info is not None and info.has_base("torch.autograd.function.Function") else None


def declares_apply(ctx: Any) -> bool:
    """For `Fn.apply(...)` on a torch.autograd.Function subclass: whether the
    class binds apply to a typed attribute of its own (a class decorated
    `@spmd.trusted(...)`, _mypy/trusted_classes.py), which the call then
    follows as a function's.  Not when that attribute kept the rewrite's
    untyped `Callable[..., Any]` (a decorator named trusted that is not
    spmd's): the call then follows forward, as for an undecorated class."""
    info = function_class(ctx.type)
    node = info.names.get("apply") if info is not None else None
    if node is None or not isinstance(node.node, Var):
        return False
    sig = get_proper_type(node.node.type) if node.node.type is not None else None
    return not (isinstance(sig, CallableType) and sig.is_ellipsis_args)


def autograd_function_forward(ctx: Any) -> Optional[CallableType]:
    """For `Fn.apply(...)` on a torch.autograd.Function subclass: its static
    `forward` without the leading ctx parameter."""
    info = function_class(ctx.type)
    if info is None:
        return None
    for base in info.mro:
        if base.fullname.startswith("torch."):
            return None  # forward not declared by the user
        node = base.names.get("forward")
        if node is not None:
            sig = get_proper_type(getattr(node.node, "type", None))
            if isinstance(sig, CallableType) and sig.arg_types:
                return sig.copy_modified(
                    arg_types=sig.arg_types[1:],
                    arg_kinds=sig.arg_kinds[1:],
                    arg_names=sig.arg_names[1:],
                )
            return None
    return None


def typed_before(api: Any, expr: Expression) -> Type:
    """The type the checker gave `expr` already (typed again if it has none)."""
    found = api.lookup_type_or_none(expr)
    return found if found is not None else expression_type(api, expr)


def typed_already(api: Any, expr: Expression) -> Optional[Type]:
    """The type the checker gave `expr`, if it has checked it (None: not yet)."""
    return api.lookup_type_or_none(expr)


def callee_definition(ctx: Any) -> Optional[str]:
    """The fullname of the function a call reaches through a value
    (`self.act(x)` after `self.act = F.gelu`): the definition of the
    callable type mypy gave the callee, stored before the function hook."""
    callee = getattr(ctx.context, "callee", None)
    found = ctx.api.lookup_type_or_none(callee) if isinstance(callee, Expression) else None
    p = get_proper_type(found) if found is not None else None
    if isinstance(p, Overloaded) and p.items:
        p = p.items[0]  # `add = torch.add`: every item is the one function's
    definition = p.definition if isinstance(p, CallableType) else None
    return getattr(definition, "fullname", None) or None


def expression_type(api: Any, expr: Expression) -> Type:
    return api.get_expression_type(expr)


def type_context(api: Any) -> Optional[Type]:
    """The type the checker expects of the expression being checked."""
    stack = api.expr_checker.type_context
    return stack[-1] if stack else None


def declared_return(api: Any) -> Optional[Type]:
    """The declared return type of the function being checked.  (The type
    context is not enough: mypy retries a returned call without context.)"""
    stack = api.return_types
    return stack[-1] if stack else None


def recheck(api: Any, expr: Expression, context: Optional[Type]) -> Type:
    """Type `expr` again, in the context mypy would have given it."""
    return api.expr_checker.accept(expr, context)


def call_context(api: Any, call: CallExpr, default_return: Type) -> FunctionContext:
    """A FunctionContext for a call whose callee mypy could not type: one group
    per actual argument, named by its keyword, typed as the checker typed it."""
    types = [typed_before(api, a) for a in call.args]
    return FunctionContext(
        arg_types=[[t] for t in types],
        arg_kinds=[[k] for k in call.arg_kinds],
        callee_arg_names=list(call.arg_names),
        arg_names=[[n] for n in call.arg_names],
        default_return_type=default_return,
        args=[[a] for a in call.args],
        context=call,
        api=api,
    )


def untyped_call(ctx: Any) -> Optional[Tuple[str, CallExpr]]:
    """(fullname of the real callee, the real call) in the hook of the wrapper."""
    if len(ctx.args) != 1 or len(ctx.args[0]) != 1:
        return None
    inner = ctx.args[0][0]
    if not isinstance(inner, CallExpr) or not isinstance(inner.callee, RefExpr):
        return None
    return inner.callee.fullname, inner


def declared_parameters(plugin: Any, fullname: str) -> Optional[List[Type]]:
    """The parameter types of the function `fullname`, of every item of an
    overloaded one; None when it is not known (not loaded, not a function,
    its type not analysed, or no build has handed the plugin its modules)."""
    node = node_of(plugin, fullname)
    if isinstance(node, Decorator):
        node = node.func
    if not isinstance(node, (FuncDef, OverloadedFuncDef)):
        return None
    typ = get_proper_type(node.type) if node.type is not None else None
    if isinstance(typ, CallableType):
        return list(typ.arg_types)
    if isinstance(typ, Overloaded):
        return [t for item in typ.items for t in item.arg_types]
    return None


def report_as_plain(ctx: Any, callee: CallableType, formal: int, expr: Expression, actual: Type, kind: Any) -> None:
    """mypy's own error for an argument that does not fit its parameter, with
    every carrier erased: the message plain mypy gives (`Argument 1 to "f"
    has incompatible type "tuple[Tensor, Tensor]"; expected "list[Tensor]"`)."""
    api = ctx.api
    plain = callee.copy_modified(arg_types=[erase_carriers(api, t) for t in callee.arg_types])
    erased = erase_carriers(api, actual)
    call = ctx.context
    actuals = call.args if isinstance(call, CallExpr) else []
    n = next((k for k, a in enumerate(actuals) if a is expr), formal) + 1
    object_type = getattr(ctx, "type", None)  # a method's receiver: 'of "Engine"'
    api.expr_checker.check_arg(
        erased, erased, kind, plain.arg_types[formal], n, formal + 1, plain, object_type, expr, call
    )
