"""What sessions cost, through the installed executables: real transcripts, read incrementally,
de-duplicated, subagents under their parent, unknown models unpriced. Expected dollars come from
genai-prices itself (the data set the shipped prices are extracted from), not from our code."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from support.cost import assistant, expected_usd, payload, post_tool, tpath, write
from support.repo import FIXTURES_ROOT
from support.scripts import agent_hook, run_hook, store_rows

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")

genai_prices = pytest.importorskip("genai_prices")

SAMPLE = FIXTURES_ROOT / "claude-code-2.1.332" / "transcript-sample.jsonl"


def sample_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


def session_cost(home: Path, sid: str) -> tuple[float, int]:
    row = store_rows(home, "SELECT cost_usd, cost_unpriced FROM sessions WHERE session_id = ?", (sid,))[0]
    return row["cost_usd"], row["cost_unpriced"]


def test_a_real_transcript_costs_what_the_data_set_says(hooks_home: Path):
    tpath("S1").parent.mkdir(parents=True)
    shutil.copy(SAMPLE, tpath("S1"))
    post_tool("S1", hooks_home)
    usd, unpriced = session_cost(hooks_home, "S1")
    want = expected_usd(sample_lines())
    assert want > 0 and usd == pytest.approx(want, rel=1e-9)
    assert unpriced == 0
    # Read once: a second call finds nothing new and adds nothing.
    post_tool("S1", hooks_home)
    assert session_cost(hooks_home, "S1")[0] == pytest.approx(want, rel=1e-9)
    offset = store_rows(hooks_home, "SELECT offset FROM cost_offsets")[0]["offset"]
    assert offset == SAMPLE.stat().st_size


def test_incremental_reads_skip_duplicates_and_wait_for_a_half_written_line(hooks_home: Path):
    a = assistant("msg_1", "req_1", input_tokens=1200, output_tokens=300, cache_creation_input_tokens=5000,
                  cache_read_input_tokens=40000,
                  cache_creation={"ephemeral_5m_input_tokens": 2000, "ephemeral_1h_input_tokens": 3000})
    b = assistant("msg_2", "req_2", input_tokens=10, output_tokens=900, cache_read_input_tokens=45000)
    c = assistant("msg_3", "req_3", input_tokens=7, output_tokens=50)
    write(tpath("S2"), [a])
    post_tool("S2", hooks_home)
    assert session_cost(hooks_home, "S2")[0] == pytest.approx(expected_usd([a]), rel=1e-9)
    # The same message streamed twice (same ids), then b, then c cut mid-line.
    half = json.dumps(c)
    write(tpath("S2"), [a, b], mode="a", tail=half[:40])
    post_tool("S2", hooks_home)
    assert session_cost(hooks_home, "S2")[0] == pytest.approx(expected_usd([a, b]), rel=1e-9)
    with tpath("S2").open("a") as fh:
        fh.write(half[40:] + "\n")
    post_tool("S2", hooks_home)
    assert session_cost(hooks_home, "S2")[0] == pytest.approx(expected_usd([a, b, c]), rel=1e-9)
    assert len(store_rows(hooks_home, "SELECT key FROM cost_messages WHERE session_id = 'S2'")) == 3


def test_an_unknown_model_is_unpriced_not_free(hooks_home: Path):
    write(tpath("S3"), [assistant("m1", "r1", model="gpt-4o", input_tokens=100, output_tokens=10),
                        assistant("m2", "r2", input_tokens=100, output_tokens=10)])
    post_tool("S3", hooks_home)
    usd, unpriced = session_cost(hooks_home, "S3")
    assert unpriced == 1
    assert usd == pytest.approx(expected_usd([assistant("m2", "r2", input_tokens=100, output_tokens=10)]))
    row = store_rows(hooks_home, "SELECT usd FROM cost_messages WHERE model = 'gpt-4o'")[0]
    assert row["usd"] is None


def test_a_subagent_transcript_counts_under_its_parent(hooks_home: Path):
    main = [assistant("m1", "r1", input_tokens=100, output_tokens=10)]
    sub = [assistant("s1", "rs1", model="claude-haiku-4-5", input_tokens=3000, output_tokens=700),
           assistant("s2", "rs2", model="claude-haiku-4-5", input_tokens=10, output_tokens=70,
                     cache_read_input_tokens=3000)]
    write(tpath("S4"), main)
    sub_path = tpath("S4").parent / "S4" / "subagents" / "agent-a1.jsonl"
    write(sub_path, sub)
    post_tool("S4", hooks_home)
    proc = run_hook(payload("SubagentStop", "S4", hooks_home, agent_id="a1", agent_type="Explore",
                            agent_transcript_path=str(sub_path), last_assistant_message="done",
                            stop_hook_active=False))
    assert proc.returncode == 0, proc.stderr
    assert session_cost(hooks_home, "S4")[0] == pytest.approx(expected_usd(main + sub), rel=1e-9)
    rows = store_rows(hooks_home, "SELECT agent_id FROM cost_messages WHERE session_id = 'S4' ORDER BY key")
    assert [r["agent_id"] for r in rows] == [None, "a1", "a1"]


def test_a_subagent_with_no_transcript_file_is_nothing_to_count_not_an_error(hooks_home: Path):
    """Some clients keep no transcript of a subagent (2.1.197 among them): its SubagentStop names a
    file that is not there. The parent's own cost stands and no error is logged."""
    main = [assistant("m1", "r1", input_tokens=100, output_tokens=10)]
    write(tpath("S5"), main)
    post_tool("S5", hooks_home)
    gone = tpath("S5").parent / "S5" / "subagents" / "agent-never-written.jsonl"
    proc = run_hook(payload("SubagentStop", "S5", hooks_home, agent_id="a2", agent_type="Explore",
                            agent_transcript_path=str(gone), last_assistant_message="done",
                            stop_hook_active=False))
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    assert session_cost(hooks_home, "S5")[0] == pytest.approx(expected_usd(main), rel=1e-9)
    assert not (hooks_home / "logs" / "errors.log").exists() or \
        "cost" not in (hooks_home / "logs" / "errors.log").read_text()


