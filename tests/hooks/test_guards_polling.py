"""Polling rules: matching, the rate limit, no-progress counting and backoff (pure)."""

from __future__ import annotations

import copy

import pytest

from agent_hooks.config import DEFAULTS
from agent_hooks.features import polling
from agent_hooks.features.polling import PollSnapshot, decide, match, unchanged_streak
from agent_hooks.hashing import digest

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")


def rule_of(command: str | None, tool: str = "Bash", config=DEFAULTS) -> str | None:
    tool_input = {"command": command} if command is not None else {"bash_id": "b1"}
    poll = match(tool, tool_input, digest(tool_input), config)
    return poll.name if poll else None


@pytest.mark.parametrize(("command", "rule"), [
    ("sleep 30 && gh run view 123", "ci-watch"),  # the specific rule first
    ("sleep 30 && cat build/status.txt", "sleep-then-check"),
    ("sleep 5; curl -s localhost:8000/", "sleep-then-check"),
    ("until curl -sf localhost/ok; do sleep 2; done", "sleep-then-check"),
    ("gh run watch 123", "ci-watch"),
    ("gh pr checks 45", "ci-watch"),
    ("gh run view 99 --json status", "ci-watch"),
    ("kubectl rollout status deploy/api", "k8s-status"),
    ("kubectl get pods -n prod", "k8s-status"),
    ("curl -s http://127.0.0.1:8080/healthz", "http-status"),
    ("curl -s https://ci.example/api/jobs/7/status", "http-status"),
    ("git status", None),
    ("git status --short && git diff", None),
    ("sleep 5", None),
    ("pytest -q", None),
    ("echo 'gh is great'", None),
    ("gh pr create --fill", None),
    ("curl -s https://example.com/index.html", None),
    ("grep -r healthz src/", None),
])
def test_default_rules(command, rule):
    assert rule_of(command) == rule


def test_tool_rules_and_commands_only_apply_to_commands():
    assert rule_of(None, tool="BashOutput") == "background-output"
    assert rule_of(None, tool="TaskOutput") == "background-output"
    assert rule_of(None, tool="Read") is None
    assert match("Read", {"file_path": "/x/status"}, "h", DEFAULTS) is None


def test_extra_rules_add_and_rules_replace():
    cfg = copy.deepcopy(DEFAULTS)
    cfg["polling"]["extra_rules"] = [{"name": "aws-wait", "command": r"\baws\s+\S+\s+wait\b"}]
    assert rule_of("aws ecs wait services-stable", config=cfg) == "aws-wait"
    assert rule_of("gh pr checks 1", config=cfg) == "ci-watch"
    cfg["polling"]["rules"] = []
    assert rule_of("gh pr checks 1", config=cfg) is None
    cfg["polling"]["extra_rules"] = [{"name": "bad", "command": "("}]  # invalid regex: ignored, not fatal
    assert rule_of("(", config=cfg) is None
    cfg["polling"]["enabled"] = False
    assert rule_of("aws ecs wait x", config=cfg) is None


def test_same_poll_whatever_the_sleep():
    a = match("Bash", {"command": "sleep 10 && gh run view 7"}, "h1", DEFAULTS)
    b = match("Bash", {"command": "sleep 30 &&  gh run view 7", "description": "check"}, "h2", DEFAULTS)
    c = match("Bash", {"command": "sleep 30 && gh run view 8"}, "h3", DEFAULTS)
    assert a.key == b.key != c.key
    assert a.sleep_seconds == 10 and b.sleep_seconds == 30
    assert polling.sleep_seconds("sleep 2m; sleep 1.5 && x") == 121.5


def test_unchanged_streak():
    assert unchanged_streak(()) == 0
    assert unchanged_streak(("a",)) == 1
    assert unchanged_streak(("a", "a", "b", "a")) == 2
    assert unchanged_streak(("a",) * 5 + ("b",)) == 5


POLL = polling.Poll({"name": "ci-watch"}, "ci-watch", "k", 0.0)
NOW = 10_000.0


