"""SessionStart: record the session (every source: startup, resume, clear, compact, fork, ...).

After a compaction: the goal reminder again, verbatim. For a lead: the other live sessions.
"""

from __future__ import annotations

from agent_hooks.features import identity, lead_context, lineage, reminders, sessions, waiting
from agent_hooks.features.isolate import isolated
from agent_hooks.forward import forward
from agent_hooks.handlers import hook as user_handlers
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "SessionStart"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    parent = lineage.prepare(ctx.store.conn, p, ctx.env, ctx.config)  # file work, outside the transaction
    # Started in tmux by hand (no launcher variable): ask tmux for the session's name, once.
    tmux_name = sessions.resolve_tmux_name(ctx.env)
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started, state=sessions.LIVE, tmux_name=tmux_name)
        if p.get("source") != "compact":
            # A new, resumed or cleared session sits at its prompt until the person types one (a
            # compaction happens inside a turn: that session is working).
            waiting.mark(conn, p.session_id, waiting.AWAITING, waiting.FIRST_PROMPT, ctx.started)
        sessions.log_event(conn, p, ctx.started, p.get("source"))
        lineage.record(conn, p, parent, ctx.started)
        isolated(conn, ctx, "identity", identity.session_start, conn, ctx, out)
        forward(conn, ctx)
    if p.get("source") == "compact":
        out.add_context(reminders.reminder(ctx.store.conn, p, ctx.env, ctx.config))
    out.add_context(lead_context.block(ctx.store.conn, p.session_id, ctx.env, ctx.config, ctx.started))
    if ctx.config["memory"].get("session_start_recall"):  # off by default: docs/memory.md has its cost
        out.add_context(_recall(ctx))
    user_handlers.apply(ctx, EVENT, out)  # user handlers, after the built-ins (docs/handlers.md)
    return out


def _recall(ctx: Context) -> str:
    """The agent's most relevant memories for its task; on any error, none (and the error log says why)."""
    try:
        from agent_hooks.features import recall
        from agent_hooks.features.sessions import agent_name

        return recall.session_start_block(ctx.store.conn, ctx.payload.session_id, ctx.env, ctx.config,
                                          agent_name(ctx.env, ctx.config))
    except Exception as exc:  # noqa: BLE001 - a memory lookup never stops a session from starting
        import traceback

        from agent_hooks.log import log_error

        log_error(ctx.paths, EVENT, "error", f"memory recall: {type(exc).__name__}: {exc}", ctx.payload.session_id,
                  traceback.format_exc())
        return ""


def main(argv: list[str] | None = None) -> int:
    import sys

    if "--serve" in (sys.argv[1:] if argv is None else argv):
        from agent_hooks.server.local import ensure_for_hook

        ensure_for_hook(EVENT)  # the http transport is wired: its server must answer
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
