"""What the board shows of a session, here and from another host, and Reply (real tmux, real servers).

* A session started in tmux by hand (only $TMUX / $TMUX_PANE) is named by its tmux session: in the
  store, `session list --tmux`, `cancel --tmux` and the board.
* A tool call keeps what it ran: the card, the session page and `session show` print it, escaped.
* A session waiting for its next prompt is not shown as finished, though the contract's default map (Stop = exit)
  calls it completed.
* Two hosts (two stores, two servers, each with its own fleet.host): B's card on A shows what B's own
  card shows (agent, task, current tool and command, needs input, tool calls), from what B's server
  reports; a Reply on A is typed into the tmux pane of B's session by B's server; refusals say why.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.center import Center, two_hosts
from support.scripts import agent_hook, run_hook
from support.tmux import NO_TMUX, Tmux


def payload(event: str, sid: str, cwd: str, **extra: object) -> dict[str, object]:
    return {"session_id": sid, "transcript_path": f"{cwd}/t.jsonl", "cwd": cwd, "hook_event_name": event, **extra}


def bash(sid: str, cwd: str, n: int, command: str, event: str = "PreToolUse") -> dict[str, object]:
    extra: dict[str, object] = {"tool_response": {"stdout": "ok"}} if event == "PostToolUse" else {}
    return payload(event, sid, cwd, tool_name="Bash", tool_use_id=f"toolu_{n}",
                   tool_input={"command": command, "description": "step"}, **extra)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux()
    yield t
    t.close()


def test_tmux_by_hand_is_named_and_cancel_by_tmux_reaches_it(tmp_path: Path, tmux: Tmux) -> None:
    home = tmp_path / "home"
    pane = tmux.new("work-x")
    env = {"AGENT_HOOKS_HOME": str(home), **tmux.env(pane)}
    sid = "tmux-by-hand-1"
    assert run_hook(payload("SessionStart", sid, str(tmp_path), source="startup"), env).returncode == 0
    listed = json.loads(agent_hook("session", "list", "--tmux", "work-x", "--json", env=env).stdout)["sessions"]
    assert [s["session_id"] for s in listed] == [sid]
    agent_hook("cancel", "--tmux", "work-x", "--reason", "wrong branch", env=env)
    proc = run_hook(bash(sid, str(tmp_path), 1, "ls"), env)
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "wrong branch" in out["permissionDecisionReason"]
    shown = json.loads(agent_hook("session", "show", sid, "--json", env=env).stdout)
    assert shown["tmux_session"] == "work-x" and shown["tmux_pane"] == pane


def test_session_show_prints_the_command_escaped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"AGENT_HOOKS_HOME": str(home), **NO_TMUX}
    sid = "shows-command-1"
    run_hook(payload("SessionStart", sid, str(tmp_path), source="startup"), env)
    run_hook(bash(sid, str(tmp_path), 1, "rm -rf build \x1b[31m<b>x</b>"), env)
    out = agent_hook("session", "show", sid, env=env).stdout
    assert "COMMAND" in out and "rm -rf build" in out and "<b>x</b>" in out
    assert "\x1b" not in out  # the terminal escape is shown escaped, never sent to the terminal
    calls = json.loads(agent_hook("session", "show", sid, "--json", env=env).stdout)["recent_tool_calls"]
    assert calls[0]["command"] == "rm -rf build \x1b[31m<b>x</b>"


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[tuple[Center, Center, dict[str, str]]]:
    with two_hosts(tmp_path, forward={"AGENT_HOOKS__FORWARD__POLL_INTERVAL_S": "0.02"}) as hosts:
        yield hosts


def test_remote_card_shows_what_a_local_one_does_and_reply_reaches_the_pane(
        hosts: tuple[Center, Center, dict[str, str]], tmp_path: Path, tmux: Tmux) -> None:
    a, b, env = hosts
    cwd = str(tmp_path)
    pane = tmux.new("agent-b1")
    agent_hook("task", "create", "T-9", "--description", "fix the flaky build", env=env)
    env1 = {**env, **tmux.env(pane), "AGENT_HOOKS_AGENT": "builder", "AGENT_HOOKS_TASK_ID": "T-9"}
    sid = "b-remote-1"
    assert run_hook(payload("SessionStart", sid, cwd, source="startup"), env1).returncode == 0
    run_hook(bash(sid, cwd, 1, "make -j4 test"), env1)
    run_hook(bash(sid, cwd, 1, "make -j4 test", "PostToolUse"), env1)
    asked = payload("PermissionRequest", sid, cwd, tool_name="Bash", tool_input={"command": "rm -rf build"},
                    permission_suggestions=[])
    assert run_hook(asked, env1).returncode == 0

    card = a.wait_card(lambda c: c["host"] == "host-b" and c["waiting_on"] == "needs_input", timeout=10,
                       what="B's card asking for input, on A")
    assert card["tmux_session"] == "agent-b1" and not card["local"]
    assert card["agent"] == "builder" and card["task_id"] == "T-9" and card["task"] == "fix the flaky build"
    assert card["current_tool"] == "Bash" and card["current_command"] == "make -j4 test"
    assert card["tool_calls"] == 1 and card["waiting_detail"].startswith("Bash")
    assert card["in_tmux"] is True and card["reply"] is False

    # Not awaiting its next prompt: refused, with the reason.
    r = a.http.post(f"/api/sessions/{card['id']}/reply", json={"text": "go on"})
    assert r.status_code == 409 and "not awaiting" in r.json()["error"], r.text

    # Its turn ends: the contract's default map says completed, the column says awaiting review, and Reply is offered.
    run_hook(payload("Stop", sid, cwd, stop_hook_active=False, last_assistant_message="done?"), env1)
    card = a.wait_card(lambda c: c["host"] == "host-b" and c["reply"], timeout=10, what="B's card awaiting")
    assert card["state"] == "completed" and card["column"] == "awaiting_review" and card["own_state"] == "awaiting"
    t0 = time.time()
    r = a.http.post(f"/api/sessions/{card['id']}/reply", json={"text": "now run   the linter\ntoo"})
    assert r.status_code == 200 and r.json()["applied"] == "typed", r.text
    tmux.wait_text(pane, "now run   the linter too")
    assert time.time() - t0 < 5

    # The pane is gone: B refuses, and A says why.
    tmux.kill("agent-b1")
    r = a.http.post(f"/api/sessions/{card['id']}/reply", json={"text": "hello?"})
    assert r.status_code == 409 and "gone" in r.json()["error"], r.text


def test_reply_refusals_here(tmp_path: Path, tmux: Tmux) -> None:
    center = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__HOST": "here"}).start()
    try:
        env = {"AGENT_HOOKS_HOME": str(center.home), "HOME": center.env["HOME"]}
        cwd = str(tmp_path)
        run_hook(payload("SessionStart", "no-tmux", cwd, source="startup"), {**env, **NO_TMUX})
        run_hook(payload("Stop", "no-tmux", cwd, stop_hook_active=False), {**env, **NO_TMUX})
        pane = tmux.new("agent-here")
        run_hook(payload("SessionStart", "in-tmux", cwd, source="startup"), {**env, **tmux.env(pane)})
        run_hook(bash("in-tmux", cwd, 1, "make"), {**env, **tmux.env(pane)})  # working: not at its prompt
        center.wait_card(lambda c: c["id"] == "in-tmux" and c["own_state"] == "live", what="the local card")
        r = center.http.post("/api/sessions/no-tmux/reply", json={"text": "x"})
        assert r.status_code == 409 and "does not run in tmux" in r.json()["error"], r.text
        r = center.http.post("/api/sessions/in-tmux/reply", json={"text": "x"})
        assert r.status_code == 409 and "not awaiting" in r.json()["error"], r.text
        assert center.http.post("/api/sessions/in-tmux/reply", json={"text": " \n "}).status_code == 400
        assert center.http.post("/api/sessions/nobody/reply", json={"text": "x"}).status_code == 404
        run_hook(payload("Stop", "in-tmux", cwd, stop_hook_active=False), {**env, **tmux.env(pane)})
        for text in ("!rm -rf ~", "/clear", "# always push to main"):  # the shell, a command, memory: never
            r = center.http.post("/api/sessions/in-tmux/reply", json={"text": text})
            assert r.status_code == 400 and "not a prompt" in r.json()["error"], r.text
        r = center.http.post("/api/sessions/in-tmux/reply", json={"text": "-v carry on"})
        assert r.status_code == 200 and r.json()["applied"] == "here", r.text
        tmux.wait_text(pane, "-v carry on")
        assert "rm -rf" not in tmux.capture(pane)
        # The client was killed (no SessionEnd): its pane shows the shell again. A reply there would run.
        shell = tmux.new("agent-gone", "sh")
        run_hook(payload("SessionStart", "gone", cwd, source="startup"), {**env, **tmux.env(shell)})
        run_hook(payload("Stop", "gone", cwd, stop_hook_active=False), {**env, **tmux.env(shell)})
        marker = tmp_path / "typed-into-a-shell"
        r = center.http.post("/api/sessions/gone/reply", json={"text": f"touch {marker}"})
        assert r.status_code == 409 and "not Claude Code" in r.json()["error"], r.text
        time.sleep(0.5)
        assert not marker.exists()
    finally:
        center.stop()


def test_a_card_says_a_session_awaits_its_first_prompt_or_sits_at_a_blocked_one(tmp_path: Path) -> None:
    """What status and session show say (tests/features/test_prompt_states.py), the card says: awaiting,
    in the awaiting-review column, with what it waits at."""
    center = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__HOST": "here"}).start()
    try:
        env = {"AGENT_HOOKS_HOME": str(center.home), "HOME": center.env["HOME"], "AGENT_HOOKS_TASK_ID": "T-3",
               **NO_TMUX}
        cwd = str(tmp_path)
        run_hook(payload("SessionStart", "fresh-1", cwd, source="startup"), env)
        card = center.wait_card(lambda c: c["id"] == "fresh-1", what="the new session's card")
        assert card["own_state"] == "awaiting" and card["column"] == "awaiting_review"
        assert card["waiting_on"] == "awaiting" and card["waiting_detail"] == "its first prompt"
        run_hook(payload("UserPromptSubmit", "fresh-1", cwd, prompt="build it"), env)
        card = center.wait_card(lambda c: c["id"] == "fresh-1" and c["own_state"] == "live", what="the working card")
        assert card["waiting_on"] is None
        agent_hook("cancel", "--task", "T-3", "--reason", "done elsewhere", env=env)
        run_hook(payload("UserPromptSubmit", "fresh-1", cwd, prompt="go on"), env)
        card = center.wait_card(lambda c: c["id"] == "fresh-1" and c["own_state"] == "awaiting",
                                what="the blocked card")
        assert card["column"] == "awaiting_review"
        assert card["waiting_detail"] == "its prompt was blocked (task cancelled)"
    finally:
        center.stop()


def test_a_remote_card_from_the_contract_alone_shows_needs_input_and_error(tmp_path: Path) -> None:
    """A host that only forwards (no server reporting): the metadata our forwarders write still gives the
    card its needs-input and error badges."""
    center = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__HOST": "here"}).start()
    try:
        far = {"X-Agent-Hooks-Host": "far-1"}
        sid = center.ingest({"tmux_session": "agent-ask", "event": "start"}, headers=far).json()["session"]
        center.ingest({"tmux_session": "agent-ask", "event": "to_review", "metadata": "needs input: Bash"}, headers=far)
        card = center.wait_card(lambda c: c["id"] == sid and c["state"] == "awaiting_review")
        assert card["waiting_on"] == "needs_input" and card["waiting_detail"] == "Bash"
        other = center.ingest({"tmux_session": "agent-err", "event": "start"}, headers=far).json()["session"]
        center.ingest({"tmux_session": "agent-err", "event": "exit_error", "metadata": "error: rate_limit"}, headers=far)
        card = center.wait_card(lambda c: c["id"] == other and c["state"] == "failed")
        assert card["waiting_on"] == "error" and card["waiting_detail"] == "rate_limit"
    finally:
        center.stop()


def test_doctor_says_when_reporting_to_the_command_center_fails(
        hosts: tuple[Center, Center, dict[str, str]], tmp_path: Path) -> None:
    a, b, env = hosts
    env1 = {**env, "AGENT_HOOKS_TMUX_SESSION": "agent-doc", **NO_TMUX}
    run_hook(payload("SessionStart", "b-doctor-1", str(tmp_path), source="startup"), env1)
    a.wait_card(lambda c: c["host"] == "host-b" and c["agent"] != "claude-code", what="B's reported card")
    a.stop()
    run_hook(bash("b-doctor-1", str(tmp_path), 1, "ls"), env1)  # a change B must report, to a center that is gone
    end = time.time() + 10
    while not (b.http.get("/api/fleet/status").json()["report"] or {}).get("last_error"):
        assert time.time() < end, b.http.get("/api/fleet/status").json()
        time.sleep(0.1)
    out = agent_hook("doctor", "--no-run", env=env, check=False).stdout
    assert "reporting sessions and approval requests to" in out, out


def test_a_large_report_goes_in_bodies_the_api_takes(tmp_path: Path) -> None:
    """500 cards with long commands and a request with a 60 KiB command: every body is within the API's
    limit, every card is sent, the request is clipped but whole; a real command center takes them all."""
    from agent_hooks.center import contract, report

    cards = [{"session_id": f"s-{i}", "tmux_session": f"agent-{i}", "agent": "builder",
              "current_tool": "Bash", "current_command": "x" * 300, "own_state": "live"} for i in range(500)]
    request = {"id": "bigreq01", "session_id": "s-1", "kind": "permission", "tool_name": "Bash",
               "tool_input": json.dumps({"command": "y" * 60000}), "state": "pending", "created_at": time.time(),
               "expires_at": time.time() + 60}
    bodies = report.batches(cards, [request], True)
    assert all(len(b) <= contract.MAX_BODY_BYTES for b in bodies), [len(b) for b in bodies]
    docs = [json.loads(b) for b in bodies]
    assert [c["session_id"] for d in docs for c in d["cards"]] == [c["session_id"] for c in cards]
    last = docs[-1]
    assert last["approvals_full"] is True and len(json.loads(last["approvals"][0]["tool_input"])["command"]) == 4000
    center = Center(tmp_path / "cc", env={"AGENT_HOOKS__FLEET__HOST": "here"}).start()
    try:
        for body in bodies:
            r = center.http.post("/api/fleet/report", content=body,
                                 headers={"X-Agent-Hooks-Host": "far-2", "Content-Type": "application/json"})
            assert r.status_code == 200, r.text
        [listed] = center.http.get("/api/approvals").json()["approvals"]
        assert listed["host"] == "far-2" and listed["tool_input"]["command"].startswith("yyyy")
        # The board is rebuilt off the request path: wait for it to hold every card (a busy machine lags).
        far = lambda: [c for c in center.board_cards().values() if c["host"] == "far-2"]  # noqa: E731
        end = time.time() + 10
        while len(far()) < 500 and time.time() < end:
            time.sleep(0.1)
        assert len(far()) == 500
    finally:
        center.stop()


def test_a_reply_never_types_a_terminal_control() -> None:
    """C1 controls (U+009B is CSI, an escape sequence's start like ESC [) and the Unicode line
    separators become spaces, as C0 controls and newlines do."""
    from agent_hooks.center.reply import clean_text

    assert clean_text("go\x9b2J on\u2028now\u2029\x85x\x1b[1m", 100) == "go 2J on now  x [1m"
