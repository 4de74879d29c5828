"""nn.Module as people write it: torch's module classes subclassed with SPMD
declarations, their inherited forward, module lists and named-tuple results.

- A subclass of nn.Linear, nn.Embedding, nn.LayerNorm or nn.RMSNorm
  (vocab.torch_classes.FUNCTIONAL_MODULES) declares `weight` / `bias` with
  SPMD types.  torch types them Tensor or Parameter, so a carrier, or an
  Optional one, is no subtype of what the base declares: mypy's check of the
  redeclaration reads the base's attribute through the attribute hook here,
  which answers with the subclass's own declaration (a non-tensor
  redeclaration keeps torch's type and mypy's error).  An annotated forward
  that differs from torch's only by carriers is no [override] either
  (forgive_carrier_overrides).
- Their inherited forward is the functional op the table names:
  `layer(x)`, `layer.forward(x)` and `super().forward(x)` are typed as
  `F.linear(x, layer.weight, layer.bias)` (`F.embedding`, `F.layer_norm`,
  `F.rms_norm`) on the declared attribute types, by the op tables' rules
  and with their messages.  An Optional bias is taken as present.
- `nn.ModuleList([Block(...) for ...])` of one module class is, in a file
  that uses spmd, `spmd_phantom.ModuleListOf[Block]`: a ModuleList whose
  iteration and int indexing give Block, so `for layer in self.layers:
  layer(x)` is routed to Block.forward.  So is `nn.ModuleList()` filled by
  `append(Block(...))`, and `nn.ModuleDict()` filled by `d[key] =
  Block(...)` is `ModuleDictOf[Block]` (its values, items and `d[key]`),
  when every write in the class's methods puts in that one class
  (_mypy.written_modules).
- `.values` / `.indices` of torch.return_types named tuples (max, min, topk,
  sort, kthvalue, ...) are the tuple's items as the op hook typed them;
  indices carry no gradient.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ..vocab.spec import Spmd
from ..vocab.torch_classes import FUNCTIONAL_MODULES, INDEX_FIELDS, NAMED_RESULTS
from . import _mypy, ops, relation
from .annotations import mentions_spmd
from .callsite import plain_outside_spmd
from .carrier import carrier, spmd_of
from .errors import CODES
from .guard import default_attr, default_return, guarded
from .untyped_regions import declares_spmd

Hook = Callable[[Any], Any]

def _input(ctx: Any) -> Optional[Tuple[_mypy.Expression, _mypy.Type]]:
    """The tensor a forward call passes (first positional, or `input=`)."""
    for name, expr, typ in _mypy.call_args(ctx):
        if name is None or name == "input":
            return expr, typ
    return None


def _functional_forward(
    ctx: Any,
    owner: str,
    receiver: Any,
    given: Optional[Tuple[_mypy.Expression, _mypy.Type]] = None,
    base: Optional[_mypy.Expression] = None,
) -> _mypy.Type:
    """A call of `owner`'s forward on `receiver`: its functional op on the
    receiver's declared attribute types.  `given`: the input (by default the
    call's), `base`: the module's expression in messages (by default the
    call's receiver)."""
    module = FUNCTIONAL_MODULES[owner]
    given = given or _input(ctx)
    if given is None:
        return ctx.default_return_type
    base = base or _mypy.receiver_expr(ctx.context)
    formals: List[Tuple[str, _mypy.Expression, _mypy.Type]] = [("input", given[0], given[1])]
    for name in module.parameters:
        typ = _mypy.without_none(_mypy.attribute_read(ctx.api, receiver, name, ctx.context))
        if typ is not None and _mypy.is_tensor(typ):
            formals.append((name, _mypy.member(base, name), typ))
    unseen: List[str] = []
    for name, position in module.settings:  # the dim of nn.Softmax(dim=...)
        value = _mypy.constructor_argument(base, name, position)
        if value is None:
            value = _mypy.member(base, name)
            unseen.append(_mypy.expr_text(value))
        formals.append((name, value, ctx.api.named_generic_type("builtins.int", [])))
    call = _mypy.op_call(ctx.api, ctx.context, formals, _mypy.plain_tensor(ctx.api))
    if not unseen:
        return ops.shared_op_hook(module.op, "functional")(call)
    mark = _mypy.error_mark(ctx.api)
    result = ops.shared_op_hook(module.op, "functional")(call)
    _mypy.reword_since(mark, CODES, _settings_unseen(module.op, unseen))
    return result


_NOT_LITERAL = "has arguments that are not literals, so its rule cannot be checked"


def _settings_unseen(op: str, settings: List[str]) -> Callable[[str], str]:
    """Global code's message on a module whose setting (`self.sm.dim`) the
    call does not show: it names the setting, and the hint the two calls
    that show it."""

    def reword(message: str) -> str:
        if _NOT_LITERAL not in message:
            return message
        head = message.partition(". Hint: ")[0].replace(
            _NOT_LITERAL, f"runs with {', '.join(settings)}, set where the module is built (the checker reads it "
            "only from a constructor call written in the call), so its rule cannot be checked")
        return f"{head}. Hint: call F.{op}(..., {settings[0].rpartition('.')[2]}=...) with the value written, or gather it first"

    return reword


def _module_call(ctx: Any) -> _mypy.Type:
    """`layer(x)`: a module whose forward is a table op's, else relation's
    routing.  A result without an SPMD type, in a file that never mentions
    spmd, is mypy's own (Any: Module.__call__), as relation's routing gives.
    An nn.Sequential of known modules has its own hook (sequential_call_hook)."""
    found = _mypy.forward_owner(ctx.type)
    if found is not None and found[0] in FUNCTIONAL_MODULES:
        return plain_outside_spmd(ctx, _functional_forward(ctx, *found))
    return relation.module_call_hook(ctx)


def forward_method_hook(fallback: Hook) -> Hook:
    """`layer.forward(x)`: torch's forward of a table class, else `fallback`."""

    def hook(ctx: Any) -> _mypy.Type:
        found = _mypy.forward_owner(ctx.type)
        if found is not None and found[0] in FUNCTIONAL_MODULES:
            return _functional_forward(ctx, *found)
        chain = _mypy.chained_modules(ctx.type)
        if chain is not None:  # seq.forward(x) of a known nn.Sequential: as seq(x)
            return _chain_call(ctx, chain, getattr(getattr(ctx.context, "callee", None), "expr", None))
        return fallback(ctx)

    return guarded(hook, default_return)


def _super_forward(fallback: Hook) -> Hook:
    """`super().forward(x)`: mypy names the callee "forward of Linear" (no
    module path), so a user class of the same name gets `fallback`."""

    def hook(ctx: Any) -> _mypy.Type:
        found = _mypy.super_forward_owner(ctx.context)
        if found is None or found[0] not in FUNCTIONAL_MODULES:
            return fallback(ctx)
        return _functional_forward(ctx, *found)

    return guarded(hook, default_return)


def _redeclared(base: str, name: str) -> Hook:
    """The attribute `name` of torch's `base` as a subclass sees it: its own
    SPMD declaration when it makes one."""

    def hook(ctx: Any) -> _mypy.Type:
        declared = _mypy.declared_below(ctx.type, base, name)
        return declared if declared is not None else ctx.default_attr_type

    return guarded(hook, default_attr)


def _field(index: int, nograd: bool) -> Hook:
    """Field `index` of a torch.return_types named tuple: the tuple's item."""

    def field_of(ctx: Any, typ: _mypy.Type) -> Optional[_mypy.Type]:
        found = _mypy.named_result(typ)
        if found is None or index >= len(found[1]):
            return None
        item = found[1][index]
        spmd = spmd_of(item)
        if spmd is None or not nograd:
            return item
        return carrier(ctx.api, Spmd.of(spmd.axes, spmd.spec, True, spmd.rest))

    def hook(ctx: Any) -> _mypy.Type:
        if ctx.is_lvalue:
            return ctx.default_attr_type
        # from two branches (`u.max(dim=0).values`): mypy gives the whole Union
        found = [field_of(ctx, t) for t in _mypy.union_items(ctx.type)]
        fields = [f for f in found if f is not None]
        if len(fields) < len(found):
            return ctx.default_attr_type
        return fields[0] if len(fields) == 1 else _mypy.union_of(fields)

    return guarded(hook, default_attr)


def _module_list(ctx: Any) -> _mypy.Type:
    """nn.ModuleList(modules) of one module class, or nn.ModuleList() filled
    with one class by append/insert/item writes: ModuleListOf[that class]."""
    return _one_class(ctx, MODULE_LIST_OF)


def _module_dict(ctx: Any) -> _mypy.Type:
    """nn.ModuleDict({...}) of one module class, or nn.ModuleDict() filled by
    `d[key] = Block(...)`: ModuleDictOf[that class]."""
    return _one_class(ctx, MODULE_DICT_OF)


def _one_class(ctx: Any, phantom: str) -> _mypy.Type:
    """The container constructor's type `phantom`[M] when every module given
    to it and written into its target afterwards is of the one class M."""
    default = ctx.default_return_type
    given = ctx.args[0] if ctx.args and ctx.args[0] else []
    element = _mypy.element_class(ctx.api, given[0]) if given else None
    if given and element is None:
        return default
    if not mentions_spmd(_mypy.checker_path(ctx.api), _mypy.check_owner(ctx.api)):
        return default  # the stub's class only where the file depends on the stub
    if not _mypy.assigned_once(ctx.api, ctx.context):
        return default  # assigned another list in another branch: no one class
    written = _mypy.written_modules(ctx.api, ctx.context)
    if written is None:
        return default  # filled some other way (extend, update, ...): no one class known
    classes = [element, *written] if element is not None else written
    if not classes or any(c.type is not classes[0].type for c in classes):
        return default
    typed = _mypy.phantom_generic(ctx.api, phantom, classes[0])
    return typed if typed is not None else default


def _sequential(ctx: Any) -> _mypy.Type:
    """nn.Sequential(m1, m2, ...) of module instances: SequentialOf[Tuple[M1, M2, ...]]."""
    default = ctx.default_return_type
    if not mentions_spmd(_mypy.checker_path(ctx.api), _mypy.check_owner(ctx.api)):
        return default  # the stub's class only where the file depends on the stub
    if not _mypy.assigned_once(ctx.api, ctx.context):
        return default  # assigned another chain in another branch: torch's type
    typed = _mypy.sequential_of(ctx)
    return typed if typed is not None else default


def _sequential_call(ctx: Any) -> _mypy.Type:
    """`seq(x)` of an nn.Sequential of known modules (mypy names the call
    by the receiver's class: SEQUENTIAL_OF_CALL): each module's forward
    on the result of the one before, checked as a call of it.  A mismatch
    inside is reported at the call, the value named by the expression that
    computes it (`self.seq[0](x)`)."""
    chain = _mypy.chained_modules(ctx.type)
    if chain is None:
        return _module_call(ctx)
    return _chain_call(ctx, chain, getattr(ctx.context, "callee", None))


def _chain_call(ctx: Any, chain: List[Any], callee: Optional[_mypy.Expression]) -> _mypy.Type:
    """The call of the nn.Sequential `callee` (its expression) on one tensor:
    the chain's forwards in order, each checked as a call."""
    given = _input(ctx)
    if given is None or callee is None or len(_mypy.call_args(ctx)) != 1:
        return ctx.default_return_type
    expr, typ = given
    seq, value = _mypy.expr_text(callee), _mypy.expr_text(expr)
    for i, module in enumerate(chain):
        if not i:
            typ = _through(ctx, module, (expr, typ), f"{seq}[0]")
            continue
        value = f"{seq}[{i - 1}]({value})"  # the previous module's output, as its messages name it
        text = value if len(value) <= 120 else f"{seq}[{i - 1}](...)"
        mark = _mypy.error_mark(ctx.api)
        typ = _through(ctx, module, (_mypy.message_expr(text, ctx.context), typ), f"{seq}[{i}]")
        _mypy.reword_since(mark, CODES, _inside(text, seq, i))
    return typ


def _inside(text: str, seq: str, i: int) -> Callable[[str], str]:
    """The messages about `text`, a value inside the nn.Sequential `seq`
    (naming it, or the forward of module `i`), with a hint no code can
    apply (a call on `text`) replaced by one in words: the fix goes between
    two of its modules."""

    label = f'"{seq}[{i}].forward"'

    def reword(message: str) -> str:
        head = message.partition(". Hint: ")[0]
        if text not in message and label not in head:
            return message  # another error held back in the same body
        return (
            f"{head}. Hint: this value passes from {seq}[{i - 1}] to {seq}[{i}] inside the nn.Sequential; "
            f"call the two apart and convert it between them"
        )

    return reword


def _through(ctx: Any, module: Any, given: Tuple[_mypy.Expression, _mypy.Type], name: str) -> _mypy.Type:
    """The result of module `name`'s forward on `given`, checked."""
    found = _mypy.forward_owner(module)
    if found is not None and found[0] in FUNCTIONAL_MODULES:
        return _functional_forward(ctx, found[0], module, given, _mypy.message_expr(name, ctx.context))
    fwd = _mypy.forward_of(module)
    return relation.call_through(ctx, fwd, f"{name}.forward", [(None, *given)])


def table_forward(
    ctx: Any, module: _mypy.Type, base: _mypy.Expression, given: Tuple[_mypy.Expression, _mypy.Type]
) -> Optional[_mypy.Type]:
    """`given` through the forward of `module` (written `base`) when its class
    is a table row (nn.GELU, a Linear subclass): its functional op, checked;
    None for any other module."""
    found = _mypy.forward_owner(module)
    if found is None or found[0] not in FUNCTIONAL_MODULES:
        return None
    return _functional_forward(ctx, found[0], found[1], given, base)


def watched_chain(ctx: Any) -> Optional[_mypy.CallableType]:
    """The forward report_untyped judges `seq(x)` by: that of the chain's
    first module that declares no SPMD types and is no table class (None:
    all do); the forward as written when the receiver is no known chain."""
    chain = _mypy.chained_modules(ctx.type)
    if chain is None:
        return _mypy.forward_as_written(ctx)
    for module in chain:
        found = _mypy.forward_owner(module)
        if found is not None and found[0] in FUNCTIONAL_MODULES:
            continue
        sig = _mypy.forward_as_written(ctx, module)
        if sig is None or not declares_spmd(sig):
            return sig
    return None


MODULE_LIST = "torch.nn.modules.container.ModuleList"
MODULE_LIST_OF = "ModuleListOf"
MODULE_DICT = "torch.nn.modules.container.ModuleDict"
MODULE_DICT_OF = "ModuleDictOf"
_SHORT = {fullname.rpartition(".")[2]: fullname for fullname in FUNCTIONAL_MODULES}


def function_hooks(fallback: Callable[[str], Hook]) -> Dict[str, Hook]:
    """`super().forward(x)` of a table class, and the constructors of
    ModuleList, ModuleDict and Sequential.
    `fallback(name)` is the hook the plugin gives a user callee of that name."""
    table = {f"forward of {short}": _super_forward(fallback(f"forward of {short}")) for short in _SHORT}
    table[MODULE_LIST] = guarded(_module_list, default_return)
    table[MODULE_DICT] = guarded(_module_dict, default_return)
    table[_mypy.SEQUENTIAL] = guarded(_sequential, default_return)
    return table


# mypy names a method call by the receiver's class (`model.Block.__call__`):
# the plugin routes every `.__call__` here, and `.forward` through
# forward_method_hook.
module_call_hook = guarded(_module_call, default_return)
SEQUENTIAL_OF_CALL = f"{_mypy.PHANTOM_MODULE}.SequentialOf.__call__"
sequential_call_hook = guarded(_sequential_call, default_return)

ATTRIBUTE_HOOKS: Dict[str, Hook] = {
    **{
        f"{fullname}.{name}": _redeclared(fullname, name)
        for fullname, module in FUNCTIONAL_MODULES.items()
        for name in module.parameters
    },
    **{
        f"torch.return_types.{result}.{field}": _field(i, field in INDEX_FIELDS)
        for result, fields in NAMED_RESULTS.items()
        for i, field in enumerate(fields)
    },
}


_TABLE_CLASSES = set(FUNCTIONAL_MODULES)


def forgive_carrier_overrides(api: Any) -> None:
    """Inside a method body: if it is a forward that differs from its table
    base's only by carriers, or an override returning tensors of unknown
    type where the method it overrides declares their types, mypy's
    [override] errors for it are ignored (_mypy.ignore_carrier_overrides,
    _mypy.ignore_unknown_result_overrides; declared.py calls this at
    returns, which mypy checks before the override)."""
    _mypy.ignore_carrier_overrides(api, _TABLE_CLASSES, "forward")
    _mypy.ignore_unknown_result_overrides(api)
