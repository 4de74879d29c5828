"""The spmd-... error codes: each can be silenced on its own.

`# type: ignore[spmd-op]` or `disable_error_code = spmd-op` in the config.
"""

from __future__ import annotations

from ._mypy import error_code

SPMD_ANNOTATION = error_code("spmd-annotation", "Malformed Spmd(...) annotation")
SPMD_OP = error_code("spmd-op", "Torch op applied to incompatible SPMD types")
SPMD_COLLECTIVE = error_code("spmd-collective", "Collective or coercion that does not fit its input")
SPMD_ARG = error_code("spmd-arg", "Argument whose SPMD type does not fit the parameter")
SPMD_RETURN = error_code("spmd-return", "Returned value whose SPMD type does not fit the declared one")
SPMD_ASSIGN = error_code("spmd-assign", "Assigned value whose SPMD type does not fit the annotation")
SPMD_BACKWARD = error_code("spmd-backward", "backward() on a loss that is not I or P on every axis")
SPMD_GLOBAL = error_code(
    "spmd-global", "Global SPMD rule violated (shard propagation, spec collective or redistribute)"
)
SPMD_INPLACE = error_code("spmd-inplace", "In-place op that would change a tensor's SPMD type")
SPMD_INTERNAL = error_code("spmd-internal", "A check the plugin skipped after an internal error")
SPMD_GROUP = error_code(
    "spmd-group", "Collective whose axis argument (a ProcessGroup, a computed name) the checker cannot name: not checked"
)
SPMD_UNTYPED = error_code(
    "spmd-untyped", "Typed tensor entering unannotated code (report_untyped = true)"
)
SPMD_GRADSYNC = error_code(
    "spmd-gradsync", "Gradient-sync contract broken: a pending gradient summed never, twice or over the wrong axis"
)
SPMD_ALIAS = error_code("spmd-alias", "In-place collective on a tensor another name still reads")
SPMD_SETUP = error_code("spmd-setup", "The mypy setup lacks what the checker needs (carrier stub, allow_redefinition)")
SPMD_COMMS = error_code("spmd-comms", "spmd.reveal_comms: a function's communication report (notes)")

ALL = (
    SPMD_ANNOTATION,
    SPMD_OP,
    SPMD_COLLECTIVE,
    SPMD_ARG,
    SPMD_RETURN,
    SPMD_ASSIGN,
    SPMD_BACKWARD,
    SPMD_INPLACE,
    SPMD_GLOBAL,
    SPMD_INTERNAL,
    SPMD_GROUP,
    SPMD_UNTYPED,
    SPMD_GRADSYNC,
    SPMD_ALIAS,
    SPMD_SETUP,
    SPMD_COMMS,
)
# the codes' names, as mypy's ErrorInfo holds them (rewording filters by these)
CODES = frozenset(code.code for code in ALL)
