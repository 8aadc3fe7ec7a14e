"""Board area: the command center's board answers, the fleet token is safe, the subscription is connected."""

from __future__ import annotations

from agent_hooks.checks import Check, Context, check


@check("board", order=80)
def board(ctx: Context) -> list[Check]:
    """The board at / and /api/board, the token file, a non-loopback listen, the subscription."""
    from agent_hooks.center.checks import board_checks

    return board_checks(ctx.paths, ctx.cfg)
