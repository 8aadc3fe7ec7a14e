"""Which channels are told about what: ``[[notify.channels]]`` parsed, checked and matched (pure, stdlib).

A channel is an Apprise URL with optional narrowing::

    [[notify.channels]]
    url = "ntfy://my-topic"                  # any Apprise URL
    name = "phone"                           # optional: how doctor and the request name it
    on = ["request", "failed"]               # optional: the kinds (default: all but "finished")
    host = "ci-*"; agent = ["builder", "lead"]; task = "T-42"   # optional: a name, a glob, or a list

A malformed channel is left out, with a problem `agent-hook doctor` and `config check` show; the
others still send.
"""

from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass, field
from typing import Any

REQUEST, FAILED, STALLED, BUDGET, FINISHED = "request", "failed", "stalled", "budget", "finished"
KINDS = (REQUEST, FAILED, STALLED, BUDGET, FINISHED)
# "finished" only when a channel asks for it: a person wants "needs you" kept apart from "done".
DEFAULT_ON = (REQUEST, FAILED, STALLED, BUDGET)
NARROWING = ("host", "agent", "task")
KEYS = ("url", "name", "on", *NARROWING)
APPRISE, PUSH = "apprise", "push"


@dataclass(frozen=True)
class Channel:
    """One channel: ``key`` names it in the outbox (a digest of its URL, or of a push endpoint: never the
    URL itself, which may hold a token), ``name`` is what people see."""

    key: str
    name: str
    url: str
    on: frozenset[str]
    narrow: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.key.split(":", 1)[0]

    def wants(self, kind: str, host: str | None, agent: str | None, task: str | None) -> bool:
        """True when this channel is told about ``kind`` for a session of this host, agent and task."""
        if kind not in self.on:
            return False
        for key, value in (("host", host), ("agent", agent), ("task", task)):
            globs = self.narrow.get(key)
            if globs and (not value or not any(fnmatch.fnmatchcase(value, g) for g in globs)):
                return False
        return True


def apprise_key(url: str) -> str:
    return APPRISE + ":" + hashlib.sha256(url.encode()).hexdigest()[:16]


def push_key(endpoint: str) -> str:
    return PUSH + ":" + hashlib.sha256(endpoint.encode()).hexdigest()[:16]


def _kinds(value: Any, where: str, problems: list[str]) -> frozenset[str] | None:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(k, str) for k in value):
        problems.append(f"{where} must be a list of kinds ({', '.join(KINDS)})")
        return None
    unknown = [k for k in value if k not in KINDS]
    if unknown:
        problems.append(f"{where}: unknown kind(s) {', '.join(map(repr, unknown))}; the kinds are {', '.join(KINDS)}")
        return None
    return frozenset(value)


def parse(raw: Any, index: int) -> tuple[Channel | None, list[str]]:
    """One channel from its table, or None and what is wrong with it."""
    where = f"notify.channels[{index}]"
    if not isinstance(raw, dict):
        return None, [f"{where} must be a table with url = \"<Apprise URL>\""]
    problems = [f"unknown setting {where}.{k}" for k in raw if k not in KEYS]
    url = raw.get("url")
    if not isinstance(url, str) or "://" not in url or not url.split("://", 1)[0]:
        problems.append(f"{where}.url must be an Apprise URL (\"ntfy://topic\", \"json://host/path\", ...)")
    name = raw.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        problems.append(f"{where}.name must be text")
    on = _kinds(raw.get("on", list(DEFAULT_ON)), f"{where}.on", problems)
    narrow: dict[str, tuple[str, ...]] = {}
    for key in NARROWING:
        value = raw.get(key)
        if value is None:
            continue
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
            problems.append(f"{where}.{key} must be a name, a glob, or a list of them")
            continue
        narrow[key] = tuple(values)
    if problems or on is None or not isinstance(url, str):
        return None, problems
    scheme = url.split("://", 1)[0].lower()
    shown = name.strip() if isinstance(name, str) else f"{scheme} #{index + 1}"
    return Channel(apprise_key(url), shown[:80], url, on, narrow), []


def channels(config: dict[str, Any]) -> tuple[list[Channel], list[str]]:
    """The valid channels, in order, and what is wrong with the others (the same URL twice counts once)."""
    raw = (config.get("notify") or {}).get("channels") or []
    found: list[Channel] = []
    problems: list[str] = []
    if not isinstance(raw, list):
        return [], ["notify.channels must be a list of tables ([[notify.channels]])"]
    seen: set[str] = set()
    for i, item in enumerate(raw):
        channel, wrong = parse(item, i)
        problems += wrong
        if channel is not None and channel.key not in seen:
            seen.add(channel.key)
            found.append(channel)
    return found, problems


def push_kinds(config: dict[str, Any]) -> frozenset[str]:
    """The kinds a subscribed device is told about (``notify.push_on``; a bad value: requests only)."""
    value = (config.get("notify") or {}).get("push_on")
    kinds = _kinds(value, "notify.push_on", [])
    return kinds if kinds is not None else frozenset({REQUEST})


def problems(config: dict[str, Any]) -> list[str]:
    """What is wrong with ``[notify]``'s channels and push_on (config check, doctor)."""
    out = channels(config)[1]
    _kinds((config.get("notify") or {}).get("push_on", [REQUEST]), "notify.push_on", out)
    return out


def covers(config: dict[str, Any], kind: str, host: str | None, agent: str | None, task: str | None) -> bool:
    """True when one of this host's channels is told about ``kind`` for that session: a host that
    tells its person itself says so in its report, and its command center then does not (docs)."""
    return any(c.wants(kind, host, agent, task) for c in channels(config)[0])


def board_url(config: dict[str, Any]) -> str:
    """Where the links in a notification point: ``notify.board_url``, else this server on loopback."""
    url = str((config.get("notify") or {}).get("board_url") or "").strip().rstrip("/")
    return url or f"http://127.0.0.1:{int(config['serve']['port'])}"