def test_a_fork_does_not_count_its_parents_lines_again(hooks_home: Path):
    parent = [assistant("m1", "r1", input_tokens=500, output_tokens=50),
              assistant("m2", "r2", input_tokens=600, output_tokens=60)]
    write(tpath("P"), parent)
    post_tool("P", hooks_home)
    own = [assistant("m3", "r3", input_tokens=700, output_tokens=70)]
    write(tpath("F"), parent + own)  # a forked session's transcript starts with its parent's lines
    post_tool("F", hooks_home)
    assert session_cost(hooks_home, "P")[0] == pytest.approx(expected_usd(parent), rel=1e-9)
    assert session_cost(hooks_home, "F")[0] == pytest.approx(expected_usd(own), rel=1e-9)


def test_a_transcript_outside_the_client_dirs_is_not_read(hooks_home: Path, tmp_path: Path):
    outside = tmp_path / "elsewhere" / "S6.jsonl"
    write(outside, [assistant("m1", "r1", input_tokens=500, output_tokens=50)])
    post_tool_payload = payload("PostToolUse", "S6", hooks_home, path=outside, tool_name="Bash",
                                tool_input={"command": "ls"}, tool_use_id="t1", tool_response={})
    assert run_hook(post_tool_payload).returncode == 0
    assert session_cost(hooks_home, "S6") == (0.0, 0)
    assert store_rows(hooks_home, "SELECT * FROM cost_offsets") == []


def test_stop_counts_the_turn(hooks_home: Path):
    lines = [assistant("m1", "r1", model="claude-opus-4-8", input_tokens=5, output_tokens=400,
                       cache_read_input_tokens=20000, speed="fast")]
    write(tpath("S7"), lines)
    proc = run_hook(payload("Stop", "S7", hooks_home, stop_hook_active=False, last_assistant_message="ok"))
    assert proc.returncode == 0, proc.stderr
    extracted = genai_prices.extract_usage({"model": "claude-opus-4-8", "usage": lines[0]["message"]["usage"]},
                                           provider_id="anthropic")
    fast = float(genai_prices.calc_price(extracted.usage, "claude-opus-4-8", provider_id="anthropic",
                                         price_context={"speed": "fast"}).total_price)
    assert session_cost(hooks_home, "S7")[0] == pytest.approx(fast, rel=1e-9)
    assert fast > expected_usd(lines)  # fast mode costs more than standard


