"""Payload mutations for the fuzz tier, reproducible from a random seed: hostile and unlucky inputs."""

from __future__ import annotations

import json
import random
from typing import Any

from support.repo import fixture_payload

# The captured payloads the mutations start from (and a Notification, which no capture has).
BASE_PAYLOADS = [
    "SessionStart-startup.json", "SessionStart-resume.json", "SessionStart-compact.json", "SessionEnd.json",
    "UserPromptSubmit.json", "PreToolUse-Bash.json", "PreToolUse-Write.json", "PreToolUse-Edit.json",
    "PostToolUse-Bash.json", "PostToolUse-Write.json", "PostToolUse-Read.json", "PostToolUseFailure-Bash.json",
    "PreCompact-manual.json", "Stop.json",
]
NOTIFICATION = {"session_id": "fuzz", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name": "Notification",
                "message": "Claude needs your permission", "notification_type": "permission_prompt"}

STRINGS = [
    "", " ", "\ud83d", "fix \ud83d bug", "\udc00tail", "esc-\u001b[2J\u001b]0;x\u0007", "a\nb\r\nc", "nul\u0000byte",
    "\u202eevil", "x" * 100_000, "/" + "d" * 5000, "../../../../etc/passwd", "~/", "😀" * 50, "\ufeffbom",
    "null", "0", "-1", "1e309", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "C:\\\\Windows", "%s%n%x", "' OR 1=1 --", "{\"a\": 1}",
]
NUMBERS = ["0", "-0", "1e30", "-1e30", "1e400", "-1e400", "NaN", "Infinity", "-Infinity", "9" * 30, "3.5", "-7",
           "1.7976931348623157e308", "5e-324"]


def base_payloads() -> list[dict[str, Any]]:
    return [fixture_payload(name) for name in BASE_PAYLOADS] + [dict(NOTIFICATION)]


def _deep(depth: int, kind: str) -> str:
    return ("[" * depth + "]" * depth) if kind == "list" else ('{"a":' * depth + "1" + "}" * depth)


def _raw(value: Any) -> str:
    """JSON text of ``value``, keeping lone surrogates as escapes (json.dumps does)."""
    return json.dumps(value)


def mutate(rng: random.Random, base: dict[str, Any], n: int) -> bytes:
    """One mutated payload (bytes, as Claude Code would write them to stdin)."""
    doc = json.loads(json.dumps(base))
    # A fresh session per case unless the mutation is about ids: repeated calls would be (rightly) loops.
    doc["session_id"] = f"fuzz-{n}"
    if "tool_use_id" in doc:
        doc["tool_use_id"] = f"toolu_fuzz_{n}"
    keys = list(doc)
    choice = rng.randrange(14)
    key = rng.choice(keys)
    marker = "__FUZZ__"
    if choice == 0:
        doc[key] = rng.choice(STRINGS)
    elif choice == 1:
        doc[key] = marker
        return _raw(doc).replace(f'"{marker}"', rng.choice(NUMBERS)).encode()
    elif choice == 2:
        doc[key] = rng.choice([None, True, False, [], {}, [1, "a"], {"x": {"y": [None]}}, 0, ""])
    elif choice == 3:
        del doc[key]
    elif choice == 4:
        doc[f"unknown_{rng.randrange(100)}"] = rng.choice(STRINGS + [{"deep": {"er": [1, 2, {"x": None}]}}])
    elif choice == 5:
        doc[key] = marker
        return _raw(doc).replace(f'"{marker}"', _deep(rng.choice([70, 200, 900, 5000]), rng.choice(["list", "dict"]))).encode()
    elif choice == 6:
        text = _raw(doc).encode()
        return text[: rng.randrange(len(text))]
    elif choice == 7:
        data = bytearray(_raw(doc).encode())
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    elif choice == 8:
        doc["hook_event_name"] = rng.choice(["PreToolUse", "Stop", "", "SubagentStop", "x" * 1000, "Stop\ud83d"])
    elif choice == 9:
        field = rng.choice(["session_id", "cwd", "transcript_path", "tool_name", "tool_use_id", "agent_id", "prompt",
                            "last_assistant_message", "error", "hook_event_name"])
        doc[field] = rng.choice(STRINGS)
    elif choice == 10:
        inp = doc.get("tool_input") if isinstance(doc.get("tool_input"), dict) else {}
        inp[rng.choice(["command", "file_path", "content", "old_string", "pattern", "path"])] = rng.choice(
            STRINGS + [None, 5, ["a"], {"b": 1}])
        doc["tool_input"] = inp
    elif choice == 11:
        doc["duration_ms"] = marker
        return _raw(doc).replace(f'"{marker}"', rng.choice(NUMBERS)).encode()
    elif choice == 12:
        doc["tool_response"] = rng.choice(STRINGS + [{"stdout": "\ud83d" * 3, "stderr": "x" * 50_000}, [None] * 100])
    else:
        for _ in range(3):
            k = rng.choice(list(doc) or ["session_id"])
            doc[k] = rng.choice(STRINGS)
    return _raw(doc).encode()


