"""``agent-hook notify``: the channels that tell a person (docs/notifications.md).

``notify test`` sends one notification to each ``[[notify.channels]]`` channel and each device
subscribed from the board, from this process (no server needed), and prints what each answered.
Each answer is kept as that channel's last delivery, which `agent-hook doctor` shows.
"""

from __future__ import annotations

import time
from typing import Any

import click

from agent_hooks import fleet
from agent_hooks.cli.common import Exit, echo_json, load_config, open_store, paths, writing


@click.group()
def notify() -> None:
    """Notification channels (Apprise URLs, Web Push devices): test them."""


def _subscriptions() -> list[dict[str, Any]]:
    from agent_hooks.notify import push

    store = open_store()
    if store is None:
        return []
    try:
        return push.subscriptions(store.conn)
    except Exception:  # noqa: BLE001 - a store from before notifications: no device subscribed yet
        return []
    finally:
        store.close()


@notify.command(name="test")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def test_cmd(as_json: bool) -> None:
    """Send a test notification to each channel and subscribed device, and print what each answered.

    Exits 1 when one of them did not take it, or when there is nothing to send to.
    """
    from agent_hooks.notify import outbox, push, rules, send, text

    cfg = load_config()
    found, problems = rules.channels(cfg)
    subs = _subscriptions()
    msg = text.test(rules.board_url(cfg), fleet.host_name(cfg))
    timeout = float(cfg["notify"]["timeout_s"])
    results: list[dict[str, Any]] = []
    for channel in found:
        t0 = time.monotonic()
        sent = send.apprise_send(channel.url, msg, timeout)
        results.append({"channel": channel.name, "key": channel.key, "ok": sent.ok, "answer": sent.answer,
                        "ms": round((time.monotonic() - t0) * 1000)})
    if subs:
        key = push.vapid(paths())
        for sub in subs:
            t0 = time.monotonic()
            sent = send.push_send(sub, msg, key, push.contact(cfg), timeout)
            results.append({"channel": push.channel_name(sub), "key": sub["channel"], "ok": sent.ok,
                            "answer": sent.answer, "ms": round((time.monotonic() - t0) * 1000)})
    if results:
        at = time.time()
        with writing() as conn:
            for r in results:
                outbox.record_test(conn, r["key"], r["channel"], msg, at, r["ok"], r["answer"])
    if as_json:
        echo_json({"results": [{k: v for k, v in r.items() if k != "key"} for r in results], "problems": problems})
    else:
        for problem in problems:
            click.echo(f"! {problem} (left out)")
        if not results:
            click.echo("no channel to send to: add [[notify.channels]] url = \"<Apprise URL>\" to the config"
                       " (docs/notifications.md), or subscribe a device with the board's \"Notify me\"")
        for r in results:
            click.echo(f"{'✓' if r['ok'] else '✗'} {r['channel']}: {r['answer']} ({r['ms']} ms)")
    if not results or not all(r["ok"] for r in results):
        raise SystemExit(Exit.ERROR)


COMMANDS = [notify]
