"""A libcst codemod from Megatron-, gpt-neox-, nanotron- and picotron-style
tensor-parallel helpers to spmd_mypy's typed calls (`python -m spmd_mypy.migrate`).

Imports libcst, never mypy or torch.  table.py lists the helpers (data),
calls.py turns one call into its typed call, boundary.py decides the
annotations a typed call fixes, rewrite.py runs the pass over a module.
"""

from .rewrite import Note, Result, migrate_source

__all__ = ["Note", "Result", "migrate_source"]
