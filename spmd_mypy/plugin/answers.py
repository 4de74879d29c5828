"""Answering a call hook's question from the answer it gave before.

mypy asks the hook of a typed op or collective once per call in the code,
and again for the same call when it tries the items of an overloaded torch
function or the two sides of an operator.  Most calls ask a question that
some call asked before: the same op on operands of the same types, with
the same literal arguments (_mypy.call_key says what the question holds).
`remembered(compute)` is `compute`, answering such a question from its
first answer when that answer is known to hold for every call that asks it:

- the first answer reported nothing (an error or note, seen even when
  mypy's filters drop it: an error is reported at its own line, so a call
  that fails is checked every time);
- nothing the answer read depended on where the call stands: while it was
  computed no code `depends_on_site()` (a product whose declared partial
  axes were looked up, a hint's reading of a declared type);
- the call stands in plain local code: no @spmd.configurations function
  exists in the run (a configuration names its errors), the file has no
  @global_spmd or local_map scope (global mode types by scope), and the
  communication report does not want the call's site recorded.

`before` runs on every call, answered or not (a side effect on mypy's
tree the hook makes, such as restoring a parameter's redefinition).
`also`, when given, reads what else the answer depends on that the call's
types do not say (a module call's forward's declared type, which a daemon
edit can change while the class stays the same object) into the key.
`site`, when given, reads the one fact of the call's place an answer may
depend on and still be kept: a product's declared partial axes.  A
question whose answer read them, and nothing else of the place, is kept
per those axes.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from . import _mypy, comm_sites
from .annotations import mentions_spmd
from .global_scopes import scopes_for

Hook = Callable[[Any], Any]

_MAX_ANSWERS = 65536  # per hook: a long daemon session drops what edits left behind

# [reads of the call's place, of them those a hook's `site` reader covers];
# an answer computed while the first moved is kept only under the site's
# key, and only when the second moved as much.
_SITE_READS = [0, 0]


def depends_on_site(declared_partial: bool = False) -> None:
    """The answer being computed depends on where the call stands, not only
    on its types and literal arguments: it is not remembered.  With
    `declared_partial` (a product's declared partial axes were read), a
    hook whose `site` reader gives those axes keeps it under them."""
    _SITE_READS[0] += 1
    if declared_partial:
        _SITE_READS[1] += 1


class _File(NamedTuple):
    """What the hooks' keys need to know about the file a checker checks:
    whether its code is plain local code, and whether it uses spmd (a result
    of unknown type is a carrier there, a plain Tensor elsewhere:
    callsite.typed_result)."""

    owner: object
    plain: bool
    uses_spmd: bool


# The last file looked at, by its owner (one check pass over one file,
# _mypy.check_owner): hooks ask about the same file thousands of times in a row.


_LAST: List[Any] = [None, None]  # [owner, its _File]


def _file(api: Any) -> _File:
    owner = _mypy.check_owner(api)
    last = _LAST
    if owner is last[0] and owner is not None:
        return last[1]
    path = _mypy.checker_path(api)
    tree = _mypy.checked_tree(api)  # the facts of the bytes mypy checks: no stat
    made = _File(owner, not scopes_for(path, tree), mentions_spmd(path, tree))
    last[0], last[1] = owner, made
    return made


def in_scoped_file(api: Any) -> bool:
    """Whether the file the checker `api` checks has a @global_spmd or
    local_map scope (global_mode reads which, per call, only then)."""
    return not _file(api).plain


def uses_spmd(api: Any) -> bool:
    """Whether the file the checker `api` checks mentions spmd (annotations.mentions_spmd)."""
    return _file(api).uses_spmd


def plain_local_code(api: Any) -> bool:
    """Whether the call the checker `api` is at stands in plain local code
    (see the module's docstring): no configured function in the run, no
    global or local_map scope in its file."""
    return _file(api).plain and not _mypy.FLAG_NAMES


def restore_parameters(ctx: Any) -> None:
    """The `before` of a hook whose answer restores a rebound parameter
    (_mypy.restore_parameters: `h = h + r` in a function generic in a
    layout): an answered call must restore it too."""
    _mypy.restore_parameters(ctx.api)


def remembered(
    compute: Hook,
    before: Optional[Hook] = None,
    sites_matter: bool = False,
    also: Optional[Hook] = None,
    site: Optional[Hook] = None,
) -> Hook:
    """`compute`, answering a question it answered before from that answer
    (see the module's docstring).  `sites_matter`: the hook records its call
    for the communication report when that is wanted; `also(ctx)` goes into
    the key beside the call's question.  `site(ctx)`, when given, reads the
    declared partial axes at the call: a question whose answer read them
    (and nothing else of the call's place) is answered per those axes."""
    table: Dict[tuple, Any] = {}

    def hook(ctx: Any) -> Any:
        api = ctx.api
        file = _file(api)
        if not file.plain or _mypy.FLAG_NAMES or (sites_matter and comm_sites.wanted(api)):
            return compute(ctx)
        key = _mypy.call_key(ctx, file.uses_spmd)
        if key is None:
            return compute(ctx)
        if also is not None:
            key = (key, also(ctx))
        found = table.get(key)
        by_site = found is _BY_SITE
        if by_site:
            key = (_BY_SITE, key, site(ctx))  # type: ignore[misc]  # set only with a reader
            found = table.get(key)
        if found is not None:
            if before is not None:
                before(ctx)
            return found
        answer, clean, declared_only = _quietly(compute, ctx)
        if len(table) >= _MAX_ANSWERS:
            table.clear()
        if clean or (by_site and declared_only):
            table[key] = answer
        elif declared_only and site is not None:
            table[key] = _BY_SITE
            table[(_BY_SITE, key, site(ctx))] = answer
        return answer

    return hook


_BY_SITE: Any = object()  # a question whose answers are kept per site (remembered)


def quietly(compute: Hook, ctx: Any) -> Tuple[Any, bool]:
    """compute(ctx), and whether its answer holds for every call that asks
    the same question: it reported nothing, and read nothing of the call's
    place (see the module's docstring)."""
    answer, clean, _ = _quietly(compute, ctx)
    return answer, clean


def _quietly(compute: Hook, ctx: Any) -> Tuple[Any, bool, bool]:
    """quietly's answer, and whether it reported nothing and read only the
    declared partial axes of the call's place (depends_on_site)."""
    reads, declared = _SITE_READS
    with _mypy.error_watch(ctx.api) as watch:
        answer = compute(ctx)
    if watch.has_new_errors():
        return answer, False, False
    moved = _SITE_READS[0] - reads
    return answer, moved == 0, moved > 0 and moved == _SITE_READS[1] - declared
