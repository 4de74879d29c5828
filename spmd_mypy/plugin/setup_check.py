"""What the checker needs from a user's setup, checked once when mypy loads the plugin.

Two things: the carrier stub package `spmd_phantom` on mypy's search path
(installed with spmd-mypy; stubs/torch-spmd in a clone), and
`allow_redefinition = True` (`x = spmd.all_reduce(x, ...)` rebinds `x` to a
value of a new SPMD type).  Without the first, mypy would report its own
import error and the plugin would silently check nothing; without the
second, every rebinding is an [assignment] error that names the carrier
(`SpmdTensor[Literal['tp=R']]`).  Instead the plugin checks nothing and
reports one line naming what to add (`SetupProblem`), at the first tensor
annotation of the first file that uses spmd.

mypy's module finder is reached through plugin/_mypy (stub_findable).
"""

from __future__ import annotations

import functools
from typing import Any, Optional, Tuple, cast

from . import _mypy
from .annotations import mentions_spmd
from .errors import SPMD_SETUP
from .guard import STRICT, report_skipped

MISSING_STUB = (
    "spmd-mypy: mypy cannot find the carrier stub package 'spmd_phantom'; install spmd-mypy "
    "into the environment mypy runs in (pip install spmd-mypy, or pip install -e <clone>), or "
    "add <clone>/stubs/torch-spmd to mypy_path. SPMD types are not checked until then"
)
MISSING_REDEFINITION = (
    "spmd-mypy: add 'allow_redefinition = True' to the [mypy] section of your mypy "
    "configuration (x = spmd.all_reduce(x, ...) rebinds x to a new SPMD type). "
    "SPMD types are not checked until then"
)


def problem(options: Any) -> Optional[str]:
    """The line to report for this mypy configuration, or None when it is complete."""
    if not stub_found(options):
        return MISSING_STUB
    if not getattr(options, "allow_redefinition", False):
        return MISSING_REDEFINITION
    return None


def stub_found(options: Any) -> bool:
    """Whether mypy will find `spmd_phantom`.  If looking fails, the setup is
    taken as working (the plugin never takes mypy down), with a note on stderr;
    in strict mode the failure propagates."""
    try:
        return _mypy.stub_findable(options, _mypy.PHANTOM_MODULE)
    except Exception as exc:
        if STRICT:
            raise
        report_skipped(None, stub_found, exc)
        return True


class SetupProblem(_mypy.Plugin):
    """The plugin when the setup lacks something: checks nothing, reports
    `message` once, at the first tensor annotation of a file that uses spmd."""

    def __init__(self, options: Any, message: str) -> None:
        super().__init__(options)
        self.message = message
        self._at: Optional[Tuple[Optional[str], int, int]] = None  # where it is reported

    def get_type_analyze_hook(self, fullname: str) -> Any:
        return self._report if fullname == _mypy.TENSOR else None

    def _report(self, ctx: Any) -> Any:
        path = _mypy.analyzer_path(ctx)
        where = (path, ctx.context.line, ctx.context.column)
        if self._at is None and mentions_spmd(path):
            self._at = where
        if where == self._at:  # again when mypy analyses that file again (daemon, deferral)
            _mypy.fail(ctx.api, self.message, ctx.context, SPMD_SETUP)
        return _mypy.plain_tensor_in_analyzer(ctx)


@functools.lru_cache(maxsize=None)
def checked(plugin_class: type) -> type:
    """What mypy loads: `plugin_class`, or a SetupProblem standing in for it
    when the setup lacks something."""

    def __new__(cls: type, options: Any) -> Any:
        message = problem(options)
        return cast(Any, plugin_class).__new__(cls) if message is None else SetupProblem(options, message)

    return type(plugin_class.__name__, (plugin_class,), {"__new__": __new__})
