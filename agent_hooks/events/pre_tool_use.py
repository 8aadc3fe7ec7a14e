"""PreToolUse: cancellation, budgets, loop detection, polling limits; record the call with the decision; then user handlers."""

from __future__ import annotations

from agent_hooks.features import budget, cancellation, loops, polling, sessions, toolcalls
from agent_hooks.features.verdict import DENY, Verdict, combine
from agent_hooks.forward import forward
from agent_hooks.handlers import hook as user_handlers
from agent_hooks.hashing import digest
from agent_hooks.output import Outcome
from agent_hooks.runner import Context, run

EVENT = "PreToolUse"


def handle(ctx: Context) -> Outcome:
    out = Outcome()
    p = ctx.payload
    cfg = ctx.config
    input_hash = digest(p.tool_input)
    with ctx.store.write() as conn:
        sessions.touch(conn, p, ctx.env, cfg, ctx.started, state=sessions.LIVE)
        snap = cancellation.read_snapshot(conn, p.session_id)
        # `task done` / `task blocked` on its own task end a persisting task: no guard stands in the way.
        finishing = cancellation.is_finish_command(snap, p.tool_name, p.tool_input)
        verdicts = [None if finishing else cancellation.decide(snap, cfg, p.tool_name, p.tool_input)]
        poll = None if finishing else polling.match(p.tool_name, p.tool_input, input_hash, cfg)
        if verdicts[0] is None and not finishing:  # a cancelled session needs no further reads
            verdicts.append(budget.guard(conn, p.session_id, cfg, ctx.started))
            if cfg["loops"].get("enabled", True):
                history = loops.read_history(conn, p.session_id, snap.guards_since_id, int(cfg["loops"]["window"]),
                                             p.get("agent_id"))
                verdicts.append(loops.decide(p.tool_name, input_hash, history, cfg))
            if poll is not None:
                psnap = polling.read_snapshot(conn, p.session_id, snap.guards_since_id, poll, ctx.started, cfg)
                verdicts.append(polling.decide(poll, psnap, ctx.started, cfg))
        # Replayed from the spool: the call was answered fail-open and ran unguarded, or (strict
        # guards, guards.fail_closed) was denied unchecked and never ran.
        if ctx.replayed:
            verdicts = [Verdict(DENY, "fail_closed", "denied unchecked (guards.fail_closed): the store could not"
                                " be written in time")] if ctx.replay_answer == "deny" else []
        top, warnings = combine(verdicts)
        denied = top.decision == DENY
        toolcalls.start(
            conn, p, ctx.started, cfg, input_hash=input_hash,
            outcome=toolcalls.DENIED if denied else toolcalls.PENDING,
            decision=top.decision, rule=top.rule, reason=top.message,
            poll_rule=poll.name if poll else None, poll_key=poll.key if poll else None,
        )
        forward(conn, ctx)
    if denied:  # the guards' deny (cancellation first) stands: user handlers do not even run
        out.deny(top.message or "blocked by agent-hooks")
        return out
    for warning in warnings:
        out.add_context(warning.message or "")
    # User handlers (docs/handlers.md), by priority, outside the store's write lock.
    merged = user_handlers.run_due(ctx, EVENT)
    if merged is not None:
        if merged.decision == DENY:  # on the call's row too: a denied call leaves the loop history
            with ctx.store.write() as conn:
                toolcalls.redecide(conn, p, merged.decision, merged.rule, merged.reason)
            out.deny(merged.reason or "blocked by a handler")
            return out
        for text in merged.contexts:
            out.add_context(text)
        out.updated_input = merged.tool_input
    # Approval gates: only a configured gate costs anything here (the module, its regexes).
    if cfg["approvals"]["gates"] and not ctx.replayed:
        from agent_hooks.features import approvals

        return approvals.gate_call(ctx, out)
    return out


def main(argv: list[str] | None = None) -> int:
    return run(EVENT, handle)


if __name__ == "__main__":
    raise SystemExit(main())
