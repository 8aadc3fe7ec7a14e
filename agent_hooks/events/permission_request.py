"""PermissionRequest: a permission dialog (or a question) is about to open; the session needs input.

The request is recorded as a pending approval (features/approvals.py) and the
hook keeps it open for ``approvals.wait_s``: an answer from `agent-hook approve`
/ `deny`, the server's API or the board settles the dialog in the client's own
format (allow, always allow, deny with a message, deny and stop, a question's
answers). With no answer by then it gives no decision, and the client's own
dialog simply stays for the person at the terminal, as before. A session nobody
sits at (``claude -p``, the SDK) is not held unless ``approvals.hold_unattended``
says so: the client denies its call at once, as it would without us.
"""

from __future__ import annotations

from agent_hooks.features import approvals, sessions, waiting
from agent_hooks.forward import forward
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "PermissionRequest"


def handle(ctx: Context) -> Outcome:
    p = ctx.payload
    asked = waiting.tool_asked(p)
    out = Outcome()
    # At most what our entry's timeout covers (wiring/entries.py), so the client never stops us first.
    settings = ctx.config.get("approvals") or {}
    wait_s = min(float(settings.get("wait_s", 0) or 0), 570.0)
    if wait_s > 0 and not settings.get("hold_unattended") and approvals.unattended(ctx.env):
        # Nobody at this terminal (`claude -p`, the SDK): the client denies at once when we give no
        # decision; holding would stall an unattended run wait_s per such call (docs/approvals.md).
        wait_s = 0.0
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started)
        sessions.log_event(conn, p, ctx.started, asked)
        waiting.mark(conn, p.session_id, waiting.NEEDS_INPUT, asked, ctx.started)
        if wait_s > 0 and not ctx.replayed:  # a replayed call's dialog was answered long ago
            tool_input = p.get("tool_input") if isinstance(p.get("tool_input"), dict) else {}
            kind = approvals.kind_of(p.tool_name)
            aid = approvals.insert(
                conn, session_id=p.session_id, kind=kind, tool_name=p.tool_name, tool_input=tool_input,
                at=ctx.started, wait_s=wait_s,
                questions=tool_input.get("questions") if kind == approvals.QUESTION else None,
                suggestions=p.get("permission_suggestions") if isinstance(p.get("permission_suggestions"), list)
                else None,
                agent_id=sessions.subagent_of(p),
            )
            out.hold = approvals.Hold(aid, kind, ctx.started + wait_s, EVENT)
        forward(conn, ctx)
    return out


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
