"""Detached summarizer: ``python -m agent_hooks.features.summarize_worker SESSION_ID``.

Started by Stop when ``summary.summarizer_command`` is set. It feeds the
command a transcript excerpt on stdin (the extractive summary first, then the
conversation's newest ``summary.excerpt_chars``), kills it after
``summary.timeout_s``, and when it exits 0 with output, replaces the
session's summary, but only if no newer Stop rewrote it meanwhile. One worker
per session at a time (a lock file); a worker that finds the summary renewed
after its run goes round again, at most :data:`MAX_ROUNDS` times.
"""

from __future__ import annotations

import os
from typing import Any

from agent_hooks.features import detach, summary, transcript
from agent_hooks.log import log_error
from agent_hooks.paths import Paths
from agent_hooks.store import Store

EVENT = "SummaryWorker"
MAX_ROUNDS = 3


def excerpt(entries: list[dict[str, Any]], limit: int) -> str:
    """The conversation as plain text (prompts, replies, tool calls, errors), newest ``limit`` chars."""
    parts: list[str] = []
    for e in entries:
        if e.get("isSidechain"):
            continue
        text = transcript.user_text(e)
        if text:
            parts.append(f"User: {text}")
            continue
        raw_msg = e.get("message")
        msg = raw_msg if isinstance(raw_msg, dict) else {}
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for b in content:
            if not isinstance(b, dict):
                continue
            if e.get("type") == "assistant" and b.get("type") == "text" and isinstance(b.get("text"), str):
                parts.append(f"Assistant: {b['text']}")
            elif b.get("type") == "tool_use":
                raw_inp = b.get("input")
                inp = raw_inp if isinstance(raw_inp, dict) else {}
                arg = inp.get("command") or inp.get("file_path") or inp.get("path") or inp.get("pattern") or ""
                parts.append(f"Tool {b.get('name')}: {str(arg)[:300]}")
            elif b.get("type") == "tool_result" and b.get("is_error") is True:
                c = b.get("content")
                parts.append(f"Tool error: {str(c)[:300]}")
    text = "\n".join(parts)
    return text[-limit:]


def run_once(store: Store, session_id: str, env: Any, config: dict[str, Any], paths: Paths) -> float | None:
    """One summarizer run; returns the ``at`` of the summary it worked on (None: nothing to do)."""
    current = summary.get(store.conn, session_id)
    if current is None:
        return None
    session = summary.session_row(store.conn, session_id)
    scfg = config["summary"]
    loaded = transcript.load(session.get("transcript_path") or "", env, config)
    body = excerpt(loaded["entries"], int(scfg["excerpt_chars"]))
    stdin = f"{current['summary']}\n\n--- transcript excerpt ---\n{body}\n".encode()
    child_env = dict(env)
    child_env[detach.NESTED_VAR] = "1"
    cwd = session.get("cwd")
    cwd = cwd if cwd and os.path.isdir(cwd) else None
    command = scfg["summarizer_command"]
    # An argv list as documented; a string is tolerated and run by /bin/sh -c.
    command = command if isinstance(command, str) else [str(c) for c in command]
    result = detach.run_bounded(command, float(scfg["timeout_s"]), stdin=stdin,
                                env=child_env, cwd=cwd)
    text = result["stdout"].strip()
    if result["exit_code"] == 0 and text:
        max_chars = int(scfg["max_chars"])
        text = text if len(text) <= max_chars else text[: max_chars - 1] + "…"
        with store.write() as conn:
            conn.execute(
                "UPDATE session_summaries SET summary = ?, source = ? WHERE session_id = ? AND at = ?",
                (text, summary.COMMAND, session_id, current["at"]),
            )
    else:
        why = "timed out" if result["timed_out"] else f"exit {result['exit_code']}" if result["exit_code"] else "no output"
        log_error(paths, EVENT, "summarizer", f"summarizer {why}: {result['output_tail'][-300:]}", session_id)
    return current["at"]


def _work(session_id: str, env: Any, paths: Paths, config: dict[str, Any]) -> int:
    if not config["summary"]["summarizer_command"]:
        return 0
    store = Store(paths.store, int(config["runtime"]["busy_timeout_ms"]))
    try:
        done: float | None = None
        for _ in range(MAX_ROUNDS):
            current = summary.get(store.conn, session_id)
            # Done when nothing is stored, this Stop's summary was handled, or another worker did it.
            if current is None or current["at"] == done or current["source"] == summary.COMMAND:
                break
            done = run_once(store, session_id, env, config, paths)
    finally:
        store.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    # A second worker for the session leaves it to the first, which goes round
    # again when it sees a newer Stop.
    return detach.worker_main(argv, "agent_hooks.features.summarize_worker", "summary", EVENT, _work)


if __name__ == "__main__":
    raise SystemExit(main())
