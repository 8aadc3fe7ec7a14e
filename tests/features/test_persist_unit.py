"""The pure persistence decision (features/persist.py): each bypass, in order, and the hold."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from agent_hooks.config import DEFAULTS
from agent_hooks.features import persist
from agent_hooks.features.persist import Snapshot, TranscriptState, decide

NOW = 10_000.0


def cfg(**persist_over: Any) -> dict[str, Any]:
    c = copy.deepcopy(DEFAULTS)
    c["persist"].update(persist_over)
    return c


def snap(**over: Any) -> Snapshot:
    values = dict(session_id="S1", role="worker", session_cancelled=False, task_id="T-1", task_state="open",
                  persist=1, max_continuations=None, continuations=0, description="Port the parser",
                  progress="lexer done", task_updated_at=NOW - 10, chain=0, first_seen_at=NOW - 100,
                  last_tool_at=NOW - 5, last_prompt_at=NOW - 50, waiting_on=None)
    values.update(over)
    return Snapshot(**values)


def run(s: Snapshot, c: dict[str, Any] | None = None, env: dict[str, str] | None = None, active: bool = False,
        seen: TranscriptState | None = None, last: str = "") -> persist.Decision | None:
    return decide(s, c or cfg(), env or {}, NOW, active, seen or TranscriptState(), last)


def test_hold_names_the_task_progress_and_how_to_finish():
    d = run(snap())
    assert d is not None and d.hold and d.used == 1 and d.budget == 5
    for needle in ("T-1", "Port the parser", "lexer done", "agent-hook task done T-1",
                   "agent-hook task blocked T-1 '<why>'", "continuation 1 of 5"):
        assert needle in d.reason


def test_not_persisting_is_no_decision_and_default_turns_it_on():
    assert run(snap(persist=0)) is None
    assert run(snap(persist=None)) is None  # [persist] default = false
    assert run(snap(persist=None), cfg(default=True)).hold
    assert run(snap(), cfg(enabled=False)) is None


@pytest.mark.parametrize("state", ["cancelled", "done", "blocked"])
def test_bypass_task_not_open(state: str):
    d = run(snap(task_state=state))
    assert d.kind == state and not d.hold and state in d.reason


def test_bypass_session_cancelled():
    d = run(snap(session_cancelled=True))
    assert d.kind == persist.CANCELLED


def test_bypass_stop_hook_active_beyond_the_chain_limit():
    # Budget 20, but the client's cap (8 by default) bounds the chain at 7.
    s = snap(max_continuations=20, continuations=7, chain=7)
    d = run(s, active=True)
    assert d.kind == persist.STOP_HOOK_ACTIVE and "7" in d.reason
    assert run(snap(max_continuations=20, continuations=6, chain=6), active=True).hold
    # Not active: the chain starts afresh.
    fresh = run(s, active=False)
    assert fresh.hold and fresh.chain == 1
    assert run(snap(chain=2), active=True).chain == 3
    # A raised client cap raises the chain limit; 0 means the client has none.
    assert run(s, env={"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "12"}, active=True).hold
    assert run(s, env={"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "0"}, active=True).hold


def test_bypass_budget_spent():
    d = run(snap(continuations=5))
    assert d.kind == persist.BUDGET and "5 of 5" in d.reason
    assert run(snap(continuations=4)).hold
    assert run(snap(continuations=2, max_continuations=2)).kind == persist.BUDGET


def test_bypass_context_nearly_full():
    d = run(snap(), seen=TranscriptState(context_pct=98.0))
    assert d.kind == persist.CONTEXT and "98%" in d.reason
    assert run(snap(), seen=TranscriptState(context_pct=94.9)).hold
    assert run(snap(), cfg(context_stop_pct=90.0), seen=TranscriptState(context_pct=91.0)).kind == persist.CONTEXT


def test_bypass_user_interrupt():
    assert run(snap(), seen=TranscriptState(interrupted=True)).kind == persist.INTERRUPT


def test_bypass_api_error_from_transcript_state_or_message():
    assert run(snap(), seen=TranscriptState(api_error="rate_limit")).kind == persist.API_ERROR
    assert run(snap(waiting_on="error")).kind == persist.API_ERROR
    d = run(snap(), last="API Error: 529 overloaded")
    assert d.kind == persist.API_ERROR and "529" in d.reason


def test_bypass_stale():
    old = NOW - 4000
    s = snap(task_updated_at=old, last_tool_at=old, last_prompt_at=old, first_seen_at=old)
    d = run(s)
    assert d.kind == persist.STALE and "4000" in d.reason
    assert run(s, cfg(stale_after_s=5000)).hold
    assert run(snap(task_updated_at=old, last_tool_at=NOW - 1, last_prompt_at=old, first_seen_at=old)).hold


def test_bypass_lead():
    assert run(snap(role="lead")).kind == persist.LEAD


def test_order_first_bypass_wins():
    s = snap(task_state="done", continuations=9, role="lead")
    assert run(s, seen=TranscriptState(context_pct=99, interrupted=True)).kind == persist.DONE
    assert run(snap(continuations=9, role="lead"), seen=TranscriptState(context_pct=99)).kind == persist.BUDGET


def _assistant(tokens: int, model: str = "claude-opus-5-5", **extra: Any) -> dict[str, Any]:
    return {"type": "assistant", "message": {"model": model, "usage": {
        "input_tokens": tokens, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
        "output_tokens": 0}, "content": []}, **extra}


def test_scan_reads_the_latest_real_usage_and_how_the_turn_ended():
    c = cfg()
    entries = [_assistant(1000), {"type": "user", "message": {"content": "go"}}, _assistant(196_000)]
    seen = persist.scan(reversed(entries), c)
    assert seen.context_pct == 98.0 and not seen.interrupted and seen.api_error is None
    # A synthetic API-error message: its zeros do not count, the error does.
    err = _assistant(0, model="<synthetic>", isApiErrorMessage=True, error="rate_limit")
    seen = persist.scan(reversed(entries + [err]), c)
    assert seen.api_error == "rate_limit" and seen.context_pct == 98.0
    # An interrupt after the last answer.
    intr = {"type": "user", "message": {"content": [{"type": "text", "text": "[Request interrupted by user]"}]}}
    assert persist.scan(reversed(entries + [intr]), c).interrupted
    # Before the last answer it is history.
    assert not persist.scan(reversed([intr] + entries), c).interrupted
    # 1M-context models.
    assert persist.scan([_assistant(500_000, model="claude-opus-5-5[1m]")], c).context_pct == 50.0
    # Subagent (sidechain) lines are not the session's context.
    side = _assistant(199_000, isSidechain=True)
    assert persist.scan(reversed(entries[:1] + [side]), c).context_pct == 0.5


def _answer(tokens: int, text: str) -> dict[str, Any]:
    line = _assistant(tokens)
    line["message"]["content"] = [{"type": "text", "text": text}]
    return line


@contextmanager
def _later(write: Callable[[], Any], delay_s: float = 0.15) -> Iterator[None]:
    """``write`` runs on a thread ``delay_s`` into the block, and is joined at its end: a client writing late."""
    writer = threading.Thread(target=lambda: (time.sleep(delay_s), write()))
    writer.start()
    try:
        yield
    finally:
        writer.join()


def test_stop_waits_for_the_turns_last_line_to_reach_the_transcript(tmp_path):
    """Claude Code may run Stop before it writes the turn's usage: the tail is read again until it shows."""
    path = tmp_path / "t.jsonl"
    earlier = [_answer(1000, "Looking."), {"type": "user", "message": {"content": "go on"}}]
    path.write_text("".join(json.dumps(e) + "\n" for e in earlier))
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path)}

    # Without the wait, the stale tail is what Stop gets: the older answer's usage.
    assert persist.transcript_state(str(path), env, cfg(), answer="Done.").context_pct == 0.5

    def late_write() -> None:
        with path.open("a") as f:
            f.write(json.dumps(_answer(196_000, "Done.")) + "\n")

    with _later(late_write):
        seen = persist.transcript_state(str(path), env, cfg(), answer="Done.", wait_s=2.0)
    assert seen.context_pct == 98.0 and seen.answer == "Done."

    # A line that never comes costs at most the wait, then the tail is what it is.
    began = time.monotonic()
    seen = persist.transcript_state(str(path), env, cfg(), answer="Something else.", wait_s=0.2)
    assert 0.2 <= time.monotonic() - began < 1.5 and seen.context_pct == 98.0
    # No answer to wait for: one read.
    began = time.monotonic()
    persist.transcript_state(str(path), env, cfg(), answer="", wait_s=5.0)
    assert time.monotonic() - began < 1.0


