"""Unit tests of the continuity features: pure functions and a real SQLite file, no processes."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent_hooks import config as config_mod
from agent_hooks import schema
from agent_hooks import store as store_mod
from agent_hooks.features import heartbeat, lead_context, reminders, sessions, summary, toolcalls, transcript
from agent_hooks.payload import Payload

from support.repo import FIXTURES


@pytest.fixture
def cfg() -> dict[str, Any]:
    return copy.deepcopy(config_mod.DEFAULTS)


@pytest.fixture
def db(tmp_path: Path) -> store_mod.Store:
    s = store_mod.Store(str(tmp_path / "store.db"))
    yield s
    s.close()


def entries_of(name: str) -> list[dict[str, Any]]:
    with open(FIXTURES / name, "rb") as f:
        entries, partial = transcript.parse_lines(f, 10**6)
    assert not partial
    return entries


def payload(event: str, session_id: str, **extra: Any) -> Payload:
    return Payload({"hook_event_name": event, "session_id": session_id, "cwd": "/w", **extra})


# --- schema -------------------------------------------------------------------------------------

def test_schema_version_matches_migrations() -> None:
    assert store_mod.SCHEMA_VERSION == len(schema.MIGRATIONS)
    assert "m005_continuity" in schema.MIGRATIONS


def test_config_sections_validate(cfg: dict[str, Any]) -> None:
    assert config_mod.validate(cfg) == []
    for section in ("reminder", "lead", "summary", "heartbeat", "cleanup"):
        assert section in cfg
    bad = copy.deepcopy(cfg)
    bad["heartbeat"]["stalled_after_s"] = "soon"
    assert any("stalled_after_s" in p for p in config_mod.validate(bad))


# --- transcript ---------------------------------------------------------------------------------

def test_facts_on_real_transcript() -> None:
    f = transcript.facts(entries_of("transcript-sample.jsonl"))
    assert f["first_prompt"] == "tidy notes"
    assert f["files"] == ["/home/dev/acme/notes.txt", "/home/dev/acme/memory/2026-11-21-notes.md"]
    assert f["commands"] == ["exit 3"]
    assert {v["tool"] for v in f["failures"].values()} == {"Bash", "TodoWrite"}
    assert f["failures"]["toolu_0003"] == {"tool": "Bash", "what": "exit 3", "error": "Exit code 3"}
    # The fixture's TodoWrite failed (tool not enabled): its list is not the session's todo list.
    assert f["todos"] is None
    assert f["last_reply"] == "Finished."


def test_facts_on_real_compacted_transcript() -> None:
    f = transcript.facts(entries_of("transcript-compacted-sample.jsonl"))
    assert f["first_prompt"] == "first task"
    assert f["last_prompt"] == "continue"  # the /compact command and its stdout are not prompts
    assert f["commands"] == ["echo a", "echo b", "echo c"]
    assert f["compactions"] == 1
    assert f["failures"] == {}


def _todo_entries(result_error: bool | None) -> list[dict[str, Any]]:
    todos = [{"content": "write tests", "status": "completed"}, {"content": "ship it", "status": "in_progress"},
             {"content": "tell the lead", "status": "pending"}]
    out: list[dict[str, Any]] = [
        {"type": "assistant", "message": {"id": "m1", "content": [
            {"type": "tool_use", "id": "t1", "name": "TodoWrite", "input": {"todos": todos}}]}},
    ]
    if result_error is not None:
        out.append({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": result_error}]}})
    return out


def test_todos_from_last_successful_todowrite() -> None:
    assert [t["content"] for t in transcript.open_todos(transcript.facts(_todo_entries(False))["todos"])] == [
        "ship it", "tell the lead"]
    # Result not written yet (the transcript lags): still the list.
    assert transcript.facts(_todo_entries(None))["todos"] is not None
    assert transcript.facts(_todo_entries(True))["todos"] is None


def test_parse_lines_skips_bad_and_overlong_lines() -> None:
    lines = [b'{"type":"user","message":{"content":"hi"}}', b"not json", b"[1,2]", b"", b'{"type": "us',
             b'{"type":"user","message":{"content":"' + b"x" * 5000 + b'"}}', b"\xff\xfe"]
    entries, partial = transcript.parse_lines(lines, max_line_bytes=1000)
    assert entries == [{"type": "user", "message": {"content": "hi"}}]
    assert not partial


def test_read_tail_cuts_at_a_line_boundary(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [json.dumps({"type": "user", "n": i, "pad": "y" * 50}) for i in range(1000)]
    path.write_text("\n".join(lines) + "\n")
    data, cut = transcript.read_tail(str(path), 4096)
    assert cut and len(data) <= 4096
    entries, _ = transcript.parse_lines(data.split(b"\n"), 10**6)
    assert entries and entries[-1]["n"] == 999
    assert [e["n"] for e in entries] == list(range(entries[0]["n"], 1000))


def test_safe_path_only_under_claude_dir_and_never_a_symlink(tmp_path: Path, cfg: dict[str, Any]) -> None:
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "p"
    proj.mkdir(parents=True)
    good = proj / "s.jsonl"
    good.write_text("{}\n")
    env = {"HOME": str(home)}
    assert transcript.safe_path(str(good), env, cfg) == os.path.realpath(good)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text("{}\n")
    assert transcript.safe_path(str(outside), env, cfg) is None
    link = proj / "link.jsonl"
    link.symlink_to(outside)
    assert transcript.safe_path(str(link), env, cfg) is None
    inner_link = proj / "inner.jsonl"
    inner_link.symlink_to(good)
    assert transcript.safe_path(str(inner_link), env, cfg) is None
    assert transcript.safe_path("relative.jsonl", env, cfg) is None
    assert transcript.safe_path(str(proj / "s.txt"), env, cfg) is None
    assert transcript.safe_path(str(proj / ".." / ".." / ".." / "elsewhere.jsonl"), env, cfg) is None
    cfg["transcript"]["extra_roots"] = [str(tmp_path)]
    assert transcript.safe_path(str(outside), env, cfg) == os.path.realpath(outside)
    assert transcript.load(str(link), env, cfg)["path"] is None


# --- reminder -----------------------------------------------------------------------------------

def test_reminder_with_task_progress_and_todos(cfg: dict[str, Any]) -> None:
    info = {"task_id": "T-42", "description": "Add cursor pagination to GET /orders", "progress": "api done, tests left",
            "task_state": "open", "first_prompt": "ignored when the task describes the goal"}
    todos = [{"content": "write tests", "status": "in_progress"}, {"content": "old", "status": "completed"}]
    text = reminders.render(info, todos, cfg)
    assert text.splitlines() == [
        reminders.HEADER,
        "Task id: T-42",
        "Task: Add cursor pagination to GET /orders",
        "Progress so far: api done, tests left",
        "Open todo items:",
        "- [in_progress] write tests",
        reminders.CARRY_ON,
    ]


def test_reminder_falls_back_to_first_prompt(cfg: dict[str, Any]) -> None:
    text = reminders.render({"task_id": None, "description": None, "first_prompt": "tidy notes"}, None, cfg)
    assert "Goal (the session's first prompt): tidy notes" in text
    assert "Task id" not in text and text.endswith(reminders.CARRY_ON)
    assert reminders.render({"first_prompt": None}, None, cfg) == ""


def test_reminder_stays_within_max_chars_and_keeps_the_carry_on_line(cfg: dict[str, Any]) -> None:
    cfg["reminder"]["max_chars"] = 600
    text = reminders.render({"task_id": "T", "description": "word " * 1000}, None, cfg)
    assert len(text) <= 600
    assert text.endswith(reminders.CARRY_ON)
    assert "Task: word word" in text


def test_reminder_from_store_and_compaction_count(db: store_mod.Store, cfg: dict[str, Any]) -> None:
    env = {"AGENT_HOOKS_TASK_ID": "T-7"}
    with db.write() as conn:
        conn.execute("INSERT INTO tasks (task_id, description, progress, state, created_at, updated_at)"
                     " VALUES ('T-7', 'Migrate the billing cron', '2 of 5 jobs moved', 'open', 0, 0)")
        sessions.touch(conn, payload("SessionStart", "s"), env, cfg, 1.0)
        reminders.record_compaction(conn, payload("PreCompact", "s"), 2.0)
        reminders.record_compaction(conn, payload("PreCompact", "s"), 3.0)
    text = reminders.reminder(db.conn, payload("PreCompact", "s"), {}, cfg)
    assert "Task id: T-7" in text and "Task: Migrate the billing cron" in text
    assert "Progress so far: 2 of 5 jobs moved" in text
    assert db.conn.execute("SELECT compactions, last_compact_at FROM sessions").fetchone() == (2, 3.0)
    cfg["reminder"]["enabled"] = False
    assert reminders.reminder(db.conn, payload("PreCompact", "s"), {}, cfg) == ""


# --- heartbeat ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("state", "idle", "expected"),
    [("live", 10, ("live", None)), ("live", 901, ("stalled", 1.0)), ("awaiting", 10_000, ("awaiting", None)),
     ("ended", 10_000, ("ended", None)), ("live", 900, ("live", None))],
)
def test_stalled_derivation(state: str, idle: float, expected: tuple[str, float | None]) -> None:
    assert heartbeat.derive(state, 1000.0, 1000.0 + idle, 900) == expected


def test_default_stalled_threshold_outlasts_the_longest_bash_call(cfg: dict[str, Any]) -> None:
    assert heartbeat.stalled_after(cfg) > 600  # Bash's own maximum timeout is 10 minutes


# --- lead context -------------------------------------------------------------------------------

def _rec(i: int, now: float, **extra: Any) -> dict[str, Any]:
    rec = {"session_id": f"{i:08d}-aaaa", "agent": f"worker-{i}", "role": "worker", "state": "live",
           "last_seen_at": now - 30 * i, "cwd": f"/home/dev/repo{i}", "tool_calls": 12, "task_id": f"T-{i}",
           "description": f"Task number {i}: " + "refactor the parser " * 3, "progress": None,
           "first_prompt": None, "tmux_session": None,
           "recent": [{"tool": "Bash", "outcome": "success", "at": now, "error": None},
                      {"tool": "Edit", "outcome": "failure", "at": now, "error": "x"}]}
    rec.update(extra)
    return rec


def test_lead_block_lists_sessions_and_ends_with_the_no_duplicate_line() -> None:
    now = 10_000.0
    text = lead_context.render([_rec(1, now), _rec(2, now, state="stalled")], now, 3000)
    assert text.startswith(lead_context.HEADER) and text.endswith(lead_context.FOOTER)
    assert "worker-1, session 00000001: live, last activity 30s ago" in text
    assert "worker-2, session 00000002: stalled" in text
    assert "task T-2: Task number 2" in text
    assert "recent tools (newest first, 12 in all): Bash ok, Edit failed" in text


@pytest.mark.parametrize("budget", [250, 400, 700, 1500])
def test_lead_block_respects_its_budget(budget: int) -> None:
    now = 10_000.0
    recs = [_rec(i, now) for i in range(1, 30)]
    text = lead_context.render(recs, now, budget)
    assert len(text) <= budget
    assert text.endswith(lead_context.FOOTER)
    assert "more not shown)" in text
    if budget >= 400:
        assert "worker-1," in text
    else:
        assert "worker-" not in text  # no room: the count and the footer only


def test_lead_block_from_store_excludes_self_ended_and_old(db: store_mod.Store, cfg: dict[str, Any]) -> None:
    now = 100_000.0
    with db.write() as conn:
        for sid, at, state in (("me", now, None), ("w1", now - 10, None), ("w2", now - 20, "awaiting"),
                               ("gone", now - 5, "ended"), ("old", now - 99_999, None)):
            sessions.touch(conn, payload("SessionStart", sid), {"AGENT_HOOKS_AGENT": f"agent-{sid}"}, cfg, at, state)
        toolcalls.start(conn, payload("PreToolUse", "w1", tool_name="Bash", tool_input={"command": "make"},
                                      tool_use_id="u1"), now - 10, cfg)
    assert lead_context.block(db.conn, "me", {}, cfg, now) == ""  # a worker gets nothing
    text = lead_context.block(db.conn, "me", {"AGENT_HOOKS_ROLE": "lead"}, cfg, now)
    assert "agent-w1" in text and "agent-w2" in text and "awaiting" in text and "Bash running" in text
    assert "agent-me" not in text and "agent-gone" not in text and "agent-old" not in text
    cfg["identity"]["role"] = "lead"
    assert lead_context.block(db.conn, "me", {}, cfg, now) == text


# --- summary ------------------------------------------------------------------------------------

def test_extractive_summary_of_the_real_transcript(cfg: dict[str, Any]) -> None:
    found = transcript.facts(entries_of("transcript-sample.jsonl"))
    session = {"session_id": "s-1", "agent": "worker-1", "task_id": "T-1", "description": "Tidy the notes",
               "first_prompt": "tidy notes"}
    db_fail = [{"tool_use_id": "toolu_0003", "tool": "Bash", "error": "Exit code 3"},
               {"tool_use_id": "toolu_9", "tool": "Read", "error": "File does not exist."}]
    text = summary.extractive(session, found, "Notes tidied; deploy key documented.", db_fail, cfg)
    lines = text.splitlines()
    assert lines[:4] == ["Session s-1 by agent worker-1, task T-1", "Task: Tidy the notes",
                         "Goal (first prompt): tidy notes", "Outcome: Notes tidied; deploy key documented."]
    assert lines[4] == "Files touched (2): /home/dev/acme/notes.txt; /home/dev/acme/memory/2026-11-21-notes.md"
    assert lines[5] == "Commands run (1): exit 3"
    assert lines[6].startswith("Failures (3): Bash `exit 3`: Exit code 3; TodoWrite: <tool_use_error>")
    assert lines[6].endswith("Read: File does not exist.")  # a PostToolUseFailure row not in the transcript
    # Deterministic.
    assert summary.extractive(session, found, "Notes tidied; deploy key documented.", db_fail, cfg) == text


def test_extractive_summary_without_transcript_and_capped(cfg: dict[str, Any]) -> None:
    text = summary.extractive({"session_id": "s"}, None, "done", [], cfg)
    assert text == "Session s\nOutcome: done"
    cfg["summary"]["max_chars"] = 100
    cfg["summary"]["max_items"] = 2
    found = {"files": [f"/f{i}" for i in range(50)], "commands": [], "failures": {}}
    text = summary.extractive({"session_id": "s"}, found, "x" * 500, [], cfg)
    assert len(text) <= 100
    long = summary.extractive({"session_id": "s"}, found, "ok", [], copy.deepcopy(config_mod.DEFAULTS) | {
        "summary": {**cfg["summary"], "max_chars": 4000}})
    assert "Files touched (50) (+48 earlier): /f48; /f49" in long


def test_extractive_summary_of_the_compacted_transcript(cfg: dict[str, Any]) -> None:
    found = transcript.facts(entries_of("transcript-compacted-sample.jsonl"))
    text = summary.extractive({"session_id": "c"}, found, None, [], cfg)
    assert "Goal (first prompt): first task" in text
    assert "Last prompt: continue" in text
    assert "Commands run (3): echo a; echo b; echo c" in text
    assert "Outcome: after compact" in text  # the reply to the prompt after /compact


def test_summary_upsert_and_search(db: store_mod.Store, cfg: dict[str, Any]) -> None:
    with db.write() as conn:
        summary.save(conn, "s-a", "alice", "T-1", "Fixed the flaky websocket reconnect test", "extractive", 1.0)
        summary.save(conn, "s-b", "bob", None, "Wrote the billing migration for invoices", "extractive", 2.0)
    hits = summary.search(db.conn, "websocket", 5)
    assert [h["session_id"] for h in hits] == ["s-a"]
    assert hits[0]["kind"] == "session" and "[websocket]" in hits[0]["snippet"]
    assert set(hits[0]) >= {"name", "path", "snippet", "score", "kind"}
    # Upsert replaces the text and the index follows.
    with db.write() as conn:
        summary.save(conn, "s-a", "alice", "T-1", "Now about the cache layer", "command", 3.0)
    assert summary.search(db.conn, "websocket", 5) == []
    assert summary.get(db.conn, "s-a")["source"] == "command"
    # All words first, else any word; punctuation in the query is not FTS syntax.
    assert [h["session_id"] for h in summary.search(db.conn, 'billing "invoices" AND (', 5)] == ["s-b"]
    assert {h["session_id"] for h in summary.search(db.conn, "cache billing", 5)} == {"s-a", "s-b"}
    assert summary.search(db.conn, "  ", 5) == []
    assert db.conn.execute("SELECT count(*) FROM session_summaries").fetchone()[0] == 2


ODD_ENTRIES: list[Any] = [
    {"type": "user"}, {"type": "user", "message": None}, {"type": "user", "message": []},
    {"type": "user", "message": {"content": {"a": 1}}}, {"type": "user", "message": {"content": [1, None, "x"]}},
    {"type": "user", "message": {"content": [{"type": "tool_result"}]}},
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": 5, "is_error": True}]}},
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "nope", "is_error": True,
                                              "content": [{"text": 3}, "s", {"text": "t"}]}]}},
    {"type": "user", "todos": "not a list"}, {"type": "user", "todos": [1, {"content": None}, {"content": "c"}]},
    {"type": "assistant", "message": "text"}, {"type": "assistant", "message": {"content": None}},
    {"type": "assistant", "message": {"id": 7, "content": [{"type": "tool_use"}]}},
    {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Bash", "input": "ls"}]}},
    {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Write", "input": {"file_path": 3}}]}},
    {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "TodoWrite", "id": "t",
                                                   "input": {"todos": {"x": 1}}}]}},
    {"type": "assistant", "message": {"content": [{"type": "text", "text": None}]}},
    {"type": "system", "subtype": "compact_boundary"}, {"type": None}, {},
]


def test_facts_never_raise_on_odd_shapes(cfg: dict[str, Any]) -> None:
    for i in range(len(ODD_ENTRIES)):
        found = transcript.facts(ODD_ENTRIES[i:] + ODD_ENTRIES[:i])
        assert found["compactions"] == 1
        summary.extractive({"session_id": "s"}, found, None, [], cfg)
    assert transcript.facts([])["first_prompt"] is None
