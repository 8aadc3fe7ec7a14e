"""The parts of notifications that need no server: channels parsed and matched, the words (masked,
clipped, linked), the outbox on a real store, `agent-hook notify test` and config check."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from agent_hooks import config as config_mod
from agent_hooks.notify import outbox, rules, text
from agent_hooks.notify.text import Message

from support.receiver import Receiver
from support.scripts import agent_hook


def cfg(channels: list[object], **notify: object) -> dict[str, object]:
    config = config_mod.defaults()
    config["notify"].update(channels=channels, **notify)
    return config


def test_channels_default_to_every_kind_but_finished_and_narrow_by_globs() -> None:
    found, problems = rules.channels(cfg([{"url": "ntfy://t"}, {"url": "json://h/p", "on": ["finished"],
                                                                  "host": "ci-*", "agent": ["lead", "build*"]}]))
    assert problems == []
    everything, finished = found
    assert everything.on == frozenset(rules.DEFAULT_ON) and "finished" not in everything.on
    assert everything.name == "ntfy #1" and everything.key.startswith("apprise:") and "t" not in everything.key[8:9]
    assert finished.wants("finished", "ci-3", "builder", None)
    assert not finished.wants("finished", "laptop", "builder", None)
    assert not finished.wants("finished", "ci-3", "reviewer", None)
    assert not finished.wants("finished", "ci-3", None, None)  # narrowed by agent: an unknown agent is not told
    assert not finished.wants("request", "ci-3", "builder", None)


def test_bad_channels_are_left_out_with_a_reason_config_check_shows() -> None:
    config = cfg([{"url": "not a url"}, {"url": "ntfy://ok", "on": ["sometimes"]}, "x",
                  {"url": "json://h", "agnet": "x"}, {"url": "ntfy://fine", "task": 3}])
    found, problems = rules.channels(config)
    assert found == []
    text_ = "\n".join(problems)
    assert "notify.channels[0].url must be an Apprise URL" in text_
    assert "unknown kind(s) 'sometimes'" in text_
    assert "notify.channels[2] must be a table" in text_
    assert "unknown setting notify.channels[3].agnet" in text_
    assert "notify.channels[4].task must be a name" in text_
    assert set(problems) <= set(config_mod.validate(config))


def test_the_words_name_who_and_what_masked_clipped_and_linked() -> None:
    row = {"id": "abc123", "kind": "permission", "tool_name": "Bash",
           "tool_input": {"command": "curl -H 'Authorization: Bearer sk-abcdefghijklmnop' "
                                     "https://bob:pa55word@example.org/x --password s3cr3t; GITHUB_TOKEN=ghp_xyz0123 make "
                                     + "x" * 500}}
    msg = text.request(row, "host-a", "builder", "T-7", "https://cc.example.org")
    for secret in ("sk-abcdefghijklmnop", "pa55word", "s3cr3t", "ghp_xyz0123"):
        assert secret not in msg.body + msg.title
    assert "Bearer ***" in msg.body and "GITHUB_TOKEN=***" in msg.body and "--password ***" in msg.body
    assert "agent builder on host-a (task T-7)" in msg.title
    first = msg.body.splitlines()[0]
    assert first.startswith("Bash: curl") and len(first) <= text.COMMAND_CHARS + 40 and first.endswith("…")
    assert msg.url == "https://cc.example.org/#request=abc123" and msg.url in msg.body
    question = text.request({"id": "q1", "kind": "question", "tool_name": "AskUserQuestion",
                             "questions": [{"question": "Which database?"}]}, "h", None, None, "http://b")
    assert "asks: Which database?" in question.body and question.title.startswith("A question for you")
    gate = text.request({"id": "g", "kind": "gate", "gate": "push", "tool_name": "Bash",
                         "tool_input": {"command": "git push"}}, "h", "a", None, "http://b")
    assert gate.title.startswith("Approval gate push") and "git push" in gate.body
    assert text.request({"id": "oc-1", "kind": "permission", "tool_name": "exec", "tool_input": {"command": "ls"}},
                        "gw", None, None, "http://b").title.startswith("OpenClaw approval")


def store(tmp_path: Path) -> sqlite3.Connection:
    from agent_hooks import schema

    path = str(tmp_path / "store.db")
    schema.migrate(path)
    return sqlite3.connect(path, isolation_level=None)


def test_outbox_one_row_per_subject_and_channel_renotify_and_stop(tmp_path: Path) -> None:
    conn = store(tmp_path)
    msg = Message("t", "b", "http://x/#request=r1", "request-r1")
    assert outbox.enqueue(conn, "r1", "request", "apprise:1", "one", msg, 100.0)
    assert not outbox.enqueue(conn, "r1", "request", "apprise:1", "one", msg, 101.0)  # once per channel
    assert outbox.enqueue(conn, "r1", "request", "apprise:2", "two", msg, 100.0)
    assert [r["channel"] for r in outbox.due(conn, 100.0)] == ["apprise:1", "apprise:2"]
    one, two = outbox.due(conn, 100.0)
    outbox.delivered(conn, one["id"], 100.5, "Sent", 220.5)  # waits: again at renotify
    outbox.failed(conn, two["id"], 100.5, "HTTP 500", 101.5)
    assert outbox.due(conn, 101.0) == []
    assert [r["channel"] for r in outbox.due(conn, 101.5)] == ["apprise:2"]
    shown = outbox.attach(conn, [{"id": "r1", "host": "h"}])[0]["notifications"]
    assert [(n["channel"], n["state"], n["error"]) for n in shown] == [("one", "sent", None),
                                                                        ("two", "retrying", "HTTP 500")]
    # Answered: both stop; the one never delivered is cancelled, the delivered one stays "sent".
    assert outbox.stop_settled_requests(conn, set(), 102.0) == 2
    assert outbox.due(conn, 10_000.0) == []
    states = {n["channel"]: n["state"] for n in outbox.attach(conn, [{"id": "r1", "host": "h"}])[0]["notifications"]}
    assert states == {"one": "sent", "two": "cancelled"}
    assert {k: v["state"] for k, v in outbox.last_by_channel(conn).items()} == {"apprise:1": "sent",
                                                                                "apprise:2": "cancelled"}


def test_notify_test_prints_each_channels_answer_and_doctor_keeps_it(tmp_path: Path) -> None:
    with Receiver() as up, Receiver() as down:
        down.status = 500
        channels = json.dumps([{"url": up.url, "name": "up"}, {"url": down.url, "name": "down"},
                               {"url": "nosuchscheme://x"}])
        env = {"AGENT_HOOKS__NOTIFY__CHANNELS": channels}
        out = agent_hook("notify", "test", env=env, check=False)
        assert out.returncode == 1
        assert "✓ up: Sent JSON POST notification." in out.stdout, out.stdout
        assert "✗ down:" in out.stdout and "500" in out.stdout
        assert "✗ json" not in out.stdout and "nosuchscheme" in out.stdout  # Apprise does not know it: said
        [got] = up.bodies()
        assert got["title"] == "agent-hooks: a test notification"
        doctor = json.loads(agent_hook("doctor", "--json", env=env, check=False).stdout)
        lines = {c["data"].get("channel"): c for c in doctor["checks"] if c["area"] == "notify" and c.get("data")}
        assert lines["up"]["status"] == "ok" and "last delivery sent" in lines["up"]["summary"]
        assert lines["down"]["status"] == "fail" and "500" in lines["down"]["summary"]
    nothing = agent_hook("notify", "test", check=False)
    assert nothing.returncode == 1 and "no channel to send to" in nothing.stdout