def test_cost_command_sums_by_session_task_agent_and_day(hooks_home: Path):
    s1 = [assistant("a1", "r1", input_tokens=1000, output_tokens=200, cache_read_input_tokens=30000,
                    at="2026-11-24T12:00:00.000Z"),
          assistant("a2", "r2", model="claude-haiku-4-5", input_tokens=50, output_tokens=20,
                    at="2026-11-25T12:00:00.000Z")]
    s2 = [assistant("b1", "q1", input_tokens=4000, output_tokens=100, cache_creation_input_tokens=9000,
                    at="2026-11-25T13:00:00.000Z"),
          assistant("b2", "q2", model="mystery-model", input_tokens=5, output_tokens=5, at="2026-11-25T13:01:00.000Z")]
    write(tpath("C1"), s1)
    write(tpath("C2"), s2)
    agent_hook("task", "create", "T-9")
    post_tool("C1", hooks_home, {"AGENT_HOOKS_AGENT": "alice", "AGENT_HOOKS_TASK_ID": "T-9"})
    post_tool("C2", hooks_home, {"AGENT_HOOKS_AGENT": "bob"})

    one = json.loads(agent_hook("cost", "--session", "C1", "--json").stdout)
    assert one["usd"] == pytest.approx(expected_usd(s1), rel=1e-9)
    assert one["input_tokens"] == 1050 and one["output_tokens"] == 220 and one["cache_read_input_tokens"] == 30000
    assert set(one["by_model"]) == {"claude-sonnet-4-5", "claude-haiku-4-5"} and one["unpriced_models"] == []
    assert one["by_model"]["claude-haiku-4-5"]["usd"] == pytest.approx(expected_usd(s1[1:]), rel=1e-9)
    assert json.loads(agent_hook("cost", "--task", "T-9", "--json").stdout)["usd"] == pytest.approx(one["usd"])
    bob = json.loads(agent_hook("cost", "--agent", "bob", "--json").stdout)
    assert bob["usd"] == pytest.approx(expected_usd(s2[:1]), rel=1e-9)
    assert bob["unpriced_models"] == ["mystery-model"] and bob["by_model"]["mystery-model"]["usd"] is None
    everything = json.loads(agent_hook("cost", "--json").stdout)
    assert everything["usd"] == pytest.approx(expected_usd(s1 + s2[:1]), rel=1e-9)
    since = json.loads(agent_hook("cost", "--since", "2026-11-25", "--json").stdout)
    assert since["usd"] == pytest.approx(expected_usd(s1[1:] + s2[:1]), rel=1e-9)
    # The text table says unpriced, never $0, for the model without a price.
    text = agent_hook("cost", "--agent", "bob").stdout
    line = next(x for x in text.splitlines() if x.startswith("mystery-model"))
    assert "unpriced" in line and "$0" not in line
    assert "+ unpriced" in next(x for x in text.splitlines() if x.startswith("total"))

    days = json.loads(agent_hook("cost", "daily", "--json").stdout)
    by_day = {d["date"]: d["usd"] for d in days}
    local = {datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).astimezone().strftime("%Y-%m-%d")
             for e in s1 + s2}
    assert set(by_day) == local
    assert sum(by_day.values()) == pytest.approx(everything["usd"], rel=1e-9)
    sessions = json.loads(agent_hook("cost", "sessions", "--json").stdout)
    assert [s["session_id"] for s in sessions] == ["C1", "C2"]
    assert sessions[0]["agent"] == "alice" and sessions[0]["task_id"] == "T-9"
    assert sessions[1]["unpriced_models"] == ["mystery-model"]
    # Running totals the budget guard reads agree with the messages.
    task = store_rows(hooks_home, "SELECT spent_usd FROM tasks WHERE task_id = 'T-9'")
    daily_rows = {(r["day"], r["agent"]): r["usd"] for r in store_rows(hooks_home, "SELECT * FROM cost_daily")}
    assert sum(v for (d, a), v in daily_rows.items() if a == "") == pytest.approx(everything["usd"], rel=1e-9)
    assert sum(v for (d, a), v in daily_rows.items() if a == "bob") == pytest.approx(bob["usd"], rel=1e-9)
    assert task[0]["spent_usd"] == pytest.approx(one["usd"], rel=1e-9)


