"""OpenClaw gateway frames -> actions for the board (pure parsing, no I/O; oc_store writes them).

:class:`Mapper` turns one decoded gateway event into actions (no I/O):

    agent        stream "lifecycle" phase start         -> run_start  (card -> running)
    session.tool stream "tool" phase start (with args)  -> tool       (contract event tool_use, "TOOL: input")
    session.tool stream "tool" phase result             -> tool_end
    agent        stream "item" kind "tool" phase start  -> tool       (no args: its title; only while the
                                                                       connection is not subscribed to sessions)
    agent        stream "lifecycle" phase end / error   -> run_end    (completed; aborted or error -> failed)
    agent        stream "lifecycle" waiting-approval    -> waiting    (awaiting review, needs input)
    agent        stream "lifecycle" approval-resolved   -> resumed    (running)
    exec.approval.requested                             -> approval   (a pending row in ``approvals``)
    exec.approval.resolved                              -> resolved   (that row answered at the gateway)

Everything else (assistant text deltas, usage, chat, task, session.message) is read and dropped. A tool call's
idempotency key is its toolCallId, so one heard both ways is listed once. What is sent is hostile
until shown otherwise: ids with control characters are refused, text is cleaned and clipped.
agent_hooks.openclaw.records applies the actions to the store.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from typing import Any

from agent_hooks.features import approvals
from agent_hooks.output import one_line

AGENT_TYPE = "openclaw"
VIEW_CHARS = 200
MAX_KEY_CHARS = 200
RUNS_KEPT = 1000
# An approval row's id: ours, so the answer route knows to send it to the gateway (agent_hooks.openclaw.service).
ID_PREFIX = "oc-"
_ID_SAFE = re.compile(r"[^A-Za-z0-9_-]")
# KEY=value where KEY looks like a secret: the value is not shown on a card.
_SECRET = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|AUTH)[A-Za-z0-9_]*)=(\S+)",
                     re.IGNORECASE)
# The argument a tool call is best told by, in order.
_VIEW_KEYS = ("command", "cmd", "file_path", "path", "url", "query", "pattern", "description")
DECISIONS_OUT = {"allow": "allow-once", "allow_always": "allow-always", "deny": "deny"}
DECISIONS_IN = {"allow-once": ("allow", approvals.ALLOWED), "allow-always": ("allow_always", approvals.ALLOWED),
                "deny": ("deny", approvals.DENIED)}


# Control characters (C0 but tab and newline, DEL, C1): never part of an id, and shown in a terminal
# (the CLI lists commands and labels) they could rewrite what the operator sees.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def obj(value: Any) -> dict[str, Any]:
    """A JSON object from the gateway, or {} for anything else (a frame's fields are hostile until shown otherwise)."""
    return value if isinstance(value, dict) else {}


def _str(value: Any, limit: int = MAX_KEY_CHARS) -> str | None:
    """An id from the gateway (session key, run id, agent id...), clipped; None when it is not a plain
    string: one with a control character or a lone surrogate is no id, and SQLite cannot store the latter."""
    if isinstance(value, str) and value and not _CONTROL.search(value) and not _has_surrogate(value):
        return value[:limit]
    return None


def clean_text(value: Any, limit: int) -> str | None:
    """Free text from the gateway (a command, an error, a title), made safe to store and show: clipped,
    lone surrogates and control characters replaced (one odd character must not lose a batch of events)."""
    if not isinstance(value, str) or not value:
        return None
    value = _CONTROL.sub("\ufffd", value[:limit])
    return value.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(value) else value  # "?" for each


def _has_surrogate(value: str) -> bool:
    try:
        value.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def safe_view(args: Any, limit: int = VIEW_CHARS) -> str:
    """A tool call's input on one line: its command (or path, url...) else compact JSON, secrets masked, clipped."""
    text = ""
    if isinstance(args, dict):
        for key in _VIEW_KEYS:
            value = args.get(key)
            if isinstance(value, str) and value.strip():
                text = value
                break
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                text = " ".join(value)
                break
        if not text and args:
            text = json.dumps(args, ensure_ascii=False, default=str, separators=(",", ":"))[: limit * 4]
    elif isinstance(args, str):
        text = args
    text = _SECRET.sub(lambda m: f"{m.group(1)}=***", clean_text(text[: limit * 4], limit * 4) or "")
    return one_line(text, limit) if text else ""


def card_id(host: str, session_key: str) -> str:
    """The card of one OpenClaw session on one gateway: the same id on every reconnect and restart."""
    return "oc-" + hashlib.sha1(f"{host}\x00{session_key}".encode()).hexdigest()[:12]


def approval_id(gateway_id: str) -> str:
    """Our row's id for the gateway's request: the gateway's own id when it is short and URL-safe (a UUID),
    else a digest of it. Never a cut or rewritten id: two requests must not share a row (the second one
    would go unlisted, and an answer to either would settle the other)."""
    if len(gateway_id) <= 60 and not _ID_SAFE.search(gateway_id):
        return ID_PREFIX + gateway_id
    return ID_PREFIX + "h." + hashlib.sha256(gateway_id.encode()).hexdigest()[:32]  # "." is never in the above


class Mapper:
    """Decoded gateway events -> actions. Remembers which session each run belongs to (a tool event
    may come without its sessionKey), for the newest RUNS_KEPT runs."""

    def __init__(self, approvals: bool = True) -> None:
        self.runs: OrderedDict[str, tuple[str, str | None]] = OrderedDict()
        # Whether approval requests are listed ([openclaw] approvals): without it none could be answered.
        self.approvals = approvals
        # True once sessions.subscribe succeeded: tool calls then come with their input (session.tool).
        self.subscribed = False
        # The newest requests the gateway said were answered (approval id -> action), for an answer from
        # here that raced one given there: the gateway's refusal of ours then records theirs (openclaw.answer).
        self.resolved: OrderedDict[str, dict[str, Any]] = OrderedDict()
        # The gateway's bootId (hello-ok): a run is remembered with the boot it ran in (see :func:`apply`).
        self.boot: str | None = None

    def connected(self, boot: str | None) -> list[dict[str, Any]]:
        """After a hello: the gateway's boot. A new one means it restarted, and the runs it had died with it."""
        self.boot = boot
        return [{"kind": "boot", "boot": boot}] if boot else []

    def _session(self, payload: dict[str, Any], run_id: str | None) -> tuple[str | None, str | None]:
        key, agent = _str(payload.get("sessionKey")), _str(payload.get("agentId"), 80)
        if run_id:
            if key:
                self.runs[run_id] = (key, agent)
                self.runs.move_to_end(run_id)
                while len(self.runs) > RUNS_KEPT:
                    self.runs.popitem(last=False)
            elif run_id in self.runs:
                key, known = self.runs[run_id]
                agent = agent or known
        if agent is None and key and key.startswith("agent:"):
            agent = key.split(":")[1][:80] or None  # agent:<agentId>:<rest>
        return key, agent

    def actions(self, event: str, payload: Any) -> list[dict[str, Any]]:
        """What one gateway event means for the board ([] for what it does not show)."""
        if not isinstance(payload, dict):
            return []
        if event == "agent":
            return self._agent(payload)
        if event == "session.tool":
            return self._agent(payload, tools_only=True)
        if event == "exec.approval.requested":
            return self._requested(payload) if self.approvals else []
        if event == "exec.approval.resolved":
            gid, decision = _str(payload.get("id")), payload.get("decision")
            if gid and decision in DECISIONS_IN:
                act = {"kind": "resolved", "id": approval_id(gid), "decision": decision,
                       "by": clean_text(payload.get("resolvedBy"), 200)}
                self.resolved[act["id"]] = act
                while len(self.resolved) > RUNS_KEPT:
                    self.resolved.popitem(last=False)
                return [act]
        return []

    def pending_list(self, items: Any) -> list[dict[str, Any]]:
        """The answer to ``exec.approval.list`` after a (re)connect: every request still pending there
        (one heard for the first time is listed), then a sync that settles ours the gateway no longer has."""
        if not self.approvals or not isinstance(items, list):
            return []
        out = [act for item in items for act in self._requested(item if isinstance(item, dict) else {})]
        return out + [{"kind": "sync", "ids": [a["id"] for a in out]}]

    def _agent(self, p: dict[str, Any], tools_only: bool = False) -> list[dict[str, Any]]:
        stream, data = p.get("stream"), p.get("data")
        if not isinstance(data, dict) or stream not in (("tool",) if tools_only else ("lifecycle", "tool", "item")):
            return []
        if stream == "item" and (data.get("kind") != "tool" or self.subscribed):
            return []
        run_id = _str(p.get("runId"))
        key, agent = self._session(p, run_id)
        if not key:
            return []
        # Idempotency keys say what happened, not the event's seq: a run's seq restarts after an abort, and
        # an aborted run's end is followed by an error for the same run (the first end wins).
        base: dict[str, Any] = {"session_key": key, "agent": agent, "run_id": run_id, "idem": None, "boot": self.boot}
        phase = data.get("phase")
        if stream == "lifecycle":
            if phase == "start":
                return [{**base, "kind": "run_start", "idem": f"{run_id}:start" if run_id else None}]
            if phase == "waiting-approval":
                return [{**base, "kind": "waiting", "detail": "exec approval"}]
            if phase == "approval-resolved":
                return [{**base, "kind": "resumed"}]
            if phase in ("end", "error"):
                aborted = data.get("aborted") is True
                error = clean_text(data.get("error"), 200) if not isinstance(data.get("error"), dict) else \
                    clean_text(data["error"].get("message"), 200)
                failed = aborted or phase == "error" or data.get("stopReason") == "error"
                why = "aborted" if aborted else (f"error: {error}" if error else
                                                 ("error" if failed else clean_text(data.get("stopReason"), 60)))
                return [{**base, "kind": "run_end", "failed": failed, "why": why,
                         "idem": f"{run_id}:end" if run_id else None}]
            return []
        name = _str(data.get("name"), 60) or "tool"
        call = _str(data.get("toolCallId"))
        if call and run_id:
            base["idem"] = f"{run_id}:tool:{call}:{'start' if phase == 'start' else 'end'}"
        elif run_id and isinstance(p.get("seq"), int):
            base["idem"] = f"{run_id}:tool-seq:{p['seq']}"  # no call id (not seen from the real gateway)
        if phase == "start":
            view = safe_view(data.get("args")) if stream == "tool" else \
                safe_view(clean_text(data.get("meta"), 1000) or clean_text(data.get("title"), 1000) or "")
            return [{**base, "kind": "tool", "tool": name, "view": view}]
        if phase in ("result", "end"):
            return [{**base, "kind": "tool_end", "tool": name, "error": data.get("isError") is True}]
        return []

    def _requested(self, p: dict[str, Any]) -> list[dict[str, Any]]:
        gid = _str(p.get("id"))
        req = obj(p.get("request"))
        if not gid:
            return []
        command = clean_text(req.get("command"), approvals.MAX_MESSAGE_CHARS)
        if command is None and isinstance(req.get("commandArgv"), list):
            command = clean_text(" ".join(str(a) for a in req["commandArgv"]), approvals.MAX_MESSAGE_CHARS)
        key = _str(req.get("sessionKey")) or f"agent:{_str(req.get('agentId'), 80) or 'unknown'}:approvals"
        created, expires = p.get("createdAtMs"), p.get("expiresAtMs")
        unavailable = req.get("unavailableDecisions")
        allowed = [d for d in DECISIONS_OUT if not (isinstance(unavailable, list) and DECISIONS_OUT[d] in unavailable)]
        return [{"kind": "approval", "id": approval_id(gid), "gateway_id": gid, "session_key": key,
                 "agent": _str(req.get("agentId"), 80), "command": command or "",
                 "cwd": clean_text(req.get("cwd"), 500),
                 "allowed": allowed,
                 "created_at": created / 1000 if isinstance(created, (int, float)) else None,
                 "expires_at": expires / 1000 if isinstance(expires, (int, float)) else None}]
