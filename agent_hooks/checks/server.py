"""Server area: the resident server of the http transport (agent_hooks/server/checks.py has the checks)."""

from __future__ import annotations

from agent_hooks.checks import Check, Context, check


@check("server", order=65)
def server(ctx: Context) -> list[Check]:
    from agent_hooks.checks.settings import settings_files
    from agent_hooks.server.checks import server_checks

    return server_checks(ctx.paths, ctx.cfg, settings_files(ctx.project_dir))
