"""Handlers area: every user handler that is switched on must be ready (``agent-hook hooks check``)."""

from __future__ import annotations

from agent_hooks.checks import Check, Context, check


@check("handlers", order=80)
def handlers(ctx: Context) -> list[Check]:
    """A broken handler that is switched on is ✗; one that will not run here, or has warnings, is !."""
    from agent_hooks.cli.hooks import doctor_rows

    return [Check("handlers", *row) for row in doctor_rows(ctx.project_dir, ctx.cfg, ctx.paths)]