def test_cost_with_an_unknown_session_is_not_found(hooks_home: Path):
    write(tpath("C3"), [assistant("a1", "r1", input_tokens=10, output_tokens=2)])
    post_tool("C3", hooks_home)
    proc = agent_hook("cost", "--session", "nope", check=False)
    assert proc.returncode == 3 and "no session 'nope'" in proc.stderr
    assert agent_hook("cost", "--since", "last week", check=False).returncode == 2


def test_timestamps_are_read_as_datetime_reads_them():
    """The hook path parses the client's UTC stamps by arithmetic (no datetime import): same answer."""
    from datetime import timedelta

    from agent_hooks.features.cost import _epoch

    t = datetime(1999, 12, 30, 23, 59, 58, 999000, tzinfo=UTC)
    for _ in range(3000):
        t += timedelta(days=3, hours=7, minutes=13, seconds=17, milliseconds=9)
        stamp = t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
        assert _epoch(stamp, -1.0) == pytest.approx(t.timestamp(), abs=1e-6), stamp
    assert _epoch("not a time", -1.0) == -1.0 and _epoch(None, -1.0) == -1.0


def test_forwarded_events_carry_the_running_cost(hooks_home: Path):
    lines = [assistant("m1", "r1", input_tokens=1000, output_tokens=500)]
    write(tpath("F1"), lines)
    env = {"AGENT_HOOKS__FORWARD__ENABLED": "true", "AGENT_HOOKS__FORWARD__AUTOSTART": "false",
           "AGENT_HOOKS__FORWARD__URL": "http://127.0.0.1:9/api/hooks/ingest", "AGENT_HOOKS_TMUX_SESSION": "agent-f1"}
    post_tool("F1", hooks_home, env)
    bodies = [json.loads(r["body"]) for r in store_rows(hooks_home, "SELECT body FROM outbox ORDER BY rowid")]
    assert bodies and bodies[-1]["event"] == "tool_use"
    assert bodies[-1]["cost_usd"] == pytest.approx(expected_usd(lines), rel=1e-5)


def test_the_command_center_keeps_each_cards_running_cost(tmp_path: Path):
    import sqlite3 as sq

    from agent_hooks.center import contract, fleetdb
    from agent_hooks.store import Store

    conn = Store(str(tmp_path / "cc.db")).conn

    def ingest(doc: dict[str, Any]) -> fleetdb.Result:
        conn.execute("BEGIN IMMEDIATE")
        out = fleetdb.ingest(conn, contract.parse_ingest(json.dumps(doc).encode()), "host-b", 100.0)
        conn.execute("COMMIT")
        return out

    sid = ingest({"tmux_session": "agent-w", "event": "start"}).body["session"]
    ingest({"tmux_session": "agent-w", "event": "tool_use", "cost_usd": 1.25})
    ingest({"tmux_session": "agent-w", "event": "tool_use", "cost_usd": 0.5})  # late delivery: never lowers it
    assert fleetdb.get(conn, sid)["cost_usd"] == 1.25
    for bad in (-1, "1.0", float("nan"), True):
        with pytest.raises(contract.BodyError, match="cost_usd"):
            contract.parse_ingest(json.dumps({"tmux_session": "agent-w", "event": "tool_use", "cost_usd": bad}).encode())
    assert isinstance(conn, sq.Connection)


def test_a_subagents_line_written_after_its_stop_is_counted_at_the_parents_stop(hooks_home: Path):
    main = [assistant("m1", "r1", input_tokens=100, output_tokens=10)]
    sub = [assistant("s1", "rs1", input_tokens=3000, output_tokens=700)]
    late = [assistant("s2", "rs2", input_tokens=10, output_tokens=900)]
    write(tpath("S9"), main)
    sub_path = tpath("S9").parent / "S9" / "subagents" / "agent-a9.jsonl"
    write(sub_path, sub)
    assert run_hook(payload("SubagentStop", "S9", hooks_home, agent_id="a9", agent_transcript_path=str(sub_path),
                            last_assistant_message="done", stop_hook_active=False)).returncode == 0
    write(sub_path, late, mode="a")  # the client wrote the subagent's last answer after its SubagentStop
    assert run_hook(payload("Stop", "S9", hooks_home, stop_hook_active=False,
                            last_assistant_message="ok")).returncode == 0
    assert session_cost(hooks_home, "S9")[0] == pytest.approx(expected_usd(main + sub + late), rel=1e-9)
