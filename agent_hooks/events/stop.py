"""Stop: the turn is over. Persistence first (a worker whose task persists and is open is held,
unless a bypass applies); otherwise the session now awaits input. Session summary, cleanup."""

from __future__ import annotations

from agent_hooks.features import cleanup, cost, detach, identity, lineage, memory, persist, sessions, summary, vectors
from agent_hooks.features.isolate import isolated
from agent_hooks.forward import forward
from agent_hooks.handlers import hook as user_handlers
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run
from agent_hooks.store import record_error

# Annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EVENT = "Stop"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    # File work first, outside the transaction: the store's write lock is shared by every agent.
    digest = summary.prepare(p, ctx.env, ctx.config)  # capped transcript read
    walked = memory.before_stop(ctx)  # stats of the memory directories
    parent = lineage.prepare(ctx.store.conn, p, ctx.env, ctx.config)  # a fork's parent, once
    seen, failed = _transcript_if_held(ctx)
    spent = cost.prepare(ctx, subagents=True)  # the turn's usage, from the offset last reached
    with ctx.store.write() as conn:
        if failed:  # logged already; counted here, in the call's own transaction
            record_error(conn, EVENT, "error", failed, p.session_id)
        sessions.withdraw_dialogs(conn, p.session_id, ctx.started, "answered at the terminal: the turn ended")
        cost.apply(conn, ctx, spent)  # before persistence: a task whose budget is now spent lets go
        # A bug or a bad row here lets the worker go (never a block on our own error) and keeps the rest.
        decision = isolated(conn, ctx, "persist", _decide, conn, ctx, seen) if seen is not None else None
        held = decision is not None and decision.hold
        sessions.touch(conn, p, ctx.env, ctx.config, ctx.started, state=sessions.LIVE if held else sessions.AWAITING)
        sessions.log_event(conn, p, ctx.started)
        lineage.record(conn, p, parent, ctx.started)
        summary.record(conn, p, digest, ctx.config, ctx.started)
        isolated(conn, ctx, "identity", identity.final_sync, conn, ctx)
        isolated(conn, ctx, "memory", memory.on_stop, conn, ctx, walked)
        if not held:  # a held worker goes on working: no "exit" for the command center
            forward(conn, ctx)
    if decision is not None and decision.hold:  # = held, spelt so that the checker sees decision is set
        out.block(decision.reason)
        return out
    # Detached workers (only when configured): the hook never waits for them.
    summary.after_stop(p, ctx.env, ctx.config)
    cleanup.after_stop(p, ctx.env, ctx.config)
    _embed_after_stop(ctx)
    user_handlers.apply(ctx, EVENT, out)  # user handlers, after the built-ins (docs/handlers.md)
    return out


def _embed_after_stop(ctx: Context) -> None:
    """Stale embeddings (a memory file, this session's summary) computed off the hook path."""
    try:
        vectors.after_stop(ctx.store.conn, ctx.env, ctx.config, ctx.paths)
    except Exception as exc:  # noqa: BLE001 - search falls back to words; the error log says why
        import traceback

        from agent_hooks.log import log_error

        log_error(ctx.paths, EVENT, "error", f"embeddings: {type(exc).__name__}: {exc}", ctx.payload.session_id,
                  traceback.format_exc())


def _decide(conn: Any, ctx: Context, seen: persist.TranscriptState) -> persist.Decision | None:
    """Hold or let go, recorded; None when the session's task does not persist."""
    p = ctx.payload
    snap = persist.read(conn, p.session_id)
    if snap is None:
        return None
    decision = persist.decide(snap, ctx.config, ctx.env, ctx.started, bool(p.get("stop_hook_active")),
                              seen, p.get("last_assistant_message", ""))
    if decision is not None:
        persist.record(conn, snap, decision, ctx.started, seen.context_pct)
    return decision


def _transcript_if_held(ctx: Context) -> tuple[persist.TranscriptState | None, str | None]:
    """The transcript's tail, read only for a session whose task persists, and what went wrong:
    on an error (None, message), which lets the worker go (no hold on our own error)."""
    try:
        return _read_if_held(ctx), None
    except Exception as exc:  # noqa: BLE001 - persistence must never block, nor cost Stop its record
        import traceback

        from agent_hooks.log import log_error

        message = f"persist: {type(exc).__name__}: {exc}"
        log_error(ctx.paths, EVENT, "error", message, ctx.payload.session_id, traceback.format_exc())
        return None, message


def _read_if_held(ctx: Context) -> persist.TranscriptState | None:
    """The transcript's tail, read only for a session whose task persists (a cheap read first)."""
    if not ctx.config["persist"].get("enabled", True):
        return None
    # A client our own workers run (the summarizer's `claude -p`) inherits $AGENT_HOOKS_TASK_ID
    # but does not work on the task: never held, and it spends none of the task's budget.
    if detach.nested(ctx.env):
        return None
    snap = persist.read(ctx.store.conn, ctx.payload.session_id)
    if snap is None or not persist.enabled_for(snap.persist, ctx.config):
        return None
    if snap.task_state != "open":
        return persist.TranscriptState()  # let go whatever the transcript says; recorded all the same
    # The client may not have written the turn's usage yet: wait a little for it (never past a
    # quarter of the deadline), so a full context is seen at the first stop, not the second.
    answer = ctx.payload.get("last_assistant_message")
    wait_s = min(float(ctx.config["persist"]["transcript_wait_ms"]), ctx.config["runtime"]["deadline_ms"] / 4) / 1000
    return persist.transcript_state(ctx.payload.transcript_path, ctx.env, ctx.config,
                                    answer=answer if isinstance(answer, str) else "", wait_s=wait_s)


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
