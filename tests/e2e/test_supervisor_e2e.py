"""The supervised server and strict guards under the real client: a worker killed mid-session is
replaced and the next tool call is still checked; kept-alive connections closed between calls cost
nothing; with guards.fail_closed a tool is blocked, not run, while the server is down, a persisting
worker is still held and a prompt is blocked."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import claude_client
import pytest
from harness import BIN_DIR, E2E, install_settings
from model_server import text, tool_use

from agent_hooks.claude_code import NEWEST_TESTED

pytestmark = pytest.mark.parametrize("transport", ["http"], indirect=True)

NO_FORWARD = {"AGENT_HOOKS__FORWARD__ENABLED": "false"}


def agent_hook(e2e: E2E, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN_DIR / "agent-hook"), *args], env=e2e.env(NO_FORWARD), capture_output=True,
                          text=True, timeout=60)


def status(e2e: E2E) -> dict[str, Any]:
    return json.loads(agent_hook(e2e, "server", "status", "--json").stdout)


def kill(key: str) -> str:
    """A shell command that SIGKILLs the pid server.json names under ``key`` ("pid": the whole server)."""
    return ("kill -9 $(python3 -c \"import json,os; print(json.load(open(os.environ['AGENT_HOOKS_HOME']"
            f" + '/server.json'))['{key}'])\")")


def bash(command: str, id: str) -> dict[str, Any]:
    return tool_use("Bash", {"command": command, "description": id}, id=id)


def outcomes(e2e: E2E) -> dict[str, str]:
    return {r["tool_use_id"]: r["outcome"] for r in e2e.query("SELECT tool_use_id, outcome FROM tool_calls")}


def strict(e2e: E2E) -> None:
    """guards.fail_closed in the configuration file, and the wiring installed again under it."""
    (e2e.agent_home / "config.toml").write_text("[guards]\nfail_closed = true\n")
    e2e.settings = install_settings(e2e.settings_path, e2e.env(), transport="http")
    [pre] = [h for g in e2e.settings["hooks"]["PreToolUse"] for h in g["hooks"] if h.get("type") == "http"]
    assert pre["onFailure"] == "block", pre


def tool_results(e2e: E2E) -> dict[str, dict[str, Any]]:
    """tool_use_id -> the tool_result block the client sent the model for it."""
    return {r["tool_use_id"]: r for r in e2e.server.tool_results()}


def test_a_worker_killed_mid_session_is_replaced_and_the_next_tool_is_checked(e2e: E2E) -> None:
    e2e.server.set_script([
        [bash("echo one > one.txt", "toolu_one")],
        [bash(kill("worker_pid"), "toolu_kill")],
        [bash("echo three > three.txt", "toolu_three")],
        [text("Carried on.")],
    ])
    run = e2e.run("Run three commands.", env_extra=NO_FORWARD)
    assert run.ok and run.result["result"] == "Carried on.", e2e.describe()
    assert (e2e.workspace / "three.txt").read_text() == "three\n"
    # The calls after the kill went through the guards and were recorded. The kill's own PostToolUse
    # follows it at once, and the client may send it on the connection it kept to the dead worker:
    # then it is cut off like a call in flight (the row stays pending; docs/server.md says so).
    got = outcomes(e2e)
    assert got.get("toolu_one") == "success" and got.get("toolu_three") == "success", got
    assert got.get("toolu_kill") in ("success", "pending"), got
    st = status(e2e)
    assert st["up"] and st["restarts"] == 1 and st["last_restarts"][0]["cause"] == "killed by SIGKILL", st


def test_kept_alive_connections_closed_between_tool_calls_cost_nothing(e2e: E2E) -> None:
    # A pause longer than serve.request_timeout_s between two tool calls: whatever connection the
    # client kept is closed by the server meanwhile, and the next hook call must still be answered.
    (e2e.agent_home / "config.toml").write_text("[serve]\nrequest_timeout_s = 1\n")
    e2e.server.set_script([
        [bash("echo one > one.txt", "toolu_one")],
        [bash("sleep 3", "toolu_pause")],
        [bash("echo three > three.txt", "toolu_three")],
        [text("Done.")],
    ])
    run = e2e.run("Run three commands.", env_extra=NO_FORWARD)
    assert run.ok, e2e.describe()
    got = outcomes(e2e)
    assert {k: got.get(k) for k in ("toolu_one", "toolu_pause", "toolu_three")} == {
        "toolu_one": "success", "toolu_pause": "success", "toolu_three": "success"}, got
    st = status(e2e)
    # The prompt, Pre and Post of each call, Stop, SessionEnd: none lost to a closed connection.
    assert st["requests"].get("answered") == 9, st
    assert st["requests"].get("connections_timed_out", 0) >= 1, st  # the client's idle connection was closed
    assert [e for e in e2e.errors() if e["kind"] != "unknown_event"] == []


def test_strict_guards_block_the_tool_while_the_server_is_down(e2e: E2E, tmp_path: Path) -> None:
    client = claude_client.ensure_client(NEWEST_TESTED)  # honours onFailure (reference, Part A2)
    world = E2E(client, e2e.server, tmp_path / "strict", "http")
    try:
        strict(world)
        world.server.set_script([
            [bash("echo one > one.txt", "toolu_one")],
            [bash(kill("pid"), "toolu_down")],  # the supervisor: the whole server goes
            [bash("echo three > three.txt", "toolu_three")],
            [text("Stopped.")],
        ])
        run = world.run("Run three commands.", env_extra=NO_FORWARD)
        assert run.ok, world.describe()
        assert (world.workspace / "one.txt").exists()
        assert not (world.workspace / "three.txt").exists(), "a tool ran unguarded while the server was down"
        result = tool_results(world)["toolu_three"]
        assert result.get("is_error") is True, result
        assert not status(world)["up"]
    finally:
        world.close()


@pytest.mark.parametrize("fail_closed", [True, False], ids=["strict", "default"])
def test_while_the_server_is_down_strict_guards_hold_a_persisting_worker_and_block_prompts(
        e2e: E2E, tmp_path: Path, fail_closed: bool) -> None:
    """The whole server dies mid-session. Under strict guards Stop is a command hook (Claude Code ignores
    onFailure on Stop), so it still holds a persisting worker, and the UserPromptSubmit entry's onFailure
    "block" stops a cancelled task's next prompt. By default both go unchecked (docs/server.md)."""
    client = claude_client.ensure_client(NEWEST_TESTED)  # honours onFailure (reference, Part A2)
    world = E2E(client, e2e.server, tmp_path / "down", "http")
    try:
        # No autostart: the resumed session's SessionStart would bring the server back before its prompt.
        (world.agent_home / "config.toml").write_text(f"[guards]\nfail_closed = {str(fail_closed).lower()}\n"
                                                      "[serve]\nautostart = false\n")
        world.settings = install_settings(world.settings_path, world.env(), transport="http")
        hooks = world.settings["hooks"]
        [stop] = [h for g in hooks["Stop"] for h in g["hooks"]]
        [prompt] = [h for g in hooks["UserPromptSubmit"] for h in g["hooks"]]
        assert stop["type"] == ("command" if fail_closed else "http"), stop
        assert prompt["type"] == "http" and (prompt.get("onFailure") == "block") == fail_closed, prompt
        assert agent_hook(world, "server", "start").returncode == 0
        assert agent_hook(world, "task", "create", "T-1", "--description", "Write the notes", "--persist",
                         "--max-continuations", "1").returncode == 0
        worker = {"AGENT_HOOKS_TASK_ID": "T-1", **NO_FORWARD}
        world.server.set_script([[bash(kill("pid"), "toolu_down")],  # the supervisor: the whole server goes
                                 [text("I think I am done.")], [text("Done now.")]])
        run = world.run("Write the notes.", env_extra=worker)
        assert run.ok, world.describe()
        assert not status(world)["up"]
        held = world.server.requests_containing("agent-hook task done T-1", kind="main")
        if fail_closed:  # held once by the command Stop, then let go (stop_hook_active)
            assert len(world.server.messages("main")) == 3 and held, world.describe()
            assert json.loads(agent_hook(world, "task", "show", "T-1", "--json").stdout)["continuations"] == 1
        else:  # the http Stop was refused: the worker went, unheld
            assert len(world.server.messages("main")) == 2 and not held, world.describe()

        assert agent_hook(world, "cancel", "--task", "T-1", "--reason", "lead moved it").returncode == 0
        world.server.set_script([[text("Took the new work.")]])
        again = world.run("Start on the next thing.", resume=run.session_id, env_extra=worker)
        assert again.returncode == 0 and not status(world)["up"], world.describe()
        took = world.server.requests_containing("Start on the next thing.", kind="main")
        if fail_closed:  # the prompt never reached the model: onFailure "block" on the prompt's entry
            assert not took and "blocked" in again.result["result"], world.describe()
        else:
            assert took and again.result["result"] == "Took the new work.", world.describe()
    finally:
        world.close()


def test_the_pinned_client_takes_the_strict_entry_and_ignores_on_failure(e2e: E2E, tmp_path: Path) -> None:
    """The pinned client (2.1.197) predates onFailure: the strict entry must not break its hooks;
    with the server down it lets the tool run (docs/server.md says strict http guards need a newer client)."""
    pinned = claude_client.ensure_client(claude_client.DEFAULT_VERSION)
    world = E2E(pinned, e2e.server, tmp_path / "pinned", "http")
    try:
        strict(world)
        world.server.set_script([
            [bash("echo one > one.txt", "toolu_one")],
            [bash(kill("pid"), "toolu_down")],
            [bash("echo three > three.txt", "toolu_three")],
            [text("Done.")],
        ])
        run = world.run("Run three commands.", env_extra=NO_FORWARD)
        assert run.ok, world.describe()
        assert outcomes(world).get("toolu_one") == "success"  # the strict entry's hooks ran
        assert (world.workspace / "three.txt").exists()
    finally:
        world.close()
