"""UserPromptSubmit: a new turn begins; record it, and block it when the session's task was cancelled.

The prompt comes from a person, so a blocked prompt tells them who stopped the session and how to
resume it, not the instructions the agent reads at PreToolUse.
"""

from __future__ import annotations

from agent_hooks.features import cancellation, sessions, waiting
from agent_hooks.forward import forward
from agent_hooks.handlers import hook as user_handlers
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "UserPromptSubmit"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started, state=sessions.LIVE)
        sessions.withdraw_dialogs(conn, p.session_id, ctx.started, "answered at the terminal: the session took a new prompt")
        snapshot = cancellation.read_snapshot(conn, p.session_id)
        verdict = cancellation.decide(snapshot, ctx.config)
        if verdict is None:
            sessions.note_prompt(conn, p)
        sessions.log_event(conn, p, ctx.started, verdict.rule if verdict else None)
        if verdict is not None:
            # The client sits at its prompt again (no Stop follows a blocked prompt): not working.
            why = "task cancelled" if snapshot.task_state == "cancelled" else "session cancelled"
            waiting.mark(conn, p.session_id, waiting.AWAITING, f"{waiting.PROMPT_BLOCKED} ({why})", ctx.started)
        forward(conn, ctx)
    if verdict is not None:  # cancellation wins: user handlers do not run
        out.block(cancellation.for_person(snapshot, p.session_id) or verdict.message or "cancelled")
        return out
    user_handlers.apply(ctx, EVENT, out)  # user handlers, after the built-ins (docs/handlers.md)
    return out


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
