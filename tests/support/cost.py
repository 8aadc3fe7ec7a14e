"""Transcripts with token usage for the cost and budget tests: where the client keeps a session's
transcript, its lines, hook payloads that name it, and what genai-prices itself charges for them
(the data set the shipped prices are extracted from), never what our code computes."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from support.scripts import run_hook


def tpath(sid: str) -> Path:
    return Path(os.environ["HOME"]) / ".claude" / "projects" / "-work" / f"{sid}.jsonl"


def payload(event: str, sid: str, home: Path, path: Path | None = None, **extra: Any) -> dict[str, Any]:
    return {"session_id": sid, "hook_event_name": event, "cwd": str(home.parent),
            "transcript_path": str(path or tpath(sid)), **extra}


def post_tool(sid: str, home: Path, env: dict[str, str] | None = None) -> None:
    proc = run_hook(payload("PostToolUse", sid, home, tool_name="Bash", tool_input={"command": "ls"},
                            tool_use_id="t1", tool_response={"stdout": ""}), env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b"", proc.stderr


def expected_usd(lines: list[dict[str, Any]]) -> float:
    """What genai-prices charges for the lines' assistant usage, each message id + request id once."""
    import genai_prices  # the test modules skip without it (pytest.importorskip)

    seen: set[str] = set()
    total = 0.0
    for e in lines:
        msg = e.get("message") if e.get("type") == "assistant" else None
        if not isinstance(msg, dict) or "usage" not in msg:
            continue
        key = f"{msg['id']}:{e['requestId']}"
        if key in seen:
            continue
        seen.add(key)
        extracted = genai_prices.extract_usage({"model": msg["model"], "usage": msg["usage"]}, provider_id="anthropic")
        when = datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00"))
        total += float(genai_prices.calc_price(extracted.usage, msg["model"], provider_id="anthropic",
                                               genai_request_timestamp=when).total_price)
    return total


def assistant(mid: str, rid: str, model: str = "claude-sonnet-4-5", at: str = "2026-11-25T10:00:00.000Z",
              **usage: Any) -> dict[str, Any]:
    u = {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    u.update(usage)
    return {"type": "assistant", "requestId": rid, "timestamp": at, "uuid": f"u-{mid}-{rid}",
            "message": {"id": mid, "model": model, "role": "assistant", "content": [], "usage": u}}


def write(path: Path, lines: list[dict[str, Any]], mode: str = "w", tail: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode) as fh:
        fh.write("".join(json.dumps(x) + "\n" for x in lines) + tail)


def transcript(env: dict[str, str], sid: str) -> Path:
    """The session's transcript under the user home ``env`` names."""
    return Path(env["HOME"]) / ".claude" / "projects" / "-work" / f"{sid}.jsonl"


def spend(env: dict[str, str], sid: str, lines: list[dict[str, Any]]) -> None:
    """Append the lines to the session's transcript and run PostToolUse there (it prices them)."""
    path = transcript(env, sid)
    for line in lines:
        line.setdefault("sessionId", sid)
        line.setdefault("cwd", "/work")
    write(path, lines, mode="a")
    proc = run_hook({"session_id": sid, "hook_event_name": "PostToolUse", "cwd": "/work",
                     "transcript_path": str(path), "tool_name": "Bash", "tool_input": {"command": "ls"},
                     "tool_use_id": f"t-{time.monotonic_ns()}", "tool_response": {"stdout": ""}}, env)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
