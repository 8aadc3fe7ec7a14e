"""PostCompact: the compaction is done (trigger manual / auto); record it.

Observer only (the client takes no output). The context is small again, so
the context-pressure notice may be given once more when it fills up.
"""

from __future__ import annotations

from agent_hooks.features import persist, sessions
from agent_hooks.forward import forward
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "PostCompact"


def handle(ctx: Context) -> Outcome:
    p = ctx.payload
    summary = p.get("compact_summary") or ""
    detail = f"{p.get('trigger') or 'auto'} ({len(summary)} chars of summary)"
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started)
        sessions.log_event(conn, p, ctx.started, detail)
        persist.reset_pressure(conn, p.session_id)
        forward(conn, ctx)
    return Outcome()


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
