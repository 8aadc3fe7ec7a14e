"""Pure pieces: payload validation, output shapes, canonical hashing, configuration."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from agent_hooks import config, hashing, output, payload
from agent_hooks.paths import ensure_dir


def test_canonical_hash_sorts_keys_at_every_depth_and_keeps_array_order() -> None:
    a = {"b": 1, "a": {"y": [1, 2], "x": {"q": 1, "p": 2}}}
    b = {"a": {"x": {"p": 2, "q": 1}, "y": [1, 2]}, "b": 1}
    assert hashing.digest(a) == hashing.digest(b)
    assert hashing.digest({"a": [1, 2]}) != hashing.digest({"a": [2, 1]})
    assert hashing.digest({"q": {"deep": 1}}) != hashing.digest({"q": {"deep": 2}})
    assert len(hashing.digest({})) == 64


def test_payload_validation_errors_are_one_line() -> None:
    with pytest.raises(payload.PayloadError, match="field 'duration_ms' must be a number"):
        payload.validate({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Bash",
                          "tool_input": {}, "duration_ms": True}, "PostToolUse")
    with pytest.raises(payload.PayloadError, match="empty session_id"):
        payload.validate({"hook_event_name": "Stop", "session_id": "  "}, "Stop")
    p = payload.validate({"hook_event_name": "Stop", "session_id": "s", "x-new": 1}, "Stop")
    assert p.raw["x-new"] == 1 and p.cwd == "" and p.get("last_assistant_message", "-") == "-"


def test_render_shapes_follow_the_protocol() -> None:
    out = output.Outcome()
    assert output.render("PreToolUse", out) is None
    out.deny("stop")
    out.add_context("note")
    doc = json.loads(output.render("PreToolUse", out))
    assert doc == {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                          "permissionDecisionReason": "stop", "additionalContext": "note"}}
    out = output.Outcome()
    out.block("cancelled")
    assert json.loads(output.render("UserPromptSubmit", out)) == {"decision": "block", "reason": "cancelled"}
    out = output.Outcome()
    out.add_context("hello")
    assert json.loads(output.render("SessionStart", out))["hookSpecificOutput"]["additionalContext"] == "hello"
    # Events that take no context say nothing rather than something Claude Code rejects.
    assert output.render("SessionEnd", out) is None
    assert output.render("Stop", out) is None
    out = output.Outcome()
    out.say("remember the goal")
    assert output.render("PreCompact", out) == "remember the goal"


def test_context_is_clipped_under_claude_codes_cap() -> None:
    out = output.Outcome()
    out.add_context("x" * 50_000)
    doc = json.loads(output.render("SessionStart", out))
    assert len(doc["hookSpecificOutput"]["additionalContext"]) <= 10_000


def test_env_layer_coerces_and_rejects() -> None:
    assert config.env_layer({"AGENT_HOOKS_DEADLINE_MS": "900"}) == {"runtime": {"deadline_ms": 900}}
    with pytest.raises(config.ConfigError, match="AGENT_HOOKS_DEADLINE_MS"):
        config.env_layer({"AGENT_HOOKS_DEADLINE_MS": "soon"})
    with pytest.raises(config.ConfigError, match="SECTION__KEY"):
        config.env_layer({"AGENT_HOOKS__RUNTIME": "1"})


def test_validate_flags_types_and_unknowns() -> None:
    cfg = config.defaults()
    assert config.validate(cfg) == []
    cfg["runtime"]["deadline_ms"] = "x"
    cfg["nope"] = {}
    problems = config.validate(cfg)
    assert any("deadline_ms" in p for p in problems) and any("[nope]" in p for p in problems)


def test_defaults_copy_is_independent() -> None:
    a = config.defaults()
    a["runtime"]["deadline_ms"] = 1
    assert config.DEFAULTS["runtime"]["deadline_ms"] != 1


def test_rendered_answer_survives_a_lone_surrogate() -> None:
    out = output.Outcome()
    out.add_context("prompt said \ud800 and é")
    text = output.render("UserPromptSubmit", out)
    text.encode("utf-8")  # what emit does; must not raise
    assert json.loads(text)["hookSpecificOutput"]["additionalContext"] == "prompt said \ud800 and é"


def test_repair_restores_defaults_and_drops_malformed_rules() -> None:
    cfg = config.defaults()
    cfg["runtime"]["deadline_ms"] = "soon"
    cfg["identity"] = 5
    cfg["polling"]["extra_rules"] = [{"name": "ok", "command": "watch"}, {"name": "bad", "max_calls": "x"}]
    problems = config.repair(cfg)
    assert cfg["runtime"]["deadline_ms"] == config.DEFAULTS["runtime"]["deadline_ms"]
    assert cfg["identity"] == config.DEFAULTS["identity"]
    assert [r["name"] for r in cfg["polling"]["extra_rules"]] == ["ok"]
    assert len(problems) == 3
    assert config.repair(config.defaults()) == []


def test_every_directory_we_create_is_private(tmp_path: Path) -> None:
    """ensure_dir makes each missing parent 0700 too, whatever the umask (os.makedirs gave parents 0755)."""
    old = os.umask(0o022)
    try:
        ensure_dir(str(tmp_path / "state" / "agent-hooks" / "logs"))
        ensure_dir(str(tmp_path / "state" / "agent-hooks" / "logs"))  # existing: no error
    finally:
        os.umask(old)
    for d in (tmp_path / "state", tmp_path / "state" / "agent-hooks", tmp_path / "state" / "agent-hooks" / "logs"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        ensure_dir(str(tmp_path / "file"))
