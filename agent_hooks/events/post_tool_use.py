"""PostToolUse: close the call's record with its outcome, duration and output hash;
tell the model, once, when its context passes persist.context_notice_pct (save progress on the task);
add the transcript's new usage to the session's cost."""

from __future__ import annotations

import sqlite3

from agent_hooks.features import cost, persist, sessions, toolcalls
from agent_hooks.forward import forward
from agent_hooks.handlers import hook as user_handlers
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "PostToolUse"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    output_hash = toolcalls.output_digest(p, ok=True)
    pressure = _pressure(ctx)  # outside the transaction: it may read the transcript's tail
    spent = cost.prepare(ctx)  # the transcript's new lines, from the offset last reached
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started, state=sessions.LIVE)
        toolcalls.finish(conn, p, ctx.started, ctx.config, ok=True, output_hash=output_hash)
        cost.apply(conn, ctx, spent)
        sessions.withdraw_dialogs(conn, p.session_id, ctx.started, "answered at the terminal: the tool ran", p.tool_name,
                                  sessions.subagent_of(p))
        if p.tool_name in toolcalls.WRITE_TOOLS:  # other tools: nothing more imported, nothing more done
            _file_written(conn, ctx, out)
        if pressure is not None and persist.note_pressure(conn, p.session_id, pressure[1], ctx.started):
            out.add_context(persist.pressure_notice(*pressure))
        forward(conn, ctx)
    user_handlers.apply(ctx, EVENT, out)  # user handlers, after the built-ins (docs/handlers.md)
    return out


def _pressure(ctx: Context) -> tuple[str, float] | None:
    """(task, context %) when a session with a task, not yet told, passed the threshold."""
    threshold = float(ctx.config["persist"]["context_notice_pct"])
    if threshold <= 0:
        return None
    task = persist.pressure_candidate(ctx.store.conn, ctx.payload.session_id)
    if task is None:
        return None
    seen = persist.transcript_state(ctx.payload.transcript_path, ctx.env, ctx.config, persist.PRESSURE_TAIL_BYTES)
    if seen.context_pct is None or seen.context_pct < threshold:
        return None
    return task, seen.context_pct


def _file_written(conn: sqlite3.Connection, ctx: Context, out: Outcome) -> None:
    """Identity sync and memory indexing, each after a cheap test of the path and before any query."""
    from agent_hooks.features import identity, memory
    from agent_hooks.features.isolate import isolated

    if identity.relevant(ctx.payload, ctx.config):
        isolated(conn, ctx, "identity", identity.after_tool, conn, ctx, out)
    if memory.relevant(ctx.payload, ctx.config):
        isolated(conn, ctx, "memory", memory.after_tool, conn, ctx)


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
