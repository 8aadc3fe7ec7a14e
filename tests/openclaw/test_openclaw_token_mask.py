"""The OpenClaw gateway's token is masked before its words are cut, wherever they are shown.

A gateway's error may quote what it was sent, the token included. Cut to one line of 300 characters
first and masked after, a token quoted from character 275 on lost its tail to the cut, no longer
matched, and showed 25 of its 38 characters in /status, doctor and the log. Here the test gateway
quotes the token past each cut (a refused connect, a refused call, its shutdown reason, and a quote of
part of it): no 8 characters of it may appear in any answer, doctor's output or the server's log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.center import Center
from support.openclaw import Gateway, approval
from support.scripts import agent_hook

# 38 characters, as the gateway's own tokens.
SECRET = "ocg_7Hq2vXr9LmT4pWz8KdN3fB6yJc1sAe5uGi"
PIECE = 8


def leaks(text: str) -> list[str]:
    """Every 8-character stretch of the token found in ``text``."""
    return sorted({SECRET[i:i + PIECE] for i in range(len(SECRET) - PIECE + 1) if SECRET[i:i + PIECE] in text})


def quoting(offset: int, what: str = SECRET) -> str:
    """A gateway's message that quotes ``what`` from character ``offset`` on."""
    head = "unauthorized: the operator's auth did not match what this gateway was configured with; sent "
    return (head + "." * max(0, offset - len(head)))[:offset] + what + " (check gateway.auth.token)"


def env_for(gw: Gateway, **extra: str) -> dict[str, str]:
    return {"AGENT_HOOKS__OPENCLAW__URL": gw.url, "AGENT_HOOKS_OPENCLAW_TOKEN": SECRET,
            "AGENT_HOOKS__OPENCLAW__APPROVALS": "true", "AGENT_HOOKS__OPENCLAW__CANCEL": "true",
            "AGENT_HOOKS__OPENCLAW__BACKOFF_MAX_S": "0.5", "AGENT_HOOKS__FLEET__HOST": "host-a", **extra}


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    gw = Gateway(token=SECRET).start()
    try:
        yield gw
    finally:
        gw.close()


def status(center: Center) -> dict[str, Any]:
    return center.http.get("/status").json()["openclaw"]  # type: ignore[no-any-return]


def wait_for(center: Center, predicate: Any, what: str, timeout: float = 15.0) -> dict[str, Any]:
    end = time.time() + timeout
    while time.time() < end:
        st = status(center)
        if predicate(st):
            return st
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {status(center)}")


def everything_shown(center: Center) -> dict[str, str]:
    """What a person or another program can read: the server's answers, doctor's output, every log."""
    home = Path(center.env["AGENT_HOOKS_HOME"])
    shown = {route: center.http.get(route).text
             for route in ("/status", "/api/fleet/status", "/api/board", "/api/approvals?state=all")}
    with center.live() as ws:
        shown["WebSocket hello"] = str(ws.recv(timeout=10))
    doctor = agent_hook("doctor", "--json", "--no-run", env=center.env, check=False)
    shown["doctor"] = doctor.stdout + doctor.stderr
    for log in sorted(home.rglob("*.log")):
        shown[str(log.relative_to(home))] = log.read_text(errors="replace")
    assert any(name.endswith("server.log") for name in shown), sorted(shown)
    return shown


def assert_masked(shown: dict[str, str]) -> None:
    found = {where: leaks(text) for where, text in shown.items() if leaks(text)}
    assert not found, f"the token's pieces show: {found}"


def test_a_refused_connect_quoting_the_token_past_the_cut(tmp_path: Path, gateway: Gateway) -> None:
    gateway.refusal = {"code": "INVALID_REQUEST", "message": quoting(275)}
    center = Center(tmp_path / "home", env=env_for(gateway)).start()
    try:
        st = wait_for(center, lambda s: s["state"] == "down" and s["last_error"], "the refusal")
        assert st["last_error"].startswith("refused: unauthorized: the operator's auth") and "***" in st["last_error"]
        shown = everything_shown(center)
        assert "refused: unauthorized: the operator's auth" in shown["doctor"]  # doctor says it, masked
        assert_masked(shown)
        # A quote of part of the token (cut by the gateway itself) is masked too.
        gateway.refusal = {"code": "INVALID_REQUEST", "message": quoting(120, SECRET[:30])}
        wait_for(center, lambda s: s["last_error"] and "(check" in s["last_error"] and "." * 20 in s["last_error"],
                 "the second refusal")
        assert_masked(everything_shown(center))
    finally:
        center.stop()


def test_a_refused_call_and_a_shutdown_reason_quoting_the_token(tmp_path: Path, gateway: Gateway) -> None:
    gateway.handlers["exec.approval.list"] = lambda p: (False, {"code": "UNAVAILABLE", "message": quoting(290)})
    gateway.handlers["exec.approval.resolve"] = lambda p: (False, {"code": "UNAVAILABLE", "message": quoting(280)})
    center = Center(tmp_path / "home", env=env_for(gateway)).start()
    try:
        gateway.wait_clients()
        wait_for(center, lambda s: s["state"] == "connected", "the connection")
        gateway.send(approval("gw-secret-1", "git push"))
        listed: list[dict[str, Any]] = []
        end = time.time() + 15
        while not listed and time.time() < end:
            listed = center.http.get("/api/approvals").json()["approvals"]
            time.sleep(0.05)
        assert listed, "the gateway's request was never listed"
        answer = center.http.post(f"/api/approvals/{listed[0]['id']}", json={"decision": "allow"})
        assert answer.status_code >= 400 and "***" in answer.text, answer.text
        assert not leaks(answer.text), answer.text
        # Its shutdown reason quotes the token across the 200 characters it is cut to.
        gateway.send({"type": "event", "event": "shutdown", "payload": {"reason": quoting(185)}})
        gateway.stop()
        st = wait_for(center, lambda s: s["state"] == "down" and (s["last_error"] or "").startswith("the gateway stopped"),
                      "the gateway's stop")
        assert "***" in st["last_error"], st
        shown = everything_shown(center)
        assert "exec.approval.list refused" in shown["logs/server.log"]  # the refused call was logged, masked
        assert_masked(shown)
    finally:
        center.stop()


def test_the_mask_takes_the_token_and_any_long_piece_of_it() -> None:
    from agent_hooks.openclaw import settings

    for text in (quoting(275), quoting(0), SECRET * 3, quoting(50, SECRET[5:20]), quoting(10, SECRET[-9:]),
                 "x" * 1_000_000 + SECRET):
        masked = settings.mask(text, SECRET)
        assert not leaks(masked) and "***" in masked, masked[-200:]
    # Shorter pieces (7 characters) and text without the token stay as they are.
    for text in ("plain words", SECRET[:7] + " " + SECRET[10:17], json.dumps({"a": 1})):
        assert settings.mask(text, SECRET) == text
