"""Polling limits: a call repeated to wait on something (CI, a deploy, a server).

Rules (``[polling] rules`` + ``extra_rules``) match a tool name (regex, full
match) and/or a Bash command (regex, searched). A matched call is a poll of
that rule; its *key* is the rule plus the command with its ``sleep N`` steps
removed (``sleep 10 && gh run view 7`` and ``sleep 30 && gh run view 7`` are
the same poll), or plus the input hash for tools without a command. Two limits:

* rate: at most ``max_calls`` polls of a rule per ``per_seconds`` in a session;
* no progress: when the same poll returned the same output (the hash that
  PostToolUse records; a failure's error text counts as its output) the last
  ``no_progress_warn`` times it warns, and from ``no_progress_block`` times it
  is denied until it backs off: allowed again ``backoff_seconds`` after the
  previous poll, doubling with each further unchanged result. A ``sleep``
  inside the command counts as waiting.

Denied polls are not recorded as polls, so a denial never extends itself.
"""

from __future__ import annotations

import re
import sqlite3

from agent_hooks.features.verdict import DENY, WARN, Verdict
from agent_hooks.hashing import digest

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RULE_RATE = "polling.rate"
RULE_NO_PROGRESS = "polling.no_progress"
# Compiled on first use (re caches it): only a call that matched a rule needs it.
_SLEEP = r"\bsleep\s+(\d+(?:\.\d+)?)([smhd]?)\b\s*(?:&&|;|\n)?"
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class Poll:
    """A call that matched a polling rule."""

    __slots__ = ("rule", "name", "key", "sleep_seconds")

    def __init__(self, rule: dict[str, Any], name: str, key: str, sleep_seconds: float) -> None:
        self.rule = rule
        self.name = name
        self.key = key  # the same poll: rule + command without its sleeps
        self.sleep_seconds = sleep_seconds  # waiting done inside the command itself


class PollSnapshot:
    """What the store knows about a poll's rule and key in this session."""

    __slots__ = ("recent", "oldest_at", "outputs", "last_at")

    def __init__(self, recent: int = 0, oldest_at: float | None = None, outputs: tuple[str, ...] = (),
                 last_at: float | None = None) -> None:
        self.recent = recent  # the rule's non-denied polls within its time window
        self.oldest_at = oldest_at  # start of the oldest of those
        self.outputs = outputs  # this poll's recorded outputs, newest first
        self.last_at = last_at  # when this poll last finished (or started)


def all_rules(config: dict[str, Any]) -> list[dict[str, Any]]:
    section = config["polling"]
    rules = list(section.get("rules") or []) + list(section.get("extra_rules") or [])
    return [r for r in rules if isinstance(r, dict) and (r.get("tool") or r.get("command"))]


def sleep_seconds(command: str) -> float:
    """Seconds of ``sleep`` written into a shell command."""
    if "sleep" not in command:  # no regex to compile
        return 0.0
    return sum(float(n) * _UNIT[u] for n, u in re.findall(_SLEEP, command))


def normalise(command: str) -> str:
    return " ".join((re.sub(_SLEEP, " ", command) if "sleep" in command else command).split())


def _tool_matches(pattern: str, tool_name: str) -> bool:
    # "Bash" or "BashOutput|TaskOutput" need no regex (compiling one costs every tool call).
    if pattern.replace("|", "").replace("_", "").isalnum():
        return tool_name in pattern.split("|")
    return re.fullmatch(pattern, tool_name) is not None


def _mentions(rule: dict[str, Any], command: str) -> bool:
    """A rule's ``contains`` words: cheap substring tests before its regex is compiled and run."""
    words = rule.get("contains")
    return not words or any(w in command for w in words)


def match(tool_name: str, tool_input: dict[str, Any], input_hash: str, config: dict[str, Any]) -> Poll | None:
    """The first polling rule this call matches, with the poll's key. Pure."""
    if not config["polling"].get("enabled", True):
        return None
    command = tool_input.get("command")
    command = command if isinstance(command, str) else None
    for rule in all_rules(config):
        tool_re, command_re = rule.get("tool"), rule.get("command")
        try:
            if tool_re and not _tool_matches(tool_re, tool_name):
                continue
            if command_re and (command is None or not _mentions(rule, command) or not re.search(command_re, command)):
                continue
        except re.error:
            continue  # `agent-hook config` reports bad patterns; the hook ignores the rule
        name = str(rule.get("name") or tool_re or command_re)
        if command is not None:
            return Poll(rule, name, digest([name, tool_name, normalise(command)]), sleep_seconds(command))
        return Poll(rule, name, digest([name, tool_name, input_hash]), 0.0)
    return None


def _setting(rule: dict[str, Any], config: dict[str, Any], key: str) -> float:
    value = rule.get(key)
    return float(config["polling"][key] if value is None else value)


