"""command-logger: one JSON line per tool call and prompt, in a size-rotated log."""

from __future__ import annotations

import fcntl
import json
import os
import time


def _clip(value: object, limit: int) -> object:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= limit else text[: limit - 1] + "…"


def _rotate(path: str, backups: int) -> None:
    for n in range(backups - 1, 0, -1):
        if os.path.exists(f"{path}.{n}"):
            os.replace(f"{path}.{n}", f"{path}.{n + 1}")
    if backups > 0:
        os.replace(path, f"{path}.1")
    else:
        os.remove(path)  # no backups kept: start afresh (replacing the file by itself kept it growing)


def handle(event: dict) -> dict | None:
    cfg = event["config"]
    path = os.path.expanduser(cfg.get("path") or os.path.join(event["handler"]["data_dir"], "commands.jsonl"))
    max_bytes = int(cfg.get("max_bytes", 5 * 1024 * 1024))
    backups = int(cfg.get("backups", 3))
    limit = int(cfg.get("max_chars", 2000))
    payload, session = event["payload"], event["session"]
    entry = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "event": event["event"],
        "session_id": session["id"],
        "agent": session["agent"],
        "role": session["role"],
        "task_id": session["task_id"],
        "cwd": session["cwd"],
    }
    if event["event"] == "UserPromptSubmit":
        entry["prompt"] = _clip(payload.get("prompt") or "", limit)
    else:
        entry["tool_name"] = payload.get("tool_name")
        entry["tool_use_id"] = payload.get("tool_use_id")
        entry["tool_input"] = _clip(payload.get("tool_input") or {}, limit)
    line = json.dumps(entry, ensure_ascii=False) + "\n"
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    # One lock for rotate + append: many hook processes write this file at once.
    lock_fd = os.open(path + ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        try:
            if os.path.getsize(path) + len(line) > max_bytes:
                _rotate(path, backups)
        except OSError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "surrogatepass"))
        finally:
            os.close(fd)
    finally:
        os.close(lock_fd)
    return None