def check(outputs=(), recent=0, last_at=NOW - 1, poll=POLL, config=DEFAULTS):
    v = decide(poll, PollSnapshot(recent, NOW - 100, tuple(outputs), last_at), NOW, config)
    return None if v is None else (v.decision, v.rule.split(":")[0])


@pytest.mark.parametrize(("streak", "expected"), [
    (0, None), (2, None), (3, ("warn", "polling.no_progress")), (4, ("warn", "polling.no_progress")),
    (5, ("deny", "polling.no_progress")), (6, ("deny", "polling.no_progress")),
])
def test_no_progress_boundaries(streak, expected):
    outputs = ("same",) * streak + ("different",)
    assert check(outputs) == expected


def test_a_changed_output_resets_no_progress():
    assert check(("new",) + ("same",) * 9) is None


def test_backoff_lets_a_poll_through_and_doubles():
    five = ("same",) * 5
    assert check(five, last_at=NOW - 59)[0] == "deny"
    assert check(five, last_at=NOW - 60) == ("warn", "polling.no_progress")
    six = ("same",) * 6
    assert check(six, last_at=NOW - 119)[0] == "deny"  # 60 s * 2
    assert check(six, last_at=NOW - 120)[0] == "warn"
    assert check(("same",) * 20, last_at=NOW - 900)[0] == "warn"  # capped at backoff_max_seconds
    slept = polling.Poll({"name": "ci-watch"}, "ci-watch", "k", 60.0)
    assert check(five, last_at=NOW - 1, poll=slept)[0] == "warn"  # `sleep 60 && ...` is backing off


@pytest.mark.parametrize(("before", "expected"), [
    (0, None), (8, None), (9, ("warn", "polling.rate")), (10, ("deny", "polling.rate")),
    (11, ("deny", "polling.rate")),
])
def test_rate_boundaries(before, expected):
    # default max_calls 10 per 600 s; `before` polls of the rule already in the window.
    assert check(recent=before) == expected


def test_rule_overrides_and_retry_time():
    poll = polling.Poll({"name": "fast", "max_calls": 2, "per_seconds": 60}, "fast", "k", 0.0)
    v = decide(poll, PollSnapshot(2, NOW - 45, (), None), NOW, DEFAULTS)
    assert v.decision == "deny" and v.rule == "polling.rate:fast"
    assert "about 15 s" in v.message and "Back off" in v.message


def test_no_progress_message_suggests_backing_off_or_another_approach():
    v = decide(POLL, PollSnapshot(0, None, ("same",) * 5, NOW - 10), NOW, DEFAULTS)
    assert "Back off" in v.message and "another approach" in v.message and "50 s" in v.message


def test_snapshot_reads_enough_outputs_for_the_backoff_to_reach_its_cap(tmp_path):
    from agent_hooks.store import Store

    store = Store(str(tmp_path / "store.db"))
    poll = match("Bash", {"command": "gh pr checks 3"}, "h", DEFAULTS)
    for n in range(12):
        store.conn.execute(
            "INSERT INTO tool_calls (session_id, tool_name, input_hash, output_hash, outcome, poll_rule, poll_key,"
            " started_at, ended_at) VALUES ('s', 'Bash', 'h', 'same', ?, ?, ?, ?, ?)",
            ("failure" if n % 2 else "success", poll.name, poll.key, NOW - 500 + n, NOW - 499 + n))
    store.conn.execute(
        "INSERT INTO tool_calls (session_id, tool_name, input_hash, output_hash, outcome, poll_rule, poll_key,"
        " started_at) VALUES ('s', 'Bash', 'h', NULL, 'denied', ?, ?, ?)", (poll.name, poll.key, NOW - 5))
    snap = polling.read_snapshot(store.conn, "s", 0, poll, NOW, DEFAULTS)
    store.close()
    assert snap.recent == 12 and snap.last_at == NOW - 499 + 11  # the denied row counts for neither
    # 60 s doubling to the 900 s cap needs a streak of 5 + 4: the read must see at least that many.
    assert unchanged_streak(snap.outputs) >= 9
    assert check(snap.outputs, last_at=NOW - 899)[0] == "deny"
    assert check(snap.outputs, last_at=NOW - 900)[0] == "warn"
