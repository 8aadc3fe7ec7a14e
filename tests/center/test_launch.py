"""Starting sessions from the command center (POST /api/sessions): real servers, a real tmux server, and a
stand-in of the client that records what it was started with and calls our hooks as the client would.

A host launches only what its own [launch] configuration allows, whoever asks; the command is an argument
list, the prompt the client's argument; the environment is the server's, minus our credentials, plus the
session's identity; only a person (the owner, a paired device) may ask. The real client: tests/e2e.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.center import Center, messages, two_hosts
from support.launching import TmuxDir, fake_client, launch_env, launched, tmux_dir
from support.pairing import bearer, device_client, host_credential
from support.ports import free_port
from support.scripts import agent_hook, store_rows
from support.waiting import wait_for

TOKEN = "fleet-token-that-must-not-travel"


@pytest.fixture
def tmux() -> Iterator[TmuxDir]:
    with tmux_dir() as t:
        yield t


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "repo").mkdir(parents=True)
    return root


@pytest.fixture
def center(tmp_path: Path, tmux: TmuxDir, work: Path) -> Iterator[Center]:
    env = {"AGENT_HOOKS__FLEET__HOST": "here", "AGENT_HOOKS_FLEET_TOKEN": TOKEN,
           **launch_env(tmux, [work], fake_client(tmp_path / "bin"))}
    c = Center(tmp_path / "cc", env=env).start()
    try:
        yield c
    finally:
        c.stop()


def start(center: Center, **body: Any) -> tuple[int, dict[str, Any]]:
    r = center.http.post("/api/sessions", json=body, timeout=30)
    return r.status_code, r.json()


def test_a_launch_here_starts_the_client_in_tmux_with_its_identity_and_its_card_follows_it(
        center: Center, tmux: TmuxDir, work: Path) -> None:
    prompt = "--dangerously-skip-permissions; $(touch pwned) `id` \"quoted\" 'single'"
    status, doc = start(center, cwd=str(work / "repo"), prompt=prompt, task_id="T-7", agent="builder",
                        label="Fix the bug", permission_mode="acceptEdits")
    assert status == 201, doc
    sid = doc["id"]
    assert uuid.UUID(sid) and doc["tmux_session"] == "agent-Fix-the-bug" and doc["state"] == "started", doc
    rec = launched(work / "repo", sid)
    # An argument list: the prompt is one argument after "--", never an option nor a shell word.
    assert rec["argv"][1:] == ["--session-id", sid, "--permission-mode", "acceptEdits", "--", prompt], rec["argv"]
    assert rec["cwd"] == os.path.realpath(work / "repo")
    env = rec["env"]
    assert env["AGENT_HOOKS_TMUX_SESSION"] == "agent-Fix-the-bug" and env["AGENT_HOOKS_TASK_ID"] == "T-7"
    assert env["AGENT_HOOKS_AGENT"] == "builder" and env["TMUX_PANE"].startswith("%")
    assert "AGENT_HOOKS_FLEET_TOKEN" not in env and TOKEN not in repr(env)  # our credential stays with the server
    assert env["AGENT_HOOKS_HOME"] == str(center.home)  # the server's own environment otherwise
    assert not (work / "repo" / "pwned").exists()
    assert tmux.sessions() == ["agent-Fix-the-bug"]
    assert not list((center.home / "launch").iterdir())  # the spec was read once and deleted
    # The card is the session's own: its hooks (SessionStart, Stop) moved it, with its task and agent.
    card = center.wait_card(lambda c: c["id"] == sid and c["own_state"] == "awaiting" and c["launch"]["state"] == "started",
                            what="the launched card")
    assert card["task_id"] == "T-7" and card["agent"] == "builder" and card["label"] == "Fix the bug", card
    assert card["host"] == "here" and card["launch"] == {"state": "started", "error": None}, card
    assert card["reply"] and card["in_tmux"], card  # a reply can be typed into it like any other's
    [action] = store_rows(center.home, "SELECT action, by_kind, card, note FROM fleet_actions")
    assert (action["action"], action["by_kind"], action["card"]) == ("launch", "owner", sid)
    # The same label again, while that session lives: refused, nothing started.
    status, doc = start(center, cwd=str(work / "repo"), prompt="again", label="Fix the bug")
    assert status == 409 and "agent-Fix-the-bug" in doc["error"], doc
    assert tmux.sessions() == ["agent-Fix-the-bug"]


def test_refusals_say_why_and_start_nothing(center: Center, tmux: TmuxDir, work: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (work / "escape").symlink_to(outside)  # inside the root by its name, outside once resolved
    cases = [
        ({"cwd": str(outside), "prompt": "p"}, 409, "outside host here's [launch] roots"),
        ({"cwd": str(work / "escape"), "prompt": "p"}, 409, f"(that is {outside})"),
        ({"cwd": str(work / "repo" / ".." / ".." / "elsewhere"), "prompt": "p"}, 409, "outside"),
        ({"cwd": str(work / "repo"), "prompt": "p", "permission_mode": "bypassPermissions"}, 409,
         "permission mode bypassPermissions is not allowed on host here"),
        ({"cwd": str(work / "missing"), "prompt": "p"}, 409, "does not exist"),
        ({"cwd": str(work / "repo"), "prompt": "p", "permission_mode": "yolo"}, 400, '"permission_mode" must be one of'),
        ({"cwd": "repo", "prompt": "p"}, 400, "absolute path"),
        ({"cwd": str(work / "repo")}, 400, '"prompt" is required'),
        ({"cwd": str(work / "repo"), "prompt": "p", "task_id": "a b"}, 400, '"task_id" must be a task id'),
        ({"cwd": str(work / "repo"), "prompt": "p", "host": "no-such-host"}, 404, "no host 'no-such-host'"),
    ]
    for body, want, text in cases:
        status, doc = start(center, **body)
        assert status == want and text in doc.get("error", ""), (body, status, doc)
    assert tmux.sessions() == []
    # A refused launch stays on the board as such, with the host's reason (the board hears of the last
    # refusal a tick after its answer).
    def refused() -> list[dict[str, Any]]:
        return [c for c in center.board_cards().values() if c["launch"]]

    wait_for(lambda: refused() and all(c["launch"]["state"] == "refused" and c["launch"]["error"] for c in refused()),
             what="every launched card refused, with its reason", show=refused)


def test_a_host_with_no_roots_launches_nothing(tmp_path: Path, tmux: TmuxDir) -> None:
    c = Center(tmp_path / "off", env=launch_env(tmux, None, fake_client(tmp_path / "bin"))).start()
    try:
        status, doc = start(c, cwd=str(tmp_path), prompt="p")
        assert status == 409 and "launching is off" in doc["error"] and "[launch] roots" in doc["error"], doc
        hosts = c.http.get("/api/launch").json()["hosts"]
        assert hosts[0]["here"] and hosts[0]["roots"] == [], hosts
    finally:
        c.stop()
    assert tmux.sessions() == []


def test_only_a_person_may_launch(center: Center, tmux: TmuxDir, work: Path) -> None:
    body = {"cwd": str(work / "repo"), "prompt": "p"}
    # Cross-site: a page the owner visits cannot post to loopback.
    r = center.http.post("/api/sessions", json=body, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "cross-site" in r.json()["error"], r.text
    # A host's credential speaks for its own traffic, not a person's acts.
    r = center.http.post("/api/sessions", json=body, headers=bearer(host_credential(center, "host-z")))
    assert r.status_code == 403 and "credential is for its own traffic" in r.json()["error"], r.text
    # A revoked / unknown credential: 401 even on the owner's loopback.
    r = center.http.post("/api/sessions", json=body, headers=bearer("ah1.0123456789abcdef.notarealsecretnotarealsecret"))
    assert r.status_code == 401, r.text
    assert tmux.sessions() == []
    # A paired device may, and the record names it.
    browser = device_client(center, "phone")
    r = browser.post("/api/sessions", json={**body, "label": "from-phone"}, headers={"Origin": center.base}, timeout=30)
    assert r.status_code == 201, r.text
    assert tmux.sessions() == ["agent-from-phone"]
    rows = store_rows(center.home, "SELECT by_kind, by_name FROM fleet_actions WHERE action = 'launch'")
    assert [(r["by_kind"], r["by_name"]) for r in rows] == [("device", "phone")]


SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.mark.skipif(os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
                    reason="needs root (to run a client as another uid) and /usr/bin/python3")
def test_another_user_on_loopback_without_a_credential_may_not_launch(center: Center, tmux: TmuxDir,
                                                                       work: Path) -> None:
    script = ("import json, sys, urllib.request, urllib.error\n"
              "req = urllib.request.Request(sys.argv[1] + '/api/sessions', method='POST',"
              " headers={'Content-Type': 'application/json'}, data=json.dumps({'cwd': sys.argv[2], 'prompt': 'p'}).encode())\n"
              "try:\n    print(urllib.request.urlopen(req, timeout=10).status)\n"
              "except urllib.error.HTTPError as e:\n    print(e.code, json.load(e)['error'])\n")
    proc = subprocess.run([SYSTEM_PYTHON, "-I", "-c", script, center.base, str(work / "repo")], capture_output=True,
                          text=True, timeout=30, user=65534, group=65534, cwd="/", env={"PATH": "/usr/bin:/bin"})
    assert proc.stdout.startswith("401 a credential is required"), proc
    assert tmux.sessions() == []


# -- across hosts ---------------------------------------------------------------------------------

def _subscribed_with_offer(a: Center, host: str) -> dict[str, Any]:
    return wait_for(lambda: next((h for h in a.http.get("/api/launch").json()["hosts"]
                                  if h["host"] == host and h["roots"] is not None), None),
                    15, f"{host} to subscribe and say what it may launch")


def test_the_center_launches_on_another_host_which_decides_by_its_own_roots(tmp_path: Path, tmux: TmuxDir) -> None:
    work_b = tmp_path / "b-work"
    (work_b / "repo").mkdir(parents=True)
    outside = tmp_path / "b-elsewhere"
    outside.mkdir()
    b_env = launch_env(tmux, [work_b], fake_client(tmp_path / "b-bin"), modes=["default", "plan"])
    with two_hosts(tmp_path, forward={**b_env, "AGENT_HOOKS_FLEET_TOKEN": TOKEN}) as (a, b, _):
        offer = _subscribed_with_offer(a, "host-b")
        assert offer["roots"] == [os.path.realpath(work_b)] and offer["permission_modes"] == ["default", "plan"]
        with a.live() as ws:
            messages(ws, lambda got: any(m["type"] == "hello" for m in got))
            status, doc = start(a, host="host-b", cwd=str(work_b / "repo"), prompt="build it", task_id="T-9",
                                label="remote one")
            assert status == 201 and doc["host"] == "host-b" and doc["state"] == "started", doc
            sid = doc["id"]
            # On the board at once, starting, before its host said anything; then what the host said.
            shown = [m["card"]["launch"]["state"] for m in messages(
                ws, lambda got: any(m["type"] == "card" and m["card"]["id"] == sid and m["card"]["launch"]["state"]
                                    == "started" for m in got), timeout=20) if m["type"] == "card" and m["card"]["id"] == sid]
            assert shown[0] == "starting" and shown[-1] == "started", shown
        rec = launched(work_b / "repo", sid)
        assert rec["env"]["AGENT_HOOKS_HOME"] == str(b.home) and "AGENT_HOOKS_FLEET_TOKEN" not in rec["env"]
        assert rec["argv"][-4:] == ["--permission-mode", "default", "--", "build it"], rec["argv"]
        # The card on the command center is the session's: host B's hooks and report move it.
        card = a.wait_card(lambda c: c["id"] == sid and c["own_state"] == "awaiting" and c["reply"]
                           and c["launch"]["state"] == "started", timeout=20,
                           what="B's launched session on A's board")
        assert (card["host"], card["task_id"], card["launch"]["state"]) == ("host-b", "T-9", "started"), card
        # B decides: a directory outside its roots, a mode it does not allow. A says what B said.
        status, doc = start(a, host="host-b", cwd=str(outside), prompt="p")
        assert status == 409 and "outside host host-b's [launch] roots" in doc["error"], doc
        status, doc = start(a, host="host-b", cwd=str(work_b / "repo"), prompt="p", permission_mode="acceptEdits")
        assert status == 409 and "acceptEdits is not allowed on host host-b" in doc["error"], doc
        a.wait_card(lambda c: c["id"] == doc["id"] and c["launch"] == {"state": "refused", "error": doc["error"]},
                    what="the refused launch's card")
        assert tmux.sessions() == ["agent-remote-one"]


def test_a_host_with_launching_off_refuses_the_centers_launch(tmp_path: Path, tmux: TmuxDir) -> None:
    with two_hosts(tmp_path, forward=launch_env(tmux, None, fake_client(tmp_path / "b-bin"))) as (a, _b, _):
        offer = _subscribed_with_offer(a, "host-b")
        assert offer["roots"] == []
        status, doc = start(a, host="host-b", cwd=str(tmp_path), prompt="p")
        assert status == 409 and "launching is off on host host-b" in doc["error"], doc
    assert tmux.sessions() == []


# -- agent-hook launch ----------------------------------------------------------------------------

def test_the_command_launches_through_this_hosts_server_and_prints_the_cards_id(center: Center, tmux: TmuxDir,
                                                                                 work: Path) -> None:
    proc = agent_hook("launch", "--cwd", str(work / "repo"), "--task", "T-3", "--name", "cli", "--", "-x", "do it",
                      env=center.env)
    sid = proc.stdout.strip()
    assert uuid.UUID(sid) and "tmux session agent-cli on here: started" in proc.stderr, proc
    assert launched(work / "repo", sid)["argv"][-2:] == ["--", "-x do it"]
    center.wait_card(lambda c: c["id"] == sid and c["task_id"] == "T-3" and c["launch"]["state"] == "started",
                     what="the card of the command's session")
    bad = agent_hook("launch", "--cwd", "/", "--", "p", env=center.env, check=False)
    assert bad.returncode == 1 and "not launched: directory / is outside host here's [launch] roots" in bad.stderr, bad
    assert tmux.sessions() == ["agent-cli"]


def test_the_command_launches_directly_when_no_server_runs(tmp_path: Path, tmux: TmuxDir, work: Path) -> None:
    home = tmp_path / "alone"
    env = {"AGENT_HOOKS_HOME": str(home), "AGENT_HOOKS__SERVE__PORT": str(free_port()), "AGENT_HOOKS_FLEET_TOKEN": TOKEN,
           **launch_env(tmux, [work], fake_client(tmp_path / "bin"))}
    proc = agent_hook("launch", "--cwd", str(work / "repo"), "--agent", "solo", "--json", "--", "go", env=env)
    doc = json.loads(proc.stdout)
    assert doc["status"] == 201 and doc["tmux_session"] == f"agent-{doc['id'][:8]}", doc
    rec = launched(work / "repo", doc["id"])
    assert rec["env"]["AGENT_HOOKS_AGENT"] == "solo" and "AGENT_HOOKS_FLEET_TOKEN" not in rec["env"]
    def recorded() -> list[Any] | None:
        try:  # the store is made by the session's first hook call
            return store_rows(home, "SELECT session_id, tmux_session, agent FROM sessions WHERE state = 'awaiting'")
        except sqlite3.OperationalError:
            return None

    rows = wait_for(recorded, 15, "the session's hooks to record it")
    assert [tuple(r) for r in rows] == [(doc["id"], doc["tmux_session"], "solo")]
    off = agent_hook("launch", "--cwd", str(work / "repo"), "--permission-mode", "bypassPermissions", "--", "p",
                     env=env, check=False)
    assert off.returncode == 1 and "bypassPermissions is not allowed" in off.stderr, off


def test_fuzzed_launch_requests_are_answered_and_start_nothing(tmp_path: Path, tmux: TmuxDir) -> None:
    """The fuzz tier's mutations of POST /api/sessions (tests/hooks/test_fuzz.py walks every route with
    launching off) on a host that launches, with a client that is not there: a 4xx at worst, never a 5xx,
    no traceback, nothing started."""
    from support.fuzz import api_cases
    from support.routes import AppRoute, request

    root = tmp_path / "work"
    (root / "fz").mkdir(parents=True)
    c = Center(tmp_path / "fz-home", env=launch_env(tmux, [root], tmp_path / "no-such-client")).start()
    statuses: set[int] = set()
    try:
        for case in api_cases([AppRoute("http", "/api/sessions", ("POST",))], 300, seed=42):
            body = case["body"].replace(b"/tmp/fz", str(root / "fz").encode())  # inside the root: every check runs
            answer = request(c.port, case["method"], case["path"], case["headers"], body, timeout=30)
            assert answer.status < 500, (case, answer.status, answer.body[:300])
            statuses.add(answer.status)
        assert c.status()["up"]
    finally:
        c.stop()
    assert {400, 409} <= statuses, statuses  # refused for its shape, and by the host (no client)
    log = (tmp_path / "fz-home" / "logs" / "server.log").read_text()
    assert "Traceback" not in log, log[log.find("Traceback"):][:2000]
    assert tmux.sessions() == []