def read_snapshot(conn: sqlite3.Connection, session_id: str, since_id: int, poll: Poll, now: float,
                  config: dict[str, Any]) -> PollSnapshot:
    """Two indexed reads: the rule's recent polls, and this poll's latest outputs."""
    per = _setting(poll.rule, config, "per_seconds")
    recent, oldest = conn.execute(
        "SELECT count(*), min(started_at) FROM tool_calls WHERE session_id = ? AND poll_rule = ?"
        " AND started_at >= ? AND id > ? AND outcome != 'denied'",
        (session_id, poll.name, now - per, since_id),
    ).fetchone()
    # Enough outputs to see the streak reach the block and keep doubling the backoff up to its cap.
    limit = int(max(_setting(poll.rule, config, "no_progress_warn"), _setting(poll.rule, config, "no_progress_block")))
    base, cap = float(config["polling"]["backoff_seconds"]), float(config["polling"]["backoff_max_seconds"])
    while base > 0 and base < cap and limit < 64:
        base *= 2
        limit += 1
    rows = conn.execute(
        "SELECT output_hash, coalesce(ended_at, started_at) FROM tool_calls WHERE session_id = ? AND poll_key = ?"
        " AND id > ? AND outcome NOT IN ('denied', 'pending') ORDER BY id DESC LIMIT ?",
        (session_id, poll.key, since_id, limit + 1),
    ).fetchall()
    return PollSnapshot(int(recent), oldest, tuple(r[0] or "" for r in rows), rows[0][1] if rows else None)


def unchanged_streak(outputs: tuple[str, ...] | list[str]) -> int:
    """How many of the latest results (newest first) were the same output in a row."""
    if not outputs:
        return 0
    streak = 1
    while streak < len(outputs) and outputs[streak] == outputs[0]:
        streak += 1
    return streak


def decide(poll: Poll, snap: PollSnapshot, now: float, config: dict[str, Any]) -> Verdict | None:
    """Rate limit and no-progress verdict for one poll; None to allow silently. Pure."""
    rule, name = poll.rule, poll.name
    max_calls = int(_setting(rule, config, "max_calls"))
    per = _setting(rule, config, "per_seconds")
    calls = snap.recent + 1
    if calls > max_calls:
        wait = max(1, int((snap.oldest_at or now) + per - now + 0.999))
        return Verdict(DENY, f"{RULE_RATE}:{name}", (
            f"Polling guard: blocked. This is poll {calls} matching rule '{name}' in the last {int(per)} s "
            f"(limit {max_calls}); the call did not run. Back off: poll again in about {wait} s at the "
            f"earliest, do other useful work meanwhile, or use one blocking wait with a timeout instead "
            f"of repeated checks. If you are waiting on something that is not coming, stop and report."
        ))
    warn_at = int(_setting(rule, config, "no_progress_warn"))
    block_at = int(_setting(rule, config, "no_progress_block"))
    streak = unchanged_streak(snap.outputs)
    if streak >= block_at:
        base = config["polling"]["backoff_seconds"]
        needed = min(float(config["polling"]["backoff_max_seconds"]), float(base) * 2 ** (streak - block_at))
        waited = (now - snap.last_at if snap.last_at is not None else needed) + poll.sleep_seconds
        if waited < needed:
            return Verdict(DENY, f"{RULE_NO_PROGRESS}:{name}", (
                f"Polling guard: blocked. This poll (rule '{name}') returned the same output the last "
                f"{streak} times: no progress. The call did not run. Back off: wait at least "
                f"{int(needed - waited + 0.999)} s more before polling again (a separate `sleep`, or "
                f"`sleep {int(needed)} && ...` in the command), or take another approach: look at why it "
                f"is not changing, or stop and report what you are waiting for."
            ))
        return Verdict(WARN, f"{RULE_NO_PROGRESS}:{name}", (
            f"Polling guard warning: this poll (rule '{name}') returned the same output the last {streak} "
            f"times. It may run after backing off; if this result is unchanged too, the next wait "
            f"doubles. Consider another approach."
        ))
    if streak >= warn_at:
        return Verdict(WARN, f"{RULE_NO_PROGRESS}:{name}", (
            f"Polling guard warning: this poll (rule '{name}') returned the same output the last {streak} "
            f"times. Back off (wait longer between checks) or take another approach; after {block_at} "
            f"unchanged results it will be held back."
        ))
    if calls == max_calls:
        return Verdict(WARN, f"{RULE_RATE}:{name}", (
            f"Polling guard warning: poll {calls} of at most {max_calls} matching rule '{name}' in "
            f"{int(per)} s. Poll less often; further polls in this period will be blocked."
        ))
    return None