def test_stop_waits_for_the_transcript_file_itself_on_a_first_turn(tmp_path):
    """On a session's first turn the client may run Stop before the transcript file exists
    (seen with 2.1.197 under load): that is waited for like a late line, not read as empty."""
    path = tmp_path / "t.jsonl"
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path)}

    with _later(lambda: path.write_text(json.dumps(_answer(196_000, "Done.")) + "\n")):
        seen = persist.transcript_state(str(path), env, cfg(), answer="Done.", wait_s=2.0)
    assert seen.context_pct == 98.0 and seen.answer == "Done."
    # A file that never comes costs at most the wait.
    began = time.monotonic()
    assert persist.transcript_state(str(tmp_path / "never.jsonl"), env, cfg(), answer="Done.",
                                    wait_s=0.2).context_pct is None
    assert 0.2 <= time.monotonic() - began < 1.5


@pytest.mark.parametrize("task_id", ["T-1", "port the parser", "it's big", 'odd "one" $x', "it's $5"])
def test_the_hold_names_a_finish_command_that_runs_and_passes_the_guards(task_id):
    """The reason's `task done` command is one shell word per argument, and the guards let it through."""
    import re
    import shlex

    from agent_hooks.features import cancellation

    d = run(snap(task_id=task_id))
    command = re.search(r"run exactly: (agent-hook task done .*? --note '<what you did>')", d.reason).group(1)
    assert shlex.split(command)[3] == task_id  # the shell hands the CLI the id whole
    blocked = re.search(r"If you cannot finish it, run: (agent-hook task blocked .*? '<why>')", d.reason).group(1)
    assert shlex.split(blocked)[3] == task_id
    exempt = task_id != "it's $5"  # a ' and a $ together: still one word to type, but not exempted
    for cmd in (command, blocked):
        got = cancellation.is_finish_command(snap(task_id=task_id), "Bash", {"command": cmd})
        assert got is exempt, cmd
