"""The checker's own code type-checks under plain mypy (no plugin).

The vocabulary and the plugin are the code mypyc would compile, and mypyc
compiles only code mypy accepts: it then checks every declared type at run
time, so an annotation that does not hold (a lazy SourceText passed where a
str is declared, a None-typed local holding a CallableType) becomes a
TypeError inside a hook.  Keeping the declared types true keeps that road
open, and they are the documentation a reader trusts.

The settings are those the code is written for: Python 3.11, a name may be
bound again to a value of another type (allow_redefinition), and modules
outside the two packages (torch-free runtime helpers, tests) are followed
silently.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("spmd_mypy/vocab", "spmd_mypy/plugin")


def test_vocab_and_plugin_type_check(tmp_path: Path) -> None:
    config = tmp_path / "self.ini"
    config.write_text("[mypy]\npython_version = 3.11\nallow_redefinition = True\nfollow_imports = silent\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(tmp_path / "cache"),
         "--show-error-codes", *CHECKED],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    found = re.search(r"Success: no issues found in (\d+) source files", out)
    assert found is not None, out
    expected = sum(1 for d in CHECKED for _ in (ROOT / d).rglob("*.py"))
    assert int(found.group(1)) == expected, out
