"""Install area: the Python running us, and the hook executables."""

from __future__ import annotations

import os
import sys

from agent_hooks.checks import FAIL, OK, Check, Context, check
from agent_hooks.wiring.table import EXECUTABLES

MIN_PYTHON = (3, 11)


@check("python", order=10)
def python(ctx: Context) -> list[Check]:
    """The interpreter's version, and ours."""
    v = sys.version_info
    from agent_hooks import __version__

    text = f"Python {v.major}.{v.minor}.{v.micro} ({sys.executable}), agent-hooks {__version__}"
    if v[:2] >= MIN_PYTHON:
        return [Check("python", OK, text)]
    return [Check("python", FAIL, f"{text}: need {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer",
                  "re-run install.sh with a newer python3 on PATH")]


@check("executables", order=11)
def executables(ctx: Context) -> list[Check]:
    """Every agent-hook-* executable in the bin directory."""
    bin_dir = ctx.bin_dir
    missing = [exe for exe in EXECUTABLES if not os.access(os.path.join(bin_dir, exe), os.X_OK)]
    if not missing:
        return [Check("executables", OK, f"all {len(EXECUTABLES)} executables in {bin_dir}")]
    return [Check("executables", FAIL, f"missing in {bin_dir}: {', '.join(missing)}",
                  "reinstall the package: re-run install.sh (or pip install --force-reinstall agent-hooks)",
                  {"missing": missing})]
