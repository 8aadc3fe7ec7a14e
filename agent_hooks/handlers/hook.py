"""What an event module calls: run the due user handlers for this call, never raising.

With no handler due this costs a few stat calls (registry.due); run.py is
imported only when one is. Any failure of the machinery itself is logged and
counted, and the hook carries on as if there were no handlers (fail open).
"""

from __future__ import annotations

import os

# Annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent_hooks.handlers.run import Merged
    from agent_hooks.output import Outcome
    from agent_hooks.runner import Context

DENY = "deny"


def maybe_any(config: dict, config_dir: str) -> bool:
    """False when no handler can be due, decided without importing the registry: handlers off;
    no managed dir, no extra dir, no trusted workspace, and no bundled handler enabled."""
    hcfg = config.get("handlers") or {}
    if not hcfg.get("enabled", True):
        return False
    if hcfg.get("trusted_workspaces") or os.path.isdir(os.path.join(config_dir, "hooks")):
        return True
    entries = hcfg.get("entries")
    if isinstance(entries, dict) and any(isinstance(e, dict) and e.get("enabled") is True for e in entries.values()):
        return True
    return any(isinstance(d, str) and d and os.path.isdir(os.path.expanduser(d)) for d in hcfg.get("extra_dirs") or [])


def run_due(ctx: Context, event: str) -> Merged | None:
    """The merged result of the handlers due for this call; None when none is due (or on an internal error)."""
    try:
        if not maybe_any(ctx.config, ctx.paths.config_dir):
            return None
        from agent_hooks.handlers import registry

        p = ctx.payload
        due = registry.due(ctx.config, ctx.paths.config_dir, ctx.paths.state_dir, ctx.env, p.cwd, event,
                           p.tool_name)
        if not due:
            return None
        from agent_hooks.handlers import run

        return run.run(ctx, event, due)
    except Exception as exc:  # noqa: BLE001 - user handlers must never cost the hook its answer
        import traceback

        from agent_hooks.log import log_error

        message = f"handlers: {type(exc).__name__}: {exc}"
        log_error(ctx.paths, event, "error", message, ctx.payload.session_id, traceback.format_exc())
        try:
            from agent_hooks.store import record_error

            record_error(ctx.store.conn, event, "error", message, ctx.payload.session_id)
        except Exception:  # noqa: BLE001
            pass
        return None


def apply(ctx: Context, event: str, out: Outcome) -> None:
    """For events other than PreToolUse: a deny or block blocks where the event can
    (UserPromptSubmit, PostToolUse, Stop, PreCompact), contexts are added where it takes them."""
    merged = run_due(ctx, event)
    if merged is None:
        return
    if merged.decision == DENY:
        out.block(merged.reason or "blocked by a handler")
    for text in merged.contexts:
        if event == "PreCompact":
            out.say(text)  # PreCompact's plain stdout steers the summary
        else:
            out.add_context(text)
