"""Notify area: each channel's last delivery, and what would stop notifications going out."""

from __future__ import annotations

import importlib.util
import time

from agent_hooks.checks import FAIL, OK, WARN, Check, Context, check


def _ago(at: float | None, now: float) -> str:
    if not at:
        return "?"
    s = max(0, int(now - at))
    return f"{s} s ago" if s < 120 else f"{s // 60} min ago" if s < 7200 else f"{s // 3600} h ago"


@check("notify", order=68)
def channels(ctx: Context) -> list[Check]:
    """Each [[notify.channels]] channel and subscribed device, with its last delivery (and its error)."""
    from agent_hooks.notify import outbox, push, rules

    found, problems = rules.channels(ctx.cfg)
    out = [Check("notify", WARN, f"{p} (left out)", "fix [[notify.channels]] (docs/notifications.md)")
           for p in problems]
    subs = []
    last: dict[str, dict] = {}
    if ctx.conn is not None:
        try:
            subs = push.subscriptions(ctx.conn)
            last = outbox.last_by_channel(ctx.conn)
        except Exception:  # noqa: BLE001 - a store from before notifications: nothing sent yet
            pass
    if not found and not subs:
        return out + [Check("notify", OK, "notifications: no channel configured (add [[notify.channels]] with an"
                            " Apprise URL to be told when a session needs you; docs/notifications.md)",
                            data={"channels": 0})]
    if found and importlib.util.find_spec("apprise") is None:
        out.append(Check("notify", FAIL, "apprise is not installed: no channel can be sent to",
                         "pip install apprise (an agent-hooks dependency)"))
    from agent_hooks.server import local

    info = local.read_info(ctx.paths)
    if info is None or not local.pid_alive(info.get("pid")):
        out.append(Check("notify", WARN, "the resident server is not running: notifications are sent by it, and"
                         " wait in the outbox until it runs", "agent-hook server start"))
    named = [(c.key, c.name) for c in found] + [(s["channel"], push.channel_name(s)) for s in subs]
    for key, name in named:
        row = last.get(key)
        if row is None:
            out.append(Check("notify", OK, f"{name}: nothing sent yet (try `agent-hook notify test`)",
                             data={"channel": name}))
            continue
        data = {"channel": name, "state": row["state"], "at": row["last_at"], "error": row["last_error"]}
        when = _ago(row["last_at"], time.time())
        if row["state"] == outbox.SENT:
            out.append(Check("notify", OK, f"{name}: last delivery sent {when} ({row['last_answer'] or 'ok'})",
                             data=data))
        elif row["state"] == outbox.RETRYING:
            out.append(Check("notify", WARN, f"{name}: last delivery failed {when}, retrying: {row['last_error']}",
                             "check the channel's URL and that the service is up", data))
        elif row["state"] == outbox.FAILED:
            out.append(Check("notify", FAIL, f"{name}: last delivery failed {when}: {row['last_error']}",
                             "check the channel's URL and that the service is up; `agent-hook notify test` retries",
                             data))
        else:
            out.append(Check("notify", OK, f"{name}: last notification {row['state']} {when}", data=data))
    return out
