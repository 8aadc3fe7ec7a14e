"""Errors area: what the hooks failed open on, until someone marks it seen (``agent-hook errors seen``)."""

from __future__ import annotations

from agent_hooks.checks import OK, WARN, Check, Context, check
from agent_hooks.cli.common import iso, plural
from agent_hooks.errorlog import report


@check("errors", order=50)
def errors(ctx: Context) -> list[Check]:
    """The errors ``status`` counts too: those recorded since they were last marked seen. Read-only."""
    rep = report(ctx.paths, ctx.conn, limit=1)
    since = f"since they were marked seen ({iso(rep['seen_at'])})" if rep["seen_at"] else "so far"
    if not rep["unseen"]:
        return [Check("errors", OK, f"no errors {since}", data=rep)]
    text = f"{plural(rep['unseen'], 'error')} {since}"
    if rep["by_kind"]:
        text += " (" + ", ".join(f"{k}: {n}" for k, n in rep["by_kind"].items()) + ")"
    if rep["recent"]:
        latest = rep["recent"][-1]
        from agent_hooks.cli.table import cell  # payload text: escaped, clipped

        text += f"; latest: {cell(latest.get('event'), limit=40)}: {cell(latest.get('message'), limit=160)}"
    return [Check("errors", WARN, text, "read them with agent-hook errors (the hooks failed open on these calls), "
                  "then agent-hook errors seen", rep)]
