"""StopFailure: the turn ended on an API error (rate limit, auth, overload); the session is in error.

The client ignores this hook's output; the state (with the error's kind) is
for `status`, `session show` and the command center. The next prompt clears it.
"""

from __future__ import annotations

from agent_hooks.features import sessions, waiting
from agent_hooks.forward import forward
from agent_hooks.output import Outcome, one_line
from agent_hooks.runner import Context, run

EVENT = "StopFailure"


def handle(ctx: Context) -> Outcome:
    p = ctx.payload
    kind = one_line(p.get("error") or "unknown", 80)
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started)
        sessions.log_event(conn, p, ctx.started, kind)
        waiting.mark(conn, p.session_id, waiting.ERROR, kind, ctx.started)
        forward(conn, ctx)
    return Outcome()


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