def cases(count: int, seed: int = 12) -> list[tuple[str, bytes]]:
    """``count`` (executable event, payload bytes) pairs: each base payload's own event, mutated."""
    rng = random.Random(seed)
    bases = base_payloads()
    out = []
    for n in range(count):
        base = bases[n % len(bases)]
        out.append((base["hook_event_name"], mutate(rng, base, n)))
    return out


# -- what a user handler may return (or do) -----------------------------------------------------

SURROGATES = [s for s in STRINGS if any("\ud800" <= c <= "\udfff" for c in s)]
DECISIONS = ["allow", "warn", "deny", "block", "", "DENY", None, 1, ["deny"], True, "\ud800"]
UPDATED_INPUTS = [{}, {"command": "echo fuzzed"}, {"command": None}, {"n": float("nan")}, {"n": float("inf")},
                  {1: "x"}, {("a",): 1}, {"s": {1, 2}}, {"b": b"x"}, [1], "str", {"command": "\ud800 \udcff"},
                  {"k\ud800": 1}, {"nested": {"a": [1, {"b": None}]}}, {"big": 10 ** 400}]


def handler_action(rng: random.Random) -> tuple[str, Any]:
    """(what the fuzzed handler does, with what): return a value, raise, print, or return a deep structure."""
    kind = rng.randrange(12)
    if kind == 0:
        return "return", None
    if kind == 1:
        return "return", rng.choice([1, "deny", [1], 3.5, float("nan"), b"x", {1, 2}, ("a",), True])
    if kind == 2:
        return "raise", rng.choice([ValueError("x\ud800"), RecursionError(), KeyboardInterrupt(), SystemExit(2),
                                    MemoryError(), UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates")])
    if kind == 3:
        return "print", rng.choice(STRINGS)
    if kind == 4:
        return "deep", rng.choice(["updated_input", "context", "result"])
    result: dict[Any, Any] = {}
    for key in ("decision", "reason", "context", "updated_input", "extra", 7):
        if rng.random() < 0.55:
            # Weighted towards what has broken before: a deny (recorded in the store) with a lone surrogate.
            if key == "decision":
                result[key] = rng.choice(["deny", "block"]) if rng.random() < 0.3 else rng.choice(DECISIONS)
            elif key == "updated_input":
                result[key] = rng.choice(UPDATED_INPUTS)
            elif rng.random() < 0.25:
                result[key] = rng.choice(SURROGATES)
            else:
                result[key] = rng.choice(STRINGS + [None, 5, ["x"], {"a": 1}, float("nan")])
    return "return", result


def handler_cases(count: int, seed: int = 16) -> list[tuple[str, bytes, tuple[str, Any]]]:
    """``count`` (event, a valid payload, the handler's action) triples, over every event."""
    rng = random.Random(seed)
    bases = base_payloads()
    out = []
    for n in range(count):
        doc = json.loads(json.dumps(bases[n % len(bases)]))
        doc["session_id"] = f"fuzz-h-{n}"
        if "tool_use_id" in doc:
            doc["tool_use_id"] = f"toolu_fuzz_h_{n}"
        out.append((doc["hook_event_name"], json.dumps(doc).encode(), handler_action(rng)))
    return out


# -- the server's API routes (every route the app registers, not only the hook routes) ------------

# A valid body for each route that takes one (by its template), mutated like the hook payloads.
API_BODIES: dict[str, list[dict[str, Any]]] = {
    "/api/hooks/ingest": [{"tmux_session": "agent-fz", "event": "start", "metadata": "m", "agent_type": "shell"},
                          {"session_id": "fz-session", "event": "tool_use"}],
    "/api/hooks/sessions": [{"tmux_session": "agent-fz", "session_id": "fz-session", "label": "l", "prompt": "p",
                             "task_id": "T-fz", "depends_on": ["T-0"], "agent_type": "claude-code"}],
    "/api/hooks/sessions/{id}": [{"state": "running"}, {"event": "to_review"}],
    "/api/sessions/{ref}/{action:str}": [{"reason": "fuzzing"}],
    # A launch: this host's (refused by its [launch] settings), and another host's (unknown here: 404).
    "/api/sessions": [{"cwd": "/tmp/fz", "prompt": "fuzzing", "label": "fz", "task_id": "T-fz", "agent": "fz",
                       "permission_mode": "plan"}, {"host": "web-1", "cwd": "/tmp", "prompt": "p"}],
    "/api/tasks/{task_id}/{action:str}": [{"reason": "fuzzing"}],
    "/api/fleet/report": [{"cards": [{"session_id": "fz-session", "tool_calls": 3, "last_activity": 1.0}],
                           "approvals": [{"id": "fz000001", "kind": "permission", "state": "pending",
                                          "session_id": "fz-session", "tool_name": "Bash", "created_at": 1.0,
                                          "expires_at": 2.0, "waited_ms": 5, "interrupt": 0}]}],
    "/api/fleet/replies": [{"results": [{"seq": 1, "error": None}]}],
    "/api/approvals/{id}": [{"decision": "allow"}, {"decision": "deny", "message": "m", "interrupt": True}],
    # Pairing: a code that was never issued (a real one would pair the fuzzer).
    "/api/fleet/pair": [{"code": "FZFZ-FZFZ-FZFZ"}],
    "/pair": [{"code": "FZFZ-FZFZ-FZFZ"}],
}
# Wrong for every route that takes a body: not an object, not text, a number JSON cannot hold, a
# reason (which every other route ignores or refuses) that is not a string.
WRONG_EVERYWHERE = [
    b"[]", b"7", b'"text"', b"null", b"\xff\xfe{}", b'{"reason": 5}', b'{"reason": ["x"]}', b'{"reason": 1e999}',
    b'{"reason": ' + b"9" * 5000 + b"}", b'{"reason": NaN}',
]
# Wrong for one route: (its template, the body).
WRONG_HERE = [
    ("/api/hooks/ingest", b'{"session_id": 1, "event": "start"}'),
    ("/api/hooks/ingest", b'{"tmux_session": "agent-t", "event": ["start"]}'),
    ("/api/hooks/ingest", b'{"tmux_session": {"a": 1}, "event": "start"}'),
    ("/api/hooks/sessions", b'{"tmux_session": "agent-t", "depends_on": "T1"}'),
    ("/api/hooks/sessions", b'{"tmux_session": "agent-t", "depends_on": [1]}'),
    ("/api/hooks/sessions", b'{"tmux_session": "agent-t", "agent_type": []}'),
    ("/api/hooks/sessions", b'{"tmux_session": "agent-t", "label": false}'),
    ("/api/hooks/sessions/{id}", b'{"state": 3}'),
    ("/api/hooks/sessions/{id}", b'{"event": {}}'),
    ("/api/sessions/{ref}/{action:str}", b'{"reason": {"text": "x"}}'),
    ("/api/tasks/{task_id}/{action:str}", b'{"reason": true}'),
    ("/api/sessions", b'{"cwd": "/tmp", "prompt": ["p"]}'),
    ("/api/sessions", b'{"cwd": 7, "prompt": "p"}'),
    ("/api/sessions", b'{"cwd": "/tmp\\u0000/x", "prompt": "p"}'),
    ("/api/sessions", b'{"cwd": "/tmp", "prompt": "p\\u0000"}'),
    ("/api/sessions", b'{"cwd": "/tmp", "prompt": "p", "permission_mode": {"a": 1}}'),
    ("/api/sessions", b'{"cwd": "/tmp", "prompt": "p", "host": ["x"]}'),
    ("/api/sessions", b'{"cwd": "/tmp", "prompt": "p", "label": "\\u001b[2J"}'),
    # Numbers no field can take (agent_hooks.center.numbers): infinity, NaN, past SQLite's integers, negative.
    *(("/api/fleet/report", b'{"cards": [{"session_id": "fz-session", "%s": %s}]}' % (field, raw))
      for field in (b"tool_calls", b"last_activity", b"waiting_since") for raw in (b"1e999", b"NaN", b"1" + b"0" * 30)),
    *(("/api/fleet/report", b'{"cards": [], "approvals": [{"id": "fz000002", "kind": "permission", "state": "pending",'
       b' "session_id": "fz", "tool_name": "Bash", "created_at": %s, "waited_ms": %s}]}' % (created, waited))
      for created, waited in ((b"1e999", b"1"), (b"1", b"1" + b"0" * 30), (b"-1e999", b"-1"))),
    *(("/api/fleet/replies", b'{"results": [{"seq": %s}]}' % raw) for raw in (b"1e999", b"1" + b"0" * 30, b"-1")),
    ("/api/hooks/ingest", b'{"tmux_session": "agent-fz", "event": "start", "cost_usd": 1e999}'),
    ("/api/fleet/pair", b'{"code": 12345678}'),
    ("/api/fleet/pair", b'{"code": ["FZFZ"]}'),
    ("/pair", b'{"code": {"a": 1}}'),
    ("/pair", b"code=%FF%FE&code=x"),
]
# Query parameters the routes read, and values for them (a long poll's wait stays short: a wait of 30 s
# is a long poll doing its job, not a finding).
QUERY_KEYS = ["host", "after", "epoch", "wait", "token", "x"]
QUERY_VALUES = ["", "0", "-1", "1e400", "nan", "99999999999999999999999", "-99999999999999999999", "0.1", "abc",
                "\x00", "%ED%A0%80", "%FF", "here", "a" * 5000]
PARAM_VALUES = STRINGS[:-1] + ["%ED%A0%80", "%FF%FE", "..", ".", "%2F", "T-fz", "agent-fz", "fz-session", "cancel",
                                "uncancel", "PreToolUse", "Stop"]
METHODS = ["GET", "POST", "PATCH", "DELETE", "PUT", "OPTIONS"]


def _quote(value: str) -> str:
    from urllib.parse import quote

    if value.startswith("%") and len(value) > 1:
        return value  # already a raw (possibly invalid UTF-8) escape
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


def _api_body(rng: random.Random, template: str, n: int) -> bytes:
    if template.startswith("/hooks"):
        return mutate(rng, rng.choice(base_payloads()), n)  # a hook route: what tests/hooks/test_fuzz.py sends the executables
    bases = API_BODIES.get(template) or [{"reason": "x"}]
    base = dict(rng.choice(bases))
    for key in ("tmux_session", "session_id"):
        if key in base:
            base[key] = f"{base[key]}-{n % 7}"
    kind = rng.randrange(10)
    if kind == 0:
        return rng.choice(WRONG_EVERYWHERE)
    if kind == 1:
        here = [body for t, body in WRONG_HERE if t == template]
        return rng.choice(here or WRONG_EVERYWHERE)
    if kind == 2:
        return _deep(rng.choice([900, 5000, 10_000, 30_000]), rng.choice(["list", "dict"])).encode()
    if kind == 3:  # a lone surrogate in a value or a key
        key = rng.choice(list(base) + ["\ud800"])
        base[key] = rng.choice(SURROGATES)
        return _raw(base).encode()
    if kind == 4:
        return b"" if rng.random() < 0.5 else b'{"reason": "' + b"x" * rng.choice([60_000, 70_000]) + b'"}'
    return mutate(rng, base, n)


def api_cases(routes: list[Any], count: int, seed: int = 26) -> list[dict[str, Any]]:
    """``count`` requests over ``routes`` (support.routes.AppRoute, every route of the app): a method
    (mostly the route's own), hostile path parameters and query, and a fuzzed body."""
    from urllib.parse import urlencode

    rng = random.Random(seed)
    http_routes = [r for r in routes if r.kind != "websocket"]
    out = []
    for n in range(count):
        route = http_routes[n % len(http_routes)]
        method = rng.choice(route.methods) if rng.random() < 0.85 else rng.choice(METHODS)
        params = {name: _quote(rng.choice(PARAM_VALUES)) for name in route.param_names}
        if "action" in params and rng.random() < 0.7:
            params["action"] = rng.choice(["cancel", "uncancel"])
        path = route.path(**params)
        if route.kind == "mount":
            path = route.template + "/" + _quote(rng.choice(PARAM_VALUES))
        if rng.random() < 0.5:
            query = {k: rng.choice(QUERY_VALUES) for k in rng.sample(QUERY_KEYS, rng.randrange(1, 4))}
            if "wait" in query and query["wait"] in ("1e400", "99999999999999999999999"):
                query["wait"] = "0"
            path += "?" + urlencode(query, safe="%")
        headers = {"Content-Type": rng.choice(["application/json", "text/plain", "", "application/x-www-form-urlencoded"])}
        if rng.random() < 0.2:
            headers["Idempotency-Key"] = rng.choice(["k", "k" * 300, "\u00ff\u00fe", " ", "a\tb"])
        if rng.random() < 0.2:
            headers["X-Agent-Hooks-Host"] = rng.choice(["", "web-1", "x" * 300, "\u00e9", "../..", "a b"])
        body = _api_body(rng, route.template, n) if method in ("POST", "PATCH", "PUT") or rng.random() < 0.1 else b""
        out.append({"route": route.template, "method": method, "path": path, "headers": headers, "body": body})
    return out
