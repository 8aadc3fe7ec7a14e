"""The guards through the installed console scripts, on the real client's payloads."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

from support.guards import cli, context_of, denial_of, fixture, hook, post, pre

# About what hooks do with a store, not about creating one: each test starts from a migrated
# store (conftest.migrated_store), as every hook after a host's first finds it.
pytestmark = pytest.mark.usefixtures("migrated_store")

SID = "4e1b1715-2e19-4bfd-953a-1656f3b17796"
APPEND = {"command": "echo tick >> ticks.txt", "description": "tick"}


def low_thresholds(monkeypatch: pytest.MonkeyPatch, **settings: int) -> None:
    """Guard thresholds for a test about the behaviour at a threshold, not its default value:
    lower ones reach it with fewer hook processes (the hooks inherit this environment)."""
    for key, value in settings.items():
        section, name = key.split("__")
        monkeypatch.setenv(f"AGENT_HOOKS__{section.upper()}__{name.upper()}", str(value))


def status_session(session_id: str) -> dict:
    data = json.loads(cli("status", "--json").stdout)
    return next(s for s in data["sessions"] if s["session_id"] == session_id)


def test_repeat_warns_then_denies_and_denied_calls_are_recorded_but_not_counted(monkeypatch):
    # Warn at 3, deny at 5 (defaults 8 and 15): the same sequence in 7 hook runs instead of 17.
    low_thresholds(monkeypatch, loops__repeat_warn=3, loops__repeat_block=5)
    outs = [pre(SID, f"toolu_{n}", APPEND) for n in range(1, 8)]
    assert outs[:2] == [None] * 2
    for n, out in enumerate(outs[2:4], start=3):
        assert f"{n} identical Bash calls" in context_of(out) and denial_of(out) is None
    for out in outs[4:]:
        assert "Loop guard: blocked" in denial_of(out)
    session = json.loads(cli("session", "show", SID, "--json", "--limit", "100").stdout)
    calls = session["recent_tool_calls"]
    assert [c["decision"] for c in calls] == ["allow"] * 2 + ["warn"] * 2 + ["deny"] * 3
    assert {c["outcome"] for c in calls[4:]} == {"denied"} and calls[4]["rule"] == "loops.repeat"
    s = status_session(SID)
    assert (s["warned"], s["denied"], s["last_decision"]) == (2, 3, "deny")
    assert s["last_guard"]["rule"] == "loops.repeat" and s["cancelled"] is False
    assert "w2 d3" in next(line for line in cli("status").stdout.splitlines() if line.startswith(SID))
    # Denials are not history: the 5th allowed-or-warned call is still the one that blocks.
    assert status_session(SID)["tool_calls"] == 7


def test_new_session_starts_empty_resumed_session_keeps_history_reset_clears_it(monkeypatch):
    # Deny at the 3rd identical call (default 15): 2 calls of history instead of 14.
    low_thresholds(monkeypatch, loops__repeat_warn=2, loops__repeat_block=3)
    for n in range(2):
        pre(SID, f"toolu_{n}", APPEND)
    resume = dict(fixture("SessionStart-resume"), session_id=SID)
    hook("session-start", resume)
    assert "Loop guard: blocked" in denial_of(pre(SID, "toolu_resumed", APPEND))
    assert pre("11111111-2222-3333-4444-555555555555", "toolu_new", APPEND) is None
    cli("session", "reset-guards", SID)
    assert pre(SID, "toolu_after_reset", APPEND) is None


def test_subagents_have_their_own_loop_history(monkeypatch):
    low_thresholds(monkeypatch, loops__repeat_warn=2, loops__repeat_block=3)  # 2 calls of history, not 14
    for n in range(2):
        pre(SID, f"toolu_{n}", APPEND)
    sub = copy.deepcopy(fixture("PreToolUse-Bash"))
    sub.update(session_id=SID, tool_use_id="toolu_sub", tool_input=APPEND, agent_id="a4d2c8f1e0b3a297",
               agent_type="general-purpose")
    assert hook("pre-tool-use", sub) is None
    assert "Loop guard: blocked" in denial_of(pre(SID, "toolu_main", APPEND))


def test_cancel_session_denies_tools_blocks_prompts_and_uncancel_lifts_it():
    assert pre(SID, "toolu_1", {"command": "ls"}) is None
    cli("cancel", SID, "--reason", "the lead took this over")
    reason = denial_of(pre(SID, "toolu_2", {"command": "ls"}))
    assert "cancelled" in reason and "the lead took this over" in reason and "Stop working" in reason
    prompt = hook("user-prompt-submit", dict(fixture("UserPromptSubmit"), session_id=SID))
    assert prompt["decision"] == "block" and "the lead took this over" in prompt["reason"]
    s = status_session(SID)
    assert s["cancelled"] is True and s["cancelled_by"] == "session" and s["cancel_reason"] == "the lead took this over"
    assert "cancelled" in next(line for line in cli("status").stdout.splitlines() if line.startswith(SID))
    cli("uncancel", SID)
    assert pre(SID, "toolu_3", {"command": "ls"}) is None
    assert hook("user-prompt-submit", dict(fixture("UserPromptSubmit"), session_id=SID)) is None


def test_cancel_task_reaches_sessions_that_join_later_through_the_environment():
    cli("task", "create", "T-42", "--description", "Port the billing job")
    cli("cancel", "--task", "T-42", "--reason", "duplicate of T-41")
    env = {"AGENT_HOOKS_TASK_ID": "T-42"}
    reason = denial_of(pre(SID, "toolu_1", {"command": "ls"}, env=env))
    assert "T-42" in reason and "duplicate of T-41" in reason and "Port the billing job" in reason
    shown = json.loads(cli("task", "show", "T-42", "--json").stdout)
    assert shown["state"] == "cancelled" and shown["sessions"][0]["session_id"] == SID
    # The one call still allowed: the agent's report on its task, through the real CLI.
    report = {"command": "agent-hook task progress T-42 'Stopped: billing job half ported.'"}
    assert pre(SID, "toolu_report", report, env=env) is None
    cli("task", "progress", "T-42", "Stopped: billing job half ported.")
    assert json.loads(cli("task", "show", "T-42", "--json").stdout)["progress"].startswith("Stopped")
    assert denial_of(pre(SID, "toolu_chained", {"command": report["command"] + "; make deploy"}, env=env))
    cli("uncancel", "--task", "T-42")
    assert pre(SID, "toolu_2", {"command": "ls"}, env=env) is None


def test_task_assign_progress_and_cancel_by_tmux():
    env = {"AGENT_HOOKS_TMUX_SESSION": "worker-3"}
    assert pre(SID, "toolu_1", {"command": "ls"}, env=env) is None
    assert cli("task", "assign", "nope", "T1", ok=False).returncode != 0
    cli("task", "assign", SID, "T1")
    cli("task", "progress", "T1", "schema done; CLI next")
    cli("task", "describe", "T1", "Build the guards")
    shown = json.loads(cli("task", "show", "T1", "--json").stdout)
    assert (shown["progress"], shown["description"], shown["state"]) == ("schema done; CLI next", "Build the guards", "open")
    assert status_session(SID)["task_id"] == "T1"
    cli("cancel", "--tmux", "worker-3", "--reason", "machine going down")
    assert "machine going down" in denial_of(pre(SID, "toolu_2", {"command": "ls"}, env=env))
    assert cli("cancel", "--tmux", "nobody", "--reason", "x", ok=False).returncode != 0
    assert cli("cancel", SID, "--task", "T1", "--reason", "x", ok=False).returncode != 0
    assert cli("cancel", "no-such-session", "--reason", "x", ok=False).returncode != 0


def test_no_progress_poll_is_denied_after_five_unchanged_results():
    poll = {"command": "sleep 1 && gh run view 77 --json status", "description": "check CI"}
    answers = []
    for n in range(1, 8):
        out = pre(SID, f"toolu_{n}", poll)
        answers.append(out)
        if denial_of(out):
            continue
        post(SID, f"toolu_{n}", poll, '{"status":"in_progress"}')
    assert answers[:3] == [None] * 3
    assert "same output the last 3 times" in context_of(answers[3])
    assert "same output the last 4 times" in context_of(answers[4])
    reason = denial_of(answers[5])
    assert "no progress" in reason and "Back off" in reason and "another approach" in reason
    assert denial_of(answers[6])  # still held back: the denial did not record a poll
    calls = json.loads(cli("session", "show", SID, "--json").stdout)["recent_tool_calls"]
    assert calls[-1]["rule"] == "polling.no_progress:ci-watch" and calls[-1]["poll_rule"] == "ci-watch"


def test_failing_poll_counts_as_no_progress_and_changing_output_does_not(monkeypatch):
    # Denied after 2 unchanged results (default 5): the default itself is the previous test's subject.
    low_thresholds(monkeypatch, polling__no_progress_warn=1, polling__no_progress_block=2)
    poll = {"command": "gh pr checks 12"}
    for n in range(2):
        assert denial_of(pre(SID, f"toolu_f{n}", poll)) is None
        post(SID, f"toolu_f{n}", poll, "Exit code 8", ok=False)  # gh pr checks exits 8 while pending
    assert "no progress" in denial_of(pre(SID, "toolu_f2", poll))
    other = "22222222-2222-2222-2222-222222222222"
    poll2 = {"command": "kubectl rollout status deploy/api"}
    for n in range(4):  # twice the block threshold of changing outputs
        assert denial_of(pre(other, f"toolu_c{n}", poll2)) is None
        post(other, f"toolu_c{n}", poll2, f"{n} of 8 updated replicas are available")


def test_rate_limit_from_toml_per_rule(tmp_path):
    home = os.environ["AGENT_HOOKS_HOME"]
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write('[polling]\nextra_rules = [{name = "status-page", command = "statuspage", max_calls = 3}]\n'
                '[loops]\nrepeat_warn = 3\nrepeat_block = 5\n'
                '[loops.tools.Bash]\nrepeat_warn = 50\nrepeat_block = 60\n')
    outs = [pre(SID, f"toolu_{n}", {"command": f"statuspage --probe {n}"}) for n in range(5)]
    assert outs[:2] == [None, None]
    assert "poll 3 of at most 3" in context_of(outs[2])
    assert "Polling guard: blocked" in denial_of(outs[3]) and denial_of(outs[4])
    # The per-tool loop override applies too: 6 identical calls, past the general repeat_block
    # of 5 set above (default 15, which took 20 calls to pass), no loop warning.
    assert all(pre(SID, f"toolu_x{n}", {"command": "true"}) is None for n in range(6))


def test_pingpong_through_the_hooks(monkeypatch):
    # Warn at 2 switches, deny at 4 (defaults 6 and 12): 5 hook runs instead of 14.
    low_thresholds(monkeypatch, loops__pingpong_warn=2, loops__pingpong_block=4)
    a, b = {"command": "make build"}, {"command": "./run --check"}
    seen = [pre(SID, f"toolu_{n}", a if n % 2 == 0 else b) for n in range(5)]
    assert seen[:2] == [None] * 2
    assert "alternated" in context_of(seen[2])
    assert "Loop guard: blocked" in denial_of(seen[4])


def test_hook_path_imports_the_standard_library_only():
    # ...and not even typing/threading/hashlib, which the runtime sheds for speed (docs/performance.md).
    code = (
        "import sys, agent_hooks.events.pre_tool_use, agent_hooks.events.user_prompt_submit\n"
        "import agent_hooks.features.cancellation, agent_hooks.features.loops, agent_hooks.features.polling\n"
        "bad = [m for m in ('click', 'httpx', 'sqlite_utils', 'filelock', 'typing', 'threading', 'hashlib')"
        " if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_schema_version_matches_migrations():
    from agent_hooks import schema, store

    assert store.SCHEMA_VERSION == len(schema.MIGRATIONS)
    assert schema.MIGRATIONS == sorted(schema.MIGRATIONS)  # applied in the order they are numbered


def test_config_defaults_validate_and_guard_mistakes_are_reported():
    from agent_hooks import config

    assert config.validate(copy.deepcopy(config.DEFAULTS)) == []
    cfg = copy.deepcopy(config.DEFAULTS)
    cfg["loops"]["tools"]["Bash"] = {"repeat_warn": 9, "repeat_block": 9, "windw": 3}
    cfg["polling"]["extra_rules"] = [{"name": "x", "command": "("}, {"name": "y"}]
    problems = "\n".join(config.validate(cfg))
    assert "loops.tools.Bash: repeat_warn (9) should be below repeat_block (9)" in problems
    assert "unknown setting loops.tools.Bash.windw" in problems
    assert "polling.extra_rules[0].command: invalid regex" in problems
    assert "polling.extra_rules[1] needs a tool or a command pattern" in problems


def test_status_json_keeps_its_documented_fields():
    pre(SID, "toolu_1", {"command": "ls"})
    s = status_session(SID)
    for key in ("session_id", "state", "tool_calls", "last_activity_at", "cwd", "tmux_session", "agent", "role",
                "task_id", "cancelled", "cancel_reason", "warned", "denied", "last_decision", "last_guard"):
        assert key in s, key
    assert (s["last_decision"], s["warned"], s["denied"], s["last_guard"]) == ("allow", 0, 0, None)


def test_a_person_prompting_a_cancelled_session_reads_who_why_and_how_to_resume():
    """UserPromptSubmit comes from a person: the block says who stopped the session, when and why,
    and the command that resumes it (which does), not the report the agent is asked for."""
    import shlex

    def blocked(env: dict | None = None) -> str:
        out = hook("user-prompt-submit", dict(fixture("UserPromptSubmit"), session_id=SID), env=env)
        assert out["decision"] == "block"
        return out["reason"]

    def resume_command(reason: str) -> list[str]:
        command = reason.split("To resume it, run: ", 1)[1].split(", then send your prompt again.")[0]
        words = shlex.split(command)
        assert words[:2] == ["agent-hook", "uncancel"], reason
        return words[2:]

    assert hook("user-prompt-submit", dict(fixture("UserPromptSubmit"), session_id=SID)) is None
    cli("cancel", SID, "--reason", "the lead took this over")
    reason = blocked()
    assert "an operator cancelled this session at " in reason and "UTC" in reason
    assert "Reason: the lead took this over." in reason and "Your prompt was not sent" in reason
    for for_the_agent in ("Reply with a short report", "end your turn", "task progress", "Stop working"):
        assert for_the_agent not in reason
    cli("uncancel", *resume_command(reason))
    assert hook("user-prompt-submit", dict(fixture("UserPromptSubmit"), session_id=SID)) is None

    cli("task", "create", "T-43", "--description", "Port the billing job")
    cli("cancel", "--task", "T-43", "--reason", "duplicate of T-41")
    env = {"AGENT_HOOKS_TASK_ID": "T-43"}
    reason = blocked(env)
    assert "an operator cancelled task T-43 (Port the billing job), which this session works on" in reason
    assert "Reason: duplicate of T-41." in reason and "task progress" not in reason
    cli("uncancel", *resume_command(reason))
    assert hook("user-prompt-submit", dict(fixture("UserPromptSubmit"), session_id=SID), env=env) is None
