"""Type variables with values (`Stream = TypeVar("Stream", A, B)`), the way a
layout that follows a configuration is written: what a parameter's variable
is, a signature with its variables chosen, and whether the function being
checked is one of mypy's per-value copies (expansions) of a generic one."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from mypy.expandtype import expand_type
from mypy.nodes import FUNC_NO_INFO, NameExpr
from mypy.types import CallableType, Type, TypeVarId, TypeVarType, UninhabitedType, get_proper_type
from mypy.types import has_type_vars as _has_type_vars


def value_variable(typ: Type) -> Optional[Tuple[TypeVarId, List[Type]]]:
    """(id, values) when `typ` is a type variable with values, else None."""
    p = get_proper_type(typ)
    if isinstance(p, TypeVarType) and p.values:
        return p.id, list(p.values)
    return None


def choose(sig: CallableType, choice: Dict[Any, Type]) -> CallableType:
    """`sig` with its type variables replaced by the chosen values."""
    expanded = get_proper_type(expand_type(sig, choice))
    assert isinstance(expanded, CallableType)
    left = [v for v in expanded.variables if v.id not in choice]
    return expanded.copy_modified(variables=left)


def in_expansion(api: Any) -> bool:
    """Is the checker inside one of mypy's copies of a function whose type
    variables (its own or its class's) have values?  mypy checks such a
    function once per choice of values, and the function in scope is then
    the generic original."""
    scope = getattr(api, "scope", None)
    fn = scope.current_function() if scope is not None else None
    if fn is None:
        return False
    sig = get_proper_type(getattr(fn, "type", None))
    variables = list(sig.variables) if isinstance(sig, CallableType) else []
    info = fn.info
    if info is not None and info is not FUNC_NO_INFO:
        variables += list(info.defn.type_vars or [])
    return any(isinstance(v, TypeVarType) and v.values for v in variables)


def configuration_values(api: Any, expr: Any) -> Optional[List[Type]]:
    """The values of the variable that types `expr`, when `expr` names a
    parameter declared with a variable with values and mypy is checking one
    of the function's expansions (the parameter then has one of the values:
    it witnesses which choice this expansion is); else None."""
    if not isinstance(expr, NameExpr) or not in_expansion(api):
        return None
    fn = api.scope.current_function()
    sig = get_proper_type(fn.type)
    if not isinstance(sig, CallableType):
        return None
    for arg, formal in zip(fn.arguments, sig.arg_types):
        if arg.variable.name == expr.name:
            found = value_variable(formal)
            return found[1] if found is not None else None
    return None


def never() -> Type:
    """The type of a call after which mypy treats the code as unreachable."""
    return UninhabitedType()


_RESTORED: List[Any] = [None]  # the copy last restored (checked once per copy)
_BODY: List[Any] = [None]  # the binder of the body last looked at (holding it keeps its id unused)


def restore_parameters(api: Any) -> None:
    """Let a parameter be rebound in a per-value copy of a function.

    mypy copies a function per choice of its type variables' values
    (expand_func), and the copies' parameters lose `is_argument`, which
    `allow_redefinition` needs to rebind a parameter to another type
    (`h = h + residual`: S(0) + S(0) is V).  The copy being checked is the
    last of the original's `expanded`; this restores the flag there.  Called
    from hooks that run early in a body (attribute reads, module calls, ops):
    the first statement of a body, if it rebinds a parameter, is checked
    before any of them (a limit in the README).

    mypy checks each body (each copy, each pass) with a binder of its own,
    so the steps below run once per body: the common call, a hook's in a
    body already looked at, ends at the first test."""
    binder = getattr(api, "binder", None)
    if binder is _BODY[0] and binder is not None:
        return
    _BODY[0] = binder
    scope = getattr(api, "scope", None)
    fn = scope.current_function() if scope is not None else None
    copies = getattr(fn, "expanded", None)
    if not copies or copies[-1] is _RESTORED[0]:
        return
    copy = _RESTORED[0] = copies[-1]
    if copy is not fn:
        for arg in copy.arguments:
            arg.variable.is_argument = True


def has_type_vars(typ: Type) -> bool:
    """Whether a type holds a type variable (a result generic in its function's own)."""
    return _has_type_vars(typ)
