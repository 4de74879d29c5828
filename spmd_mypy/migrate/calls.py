"""One recognised helper call -> the typed call it equals (or the reason it cannot be).

Pure functions over libcst nodes: bind the call's arguments to the helper's
signature (table.py), read its literal flags, and build the replacement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple, Union

import libcst as cst

from .table import Helper


@dataclass(frozen=True)
class Typed:
    """A typed call to write: `op(tensor, axis, src=src, dst=dst[, split_sizes=sizes])`."""

    op: str
    src: str
    dst: str
    tensor: cst.BaseExpression
    axis_name: Optional[str]  # the --axis name, or None when `axis_expr` is a group expression
    axis_expr: Optional[cst.BaseExpression]
    sizes: Optional[cst.BaseExpression]
    default_axis: Optional[str] = None  # the axis of a group that may be None: `g if g is not None else "tp"`


def literal(expr: cst.BaseExpression) -> Optional[str]:
    """The source text of a literal True/False/None or int, else None."""
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return expr.value
    if isinstance(expr, cst.Integer):
        return str(int(expr.evaluated_value))
    if (
        isinstance(expr, cst.UnaryOperation)
        and isinstance(expr.operator, cst.Minus)
        and isinstance(expr.expression, cst.Integer)
    ):
        return str(-int(expr.expression.evaluated_value))
    return None


def bind(helper: Helper, call: cst.Call) -> Union[Dict[str, cst.BaseExpression], str]:
    """The call's arguments by parameter name, or why they cannot be bound."""
    names = helper.names()
    required = [p for p in helper.params if "=" not in p]
    bound: Dict[str, cst.BaseExpression] = {}
    for i, arg in enumerate(call.args):
        if arg.star:
            return "called with *args or **kwargs: the arguments are not known statically"
        if arg.keyword is None:
            if i >= len(names):
                return f"more positional arguments than its {len(names)} parameters"
            bound[names[i]] = arg.value
            continue
        key = arg.keyword.value
        if key not in names or key in bound:
            return f"keyword argument {key}= is not a parameter of the helper"
        bound[key] = arg.value
    missing = [p for p in required if p not in bound]
    if missing:
        return f"no argument for {', '.join(missing)}"
    return bound


def _value(helper: Helper, bound: Dict[str, cst.BaseExpression], name: str) -> Optional[str]:
    return literal(bound[name]) if name in bound else helper.defaults()[name]


def typed_call(
    helper: Helper, call: cst.Call, axis: str, code: Callable[[cst.CSTNode], str]
) -> Union[Typed, str]:
    """The typed call `call` equals, or why it is not converted.

    `code` renders a node (for messages).
    """
    bound = bind(helper, call)
    if isinstance(bound, str):
        return bound
    src, dst = helper.src, helper.dst
    for name, table in helper.choices.items():
        text = _value(helper, bound, name)
        if text is None or text not in table:
            given = "a non-literal value" if text is None else text
            return f"{name}= is {given}: the typed call depends on it (write True or False)"
        src, dst = table[text].get("src", src), table[text].get("dst", dst)
    dims: Dict[str, str] = {}
    for name in helper.dims:
        text = _value(helper, bound, name)
        if text is None or text in ("True", "False", "None"):
            return f"{name}= is not an int literal: the sharded dim is not known statically"
        dims[name] = text
    src, dst = src.format(**dims), dst.format(**dims)
    for name in helper.drop:
        if name in bound and literal(bound[name]) != helper.defaults()[name]:
            return f"{name}={code(bound[name])} has no typed equivalent (only its default)"
    sizes = bound.get(helper.sizes) if helper.sizes else None
    if sizes is not None and literal(sizes) == "None":
        sizes = None
    group = bound.get(helper.group) if helper.group else None
    if group is not None and literal(group) == "None":
        group = None
    optional = helper.optional_group and isinstance(group, (cst.Name, cst.Attribute))
    return Typed(
        helper.op, src, dst, bound[helper.tensor], axis if group is None else None, group, sizes,
        axis if optional else None,
    )


_X, _AXIS, _SIZES = "__spmd_migrate_x__", "__spmd_migrate_axis__", "__spmd_migrate_sizes__"


class _Fill(cst.CSTTransformer):
    def __init__(self, nodes: Dict[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.nodes = nodes

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        found = self.nodes.get(updated.value)
        return updated if found is None else found.deep_clone()  # a placeholder may stand twice


def fill(template: str, nodes: Dict[str, cst.BaseExpression]) -> cst.BaseExpression:
    """Parse `template` and put each node in place of the placeholder name it is keyed by."""
    return cst.parse_expression(template).visit(_Fill(nodes))  # type: ignore[return-value]


def build(typed: Typed, module_alias: str, type_text: "TypeText") -> cst.BaseExpression:
    """The replacement expression for a typed call."""
    axis = repr(typed.axis_name).replace("'", '"') if typed.axis_name is not None else _AXIS
    if typed.default_axis is not None:  # a group that may be None: the axis's own then
        axis = f'{_AXIS} if {_AXIS} is not None else "{typed.default_axis}"'
    sizes = f", split_sizes={_SIZES}" if typed.sizes is not None else ""
    template = (
        f"{module_alias}.{typed.op}({_X}, {axis}, src={type_text(typed.src)}, "
        f"dst={type_text(typed.dst)}{sizes})"
    )
    nodes: Dict[str, cst.BaseExpression] = {_X: typed.tensor}
    if typed.axis_expr is not None:
        nodes[_AXIS] = typed.axis_expr
    if typed.sizes is not None:
        nodes[_SIZES] = typed.sizes
    return fill(template, nodes)


class TypeText:
    """Writes a type ("I", "S(-1)") with the bare name or qualified by the module alias."""

    def __init__(self, module_alias: str, bare: Tuple[str, ...]) -> None:
        self.module_alias = module_alias
        self.bare = bare

    def __call__(self, text: str) -> str:
        head = text.split("(", 1)[0]
        return text if head in self.bare else f"{self.module_alias}.{text}"
