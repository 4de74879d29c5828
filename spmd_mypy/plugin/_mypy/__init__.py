"""Every use of mypy by the plugin, in one package.

The plugin API is not stable across mypy releases and part of what the plugin
needs is internal (the analyzer's current file, binding `self`, the two
checker methods wrapped in calls.py).  Everything that touches mypy lives
under this package, so a mypy upgrade is its work.  Tested range: see
pyproject.toml.  The rest of the plugin imports from here only:

  carriers        reading and building carrier types (SpmdTensor[Literal[...]])
  tensor_types    types that hold tensors: replacing, relaxing, matching
  expressions     literal values, callee names, source text for hints
  calls           the checker side of a call: errors, arguments, re-typing
  call_keys       a call hook's question as one key; a watch on the errors it reports
  op_calls        what the op hooks' quick lane reads of a call, in one pass
  analyzer        the semantic analyzer side: lookups, aliases, type spans
  annotated       Annotated[X, ...] as the type analyzer reads it: what X is
  tree            the stub module's calls in a tree; walking statements
  route_declared  rewrite pass: returns and annotated assignments
  route_items     rewrite pass, part of route_declared: a TypedDict's constructor keywords
  wrap_untyped    rewrite pass: calls torch leaves untyped
  collective_calls calls of untyped library collectives (torch.distributed.nn.functional)
  spmd_types_tree rewrite pass: spmd_types' asserting statements; reading its arguments
  dtensor_types   DTensors with known placements (PlacedDTensor), the mesh a call names
  spmd_types_regions rewrite pass: spmd_types' no_typecheck regions, local_map and
                  typecheck-hook boundaries, is_type_checking blocks
  rewrites        when the passes run (before analysis, or from the analyzer)
  writes          the value of an attribute write, typed ahead without messages
  members         classes and members: whose forward runs, redeclared attributes
  overrides       overrides of a torch method that differ only by carriers
  partial_sites   where code declares a product a pending sum (a look-ahead)
  finals          the value of a module-level Final name; a type alias's target
  signatures      signatures built from declared types (spmd.trusted)
  group_types     process groups that stand for mesh axes (AxisGroup[...]), rank numbers (RankOf[...])
  typevars        type variables with values: layouts that follow a configuration
  configurations  each configured function checked once per configuration
  reword          messages in the user's vocabulary (rewording what a hook reported)
  grad_sites      the gradient-sync contract on the tree: a function's calls and loops,
                  a module class's declared parameters and ties, aliases of a name
  scopes          the function being checked, the function an expression names
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Dict, Tuple

from mypy.errorcodes import ErrorCode
from mypy.nodes import Context, Expression
from mypy.plugin import (
    AnalyzeTypeContext,
    AttributeContext,
    FunctionContext,
    FunctionSigContext,
    MethodContext,
    MethodSigContext,
    Plugin,
    ReportConfigContext,
)
from mypy.types import CallableType, Type

from .annotated import ANNOTATED, annotated_inner, bare_first, read_class
from .alias_values import ALIAS_VALUE, alias_value_argument, alias_value_in_analyzer
from .analyzer import (
    alias_holding_carrier,
    alias_reference,
    analyzer_lookup,
    analyzer_path,
    annotation_spans,
    default_type,
    mark_alias_target,
    module_tree,
    stdlib_modules,
    stub_findable,
    type_position,
)
from .call_keys import call_key, error_watch, types_by_value, written_call
from .op_calls import collective_question, simple_operands
from .calls import (
    CHECKPOINT, PARTIAL, checkpointed, given_function, identity_decorator, mypys_partial, partial_parts,
    autograd_function_forward,
    declares_apply,
    call_args, size_rank,
    call_context,
    checker_path,
    declared_parameters,
    declared_return,
    error_code,
    expression_type,
    fail,
    fail_past_filters, errors_held,
    first_args,
    formal_args,
    formal_groups,
    forward_as_written, forward_of,
    forward_definition,
    forward_signature,
    note,
    recheck,
    report_as_plain,
    type_context,
    typed_before, typed_already, callee_definition,
    untyped_call,
)
from .carriers import (
    CARRIER,
    TENSOR,
    PARAMETER,
    analysis_owner,
    carried,
    carrier_in_analyzer,
    carrier_in_checker,
    check_owner,
    checked_tree,
    is_any,
    is_carrier,
    is_python_number,
    is_tensor,
    phantom_generic,
    plain_tensor, with_tensor_default,
    plain_tensor_in_analyzer,
    plain_parameter_in_analyzer,
    plain_tensor_like,
    unknown_carrier,
)
from .fresh_locals import fresh_binding, holds_zeros, operator_assigned, rebind_local, retype_zeros
from .fresh_locals import retype_sum, zeros_candidate, zeros_operand
from .expressions import (
    NOT_LITERAL, UNRENDERED, operator_operands,
    call_parts, copied_sequence, split_source, comprehension_element, starred, makes_zeros, makes_fresh, call_receiver, assignable,
    display_items,
    expr_text,
    fullname_of,
    int_value,
    is_false,
    is_operator,
    is_none_expr,
    is_true,
    literal_value,
    operator_sides,
    str_tuple,
    str_value,
    is_name,
    typed_in_context,
)
from .members import (
    SEQUENTIAL, chained_modules, message_expr, sequential_of,
    attribute_read, constructor_argument,
    declared_below,
    element_class,
    forward_owner,
    holds_carrier,
    member,
    module_class,
    named_result,
    op_call,
    receiver_expr,
    super_forward_owner,
    without_none,
)
from .assignments import assigned_once, written_modules
from .overrides import ignore_carrier_overrides, ignore_unknown_result_overrides
from .region_errors import any_region, on_first_region, region_errors_dropped, region_lines
from .reword import error_mark, reword_since
from .group_types import (
    GROUP_CARRIER,
    PROCESS_GROUP,
    group_in_analyzer,
    group_in_checker,
    group_text,
    enum_member_value, is_process_group, literal_str, mesh_group_axis, plain_group_in_analyzer,
    relax_group, RANK_CARRIER, rank_in_checker, rank_texts, argument_rank_texts, with_rank_ints,
    is_plain_int, rank_in_analyzer, declared_rank_text, relax_rank,
)
from .scopes import (
    MODULE_SCOPE,
    bodies_not_checked_yet,
    call_position,
    checker_identity,
    checking_function,
    from_cache,
    named_function,
)
from .rewrites import route_declared_values, route_in_analyzer, routed_in_analyzer, routed_whole
from .tensor_types import (
    attribute_write_type,
    callable_of,
    container_kind,
    display_parts,
    element_types,
    has_tensor,
    has_tensor_deep,
    holds_carriers_already,
    carrier_name_type,
    erase_carriers,
    fits_as_plain,
    fits_plain_name,
    literal_bool,
    needs_relaxing,
    plain_tensor_container,
    plain_write_type,
    relax_tensors,
    relaxed_typeddict_display,
    relaxes_plain,
    replace_tensors,
    tensor_pairs,
    tuple_items,
    type_arguments,
    typeddict_with_plain_lists,
    builds_typeddict,
    typeddict_of_tensors,
    has_carrier_deep,
    union_alternatives,
    union_items,
    union_of,
    with_arg_types,
    with_signature,
    with_tuple_items,
)
from .dtensor_types import DTENSOR_MODULE, imports_dtensor, later_partners, mesh_names, placed_dtensor, placed_of
from .raw_writes import RAW_WRITE, call_argument, raw_write_call
from .tree import ASSIGNED, KEYWORD_ITEM, PHANTOM_MODULE, REASSIGNED, RETURNED, TRUSTED_APPLY, UNTYPED
from .configurations import (
    FLAG_NAMES,
    MARKER_CALL as CONFIGURATION_MARKER_CALL,
    MARKER_TYPE as CONFIGURATION_MARKER_TYPE,
    configuration_variable,
    configure_since,
    current as current_configuration,
    declared_in as configuration_declared,
    declared_parameter,
    literal_of,
    on_new_flag,
    parameter_types,
    return_type,
    set_parameter_types,
    set_return_type,
)
from .typevars import choose, configuration_values, has_type_vars, in_expansion, never, restore_parameters, value_variable
from .writes import branches, parameter_calls, plain_tensor_call, quietly_typed, written_value

from .finals import alias_target, enum_alias, final_name, module_file, module_value, owning_module, resolve_in_module
from .partial_sites import declared_partial, source_text, span

# The submodules only features use (spmd_types, gradient sync, spmd.trusted,
# calls torch leaves untyped): a feature module reads them after
# `_mypy.load(...)` at its top, so a project without the feature never
# imports them.  (A module-level __getattr__ would do it implicitly, but it
# keeps every `_mypy.x` read off Python's specialised module-attribute path:
# about 30 million instructions more on bench_scale's 10,000 lines.)
if TYPE_CHECKING:
    from .collective_calls import has_star_args, member_fullname, tensor_tuple, with_default_return
    from .signatures import (
        checked_class_name, decorated_class, decorated_function, has_trusted_apply, positional_signature, takes_var_args,
    )
    from .wrap_untyped import wrap_untyped_calls
    from .spmd_types_tree import dict_entries, enum_value, instance_fullname
    from .spmd_types_rules import (
        class_in_file,
        conditional,
        hook_function,
        int_tuple,
        is_none_type,
        name_of,
        rule_call,
        rule_steps,
    )
    from .spmd_types_regions import decorator_call, none_literal, tuple_display
    from .typecheck_hooks import Asserted, keyword_arg, remember_hooks, typecheck_hooks_of
    from .grad_sites import (
        CallSite,
        DeclaredParam,
        alias_source,
        assignments,
        at_line,
        bound_arguments,
        called_function,
        calls_of_function,
        current_function,
        known_type,
        listed_items,
        loop_binding,
        member_path,
        method_call_of,
        module_functions,
        module_parameters,
        name_type,
        reads_after,
    )

_FEATURE_NAMES: Dict[str, Tuple[str, ...]] = {
    "collective_calls": ("has_star_args", "member_fullname", "tensor_tuple", "with_default_return"),
    "signatures": ("positional_signature", "takes_var_args", "decorator_call", "decorated_function",
                   "decorated_class", "keyword_arg", "has_trusted_apply", "checked_class_name"),
    "wrap_untyped": ("wrap_untyped_calls",),
    "spmd_types_tree": ("dict_entries", "enum_value", "instance_fullname"),
    "spmd_types_rules": (
        "class_in_file", "conditional", "hook_function", "int_tuple", "is_none_type", "name_of", "rule_call",
        "rule_steps",
    ),
    "spmd_types_regions": (
        "Asserted", "decorator_call", "keyword_arg", "none_literal", "remember_hooks", "tuple_display",
        "typecheck_hooks_of",
    ),
    "grad_sites": (
        "CallSite", "DeclaredParam", "alias_source", "assignments", "at_line", "bound_arguments", "called_function",
        "calls_of_function", "current_function", "known_type", "listed_items", "loop_binding", "member_path",
        "method_call_of", "module_functions", "module_parameters", "name_type", "reads_after",
    ),
}


def load(*modules: str) -> None:
    """Import these feature submodules and bind their names here (idempotent)."""
    for module in modules:
        if _FEATURE_NAMES[module][0] not in globals():
            found = importlib.import_module("." + module, __name__)
            for name in _FEATURE_NAMES[module]:
                globals()[name] = getattr(found, name)

__all__ = [
    "load", "MODULE_SCOPE", "bodies_not_checked_yet", "call_position", "checker_identity", "checking_function",
    "named_function", "from_cache",
    # call_keys, op_calls
    "call_key",
    "error_watch",
    "written_call",
    "types_by_value",
    "collective_question",
    "simple_operands",
    # mypy's own types the plugin names
    "AnalyzeTypeContext",
    "AttributeContext",
    "CallableType",
    "Context",
    "ErrorCode",
    "Expression",
    "FunctionContext",
    "FunctionSigContext",
    "MethodContext",
    "MethodSigContext",
    "Plugin",
    "ReportConfigContext",
    "Type",
    # grad_sites
    "CallSite",
    "DeclaredParam",
    "alias_source",
    "assignments",
    "at_line",
    "bound_arguments",
    "called_function",
    "calls_of_function",
    "current_function",
    "known_type",
    "listed_items",
    "loop_binding",
    "member_path",
    "method_call_of",
    "module_functions",
    "module_parameters",
    "name_type",
    "reads_after",
    # dtensor_types
    "DTENSOR_MODULE",
    "imports_dtensor",
    "later_partners",
    "mesh_names",
    "placed_dtensor",
    "placed_of",
    # spmd_types_tree, spmd_types_regions
    "Asserted",
    "decorator_call",
    "keyword_arg",
    "none_literal",
    "tuple_display",
    "typecheck_hooks_of",
    "remember_hooks",
    "class_in_file",
    "conditional",
    "hook_function",
    "int_tuple",
    "is_none_type",
    "name_of",
    "rule_call",
    "rule_steps",
    "instance_fullname",
    "dict_entries",
    "enum_value",
    "enum_member_value",
    "is_process_group",
    "literal_str",
    "mesh_group_axis",
    # analyzer
    "alias_holding_carrier",
    "alias_reference",
    "analyzer_lookup",
    "analyzer_path",
    "annotation_spans",
    "default_type",
    "mark_alias_target",
    "module_tree",
    "stdlib_modules",
    "stub_findable",
    "type_position",
    # region_errors
    "any_region",
    "on_first_region",
    "region_errors_dropped",
    "region_lines",
    # reword
    "error_mark",
    "reword_since",
    # calls
    "autograd_function_forward", "declares_apply",
    "call_args", "size_rank",
    "call_context",
    "checker_path",
    "declared_parameters",
    "declared_return",
    "error_code",
    "expression_type",
    "fail",
    "fail_past_filters", "errors_held",
    "first_args",
    "formal_args",
    "formal_groups",
    "forward_as_written", "forward_of",
    "forward_definition",
    "forward_signature",
    "note",
    "recheck",
    "type_context",
    "typed_before",
    "untyped_call",
    # carriers
    "CARRIER",
    "TENSOR",
    "CHECKPOINT", "PARTIAL", "checkpointed", "given_function", "identity_decorator", "mypys_partial", "partial_parts",
    "ANNOTATED", "annotated_inner", "bare_first", "read_class",
    "ALIAS_VALUE", "alias_value_argument", "alias_value_in_analyzer",
    "PARAMETER",
    "analysis_owner",
    "carried",
    "carrier_in_analyzer",
    "carrier_in_checker",
    "check_owner",
    "checked_tree",
    "is_any",
    "is_carrier",
    "is_python_number",
    "is_tensor",
    "phantom_generic",
    "plain_tensor", "with_tensor_default",
    "plain_tensor_in_analyzer",
    "plain_parameter_in_analyzer",
    "plain_tensor_like",
    "unknown_carrier",
    # expressions
    "NOT_LITERAL",
    "UNRENDERED",
    "call_parts",
    "display_items", "copied_sequence", "split_source", "comprehension_element", "typed_already", "starred", "callee_definition",
    "makes_zeros", "makes_fresh", "call_receiver", "assignable", "fresh_binding", "holds_zeros", "rebind_local", "operator_assigned",
    "zeros_operand", "zeros_candidate", "retype_zeros", "retype_sum", "expr_text",
    "fullname_of",
    "int_value",
    "is_operator", "operator_operands",
    "is_false",
    "is_none_expr",
    "is_true",
    "literal_value",
    "operator_sides",
    "str_tuple",
    "str_value",
    "is_name",
    # members and overrides
    "attribute_read", "constructor_argument",
    "declared_below",
    "branches",
    "parameter_calls",
    "forward_owner",
    "holds_carrier",
    "element_class",
    "member",
    "module_class",
    "SEQUENTIAL", "chained_modules", "message_expr", "sequential_of", "assigned_once", "written_modules",
    "named_result",
    "op_call",
    "receiver_expr",
    "super_forward_owner",
    "without_none",
    "ignore_carrier_overrides",
    "ignore_unknown_result_overrides",
    # finals
    "alias_target",
    "enum_alias",
    "final_name",
    "module_file",
    "module_value", "owning_module",
    "resolve_in_module",
    # partial_sites
    "declared_partial",
    "source_text",
    "span",
    # group_types
    "GROUP_CARRIER",
    "PROCESS_GROUP",
    "group_in_analyzer", "group_in_checker", "group_text", "plain_group_in_analyzer",
    "relax_group", "RANK_CARRIER", "rank_in_checker", "rank_texts", "argument_rank_texts", "with_rank_ints",
    "is_plain_int", "rank_in_analyzer", "declared_rank_text", "relax_rank",
    # signatures
    "positional_signature",
    "takes_var_args", "decorated_function", "decorated_class", "has_trusted_apply", "checked_class_name",
    # collective_calls
    "has_star_args", "member_fullname", "tensor_tuple", "with_default_return",
    # rewrite passes and the stub's names
    "route_declared_values",
    "route_in_analyzer",
    "routed_in_analyzer",
    "routed_whole",
    "wrap_untyped_calls",
    "ASSIGNED",
    "PHANTOM_MODULE",
    "RETURNED",
    "REASSIGNED",
    "KEYWORD_ITEM",
    "RAW_WRITE",
    "call_argument",
    "raw_write_call",
    "UNTYPED",
    "TRUSTED_APPLY",
    # tensor_types
    "attribute_write_type",
    "callable_of",
    "display_parts",
    "element_types",
    "has_tensor",
    "has_tensor_deep",
    "needs_relaxing",
    "relax_tensors",
    "relaxed_typeddict_display",
    "relaxes_plain",
    "typeddict_with_plain_lists",
    "builds_typeddict",
    "typeddict_of_tensors",
    "has_carrier_deep",
    "plain_write_type",
    "plain_tensor_container",
    "holds_carriers_already",
    "carrier_name_type",
    "erase_carriers",
    "fits_as_plain",
    "fits_plain_name",
    "has_type_vars",
    "report_as_plain",
    "typed_in_context",
    "container_kind",
    "replace_tensors",
    "tensor_pairs",
    "tuple_items",
    "union_alternatives",
    "union_items",
    "union_of",
    "with_arg_types",
    "with_signature",
    "with_tuple_items",
    "type_arguments",
    "literal_bool",
    # writes
    "plain_tensor_call",
    "quietly_typed",
    "written_value",
    # typevars
    "choose",
    "configuration_values",
    "in_expansion",
    "never",
    "restore_parameters",
    "value_variable",
    # configurations
    "FLAG_NAMES",
    "CONFIGURATION_MARKER_CALL",
    "CONFIGURATION_MARKER_TYPE",
    "configuration_variable",
    "configure_since",
    "current_configuration",
    "configuration_declared",
    "literal_of",
    "on_new_flag",
    "set_parameter_types",
    "declared_parameter",
    "parameter_types",
    "return_type",
    "set_return_type",
]
