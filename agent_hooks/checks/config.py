"""Config area: the configuration file and variables are valid."""

from __future__ import annotations

import copy
import os
from typing import Any

from agent_hooks import config as config_mod
from agent_hooks.checks import FAIL, OK, Check, Context, check
from agent_hooks.paths import Paths


def effective(ctx: Context) -> dict[str, Any]:
    """The configuration checks run on (defaults when invalid); its lines wait for the config check."""
    checks, cfg = check_config(ctx.paths)
    ctx.facts["config_checks"] = checks
    return cfg


@check("config", order=40)
def config(ctx: Context) -> list[Check]:
    """The lines :func:`effective` found."""
    ctx.cfg  # noqa: B018 - loads it when no earlier check needed it
    return list(ctx.facts.get("config_checks") or [])


def check_config(p: Paths) -> tuple[list[Check], dict[str, Any]]:
    """Checks of the configuration, and the configuration to use (defaults when invalid)."""

    source = p.config_file if os.path.exists(p.config_file) else "defaults, no config file"
    try:
        cfg = config_mod.load(p, os.environ)
    except config_mod.ConfigError as exc:
        return [Check("config", FAIL, f"configuration invalid: {exc}",
                      f"fix {p.config_file} or the variable; the hooks run on defaults meanwhile")], \
            copy.deepcopy(config_mod.DEFAULTS)
    problems = config_mod.validate(cfg)
    if problems:
        # Doctor's own thresholds come from the defaults then: the values may not even be numbers.
        return [Check("config", FAIL, f"configuration: {problem}", f"fix it in {p.config_file} (see README)")
                for problem in problems], copy.deepcopy(config_mod.DEFAULTS)
    return [Check("config", OK, f"configuration valid ({source})")], cfg
