"""Config area: the configuration file and variables are valid, and the file is private."""

from __future__ import annotations

import os
import shlex
import stat
from typing import Any

from agent_hooks import config as config_mod
from agent_hooks.checks import FAIL, OK, WARN, Check, Context, check
from agent_hooks.paths import Paths

WHY = ("it names commands the hooks run for you (cleanup.commands, summary.summarizer_command) "
       "and where events are sent (forward.url)")


@check("config", order=40)
def config(ctx: Context) -> list[Check]:
    """The configuration file and variables (what the hooks run on is ``ctx.cfg``)."""
    checks, _cfg = check_config(ctx.paths)
    return checks


def check_config(p: Paths) -> tuple[list[Check], dict[str, Any]]:
    """Checks of the configuration, and the configuration the hooks run on (a bad part costs that part)."""
    cfg, _ = config_mod.load_lenient(p, os.environ)
    source = p.config_file if os.path.exists(p.config_file) else "defaults, no config file"
    checks: list[Check] = []
    try:
        raw = config_mod.load(p, os.environ)
    except config_mod.ConfigError as exc:
        checks.append(Check("config", FAIL, f"configuration invalid: {exc}",
                            f"fix {p.config_file} or the variable; the hooks run without it meanwhile"))
    else:
        checks += [Check("config", FAIL, f"configuration: {problem}",
                         f"fix it in {p.config_file} (agent-hook config shows what is in effect)")
                   for problem in config_mod.validate(raw)]
    if not checks:
        checks.append(Check("config", OK, f"configuration valid ({source})"))
    mode_line = file_mode(p.config_file)
    if mode_line is not None:
        checks.append(mode_line)
    return checks, cfg


def file_mode(path: str) -> Check | None:
    """config.toml must not be writable by others (they could make the hooks run their commands),
    and should not be readable by them."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):  # the file check above already said it cannot be read
        return None
    mode = stat.S_IMODE(st.st_mode)
    fix = f"chmod 600 {shlex.quote(path)}"
    if mode & 0o022:
        return Check("config", FAIL, f"{path} is writable by others (mode {mode:03o}): {WHY}, so anyone who can "
                     "write it runs commands as you", fix, {"mode": f"{mode:03o}"})
    if mode & 0o044:
        return Check("config", WARN, f"{path} is readable by others (mode {mode:03o}): {WHY}; files agent-hook "
                     "creates are 0600", fix, {"mode": f"{mode:03o}"})
    return Check("config", OK, f"{path} is private (mode {mode:03o})")
