"""Center area: where the command center keeps the fleet (the embedded SQLite store, or PostgreSQL: reachable,
migrated, the running server's listener connected, the password not in a config.toml others can read)."""

from __future__ import annotations

from agent_hooks.checks import Check, Context, check


@check("center", order=66)
def center(ctx: Context) -> list[Check]:
    """[center] database (agent_hooks/center/checks.py has the lines)."""
    from agent_hooks.center.checks import fleet_store_checks

    return fleet_store_checks(ctx.paths, ctx.cfg)
