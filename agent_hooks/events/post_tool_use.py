"""PostToolUse: close the call's record with its outcome, duration and output hash."""

from __future__ import annotations

import sqlite3

from agent_hooks.features import sessions, toolcalls
from agent_hooks.forward import forward
from agent_hooks.handlers import hook as user_handlers
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "PostToolUse"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    output_hash = toolcalls.output_digest(p, ok=True)
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started, state=sessions.LIVE)
        toolcalls.finish(conn, p, ctx.started, ctx.config, ok=True, output_hash=output_hash)
        if p.tool_name in toolcalls.WRITE_TOOLS:  # other tools: nothing more imported, nothing more done
            _file_written(conn, ctx, out)
        forward(conn, ctx)
    user_handlers.apply(ctx, EVENT, out)  # user handlers, after the built-ins (docs/handlers.md)
    return out


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
