"""Notifications from a real server to a local receiver (docs/notifications.md).

A real server with [[notify.channels]] pointing at a JSON webhook on 127.0.0.1 (Apprise ``json://``);
requests are held by the installed PermissionRequest executable (support.approvals.Held). The
receiver gets one notification per request naming the command, again every renotify_s while it waits,
and nothing after an answer; one that answers 500 twice still gets it. Web Push: the test subscribes
its own key pair and decrypts what the server pushed.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.approvals import PERMISSION, Held
from support.center import Center
from support.receiver import Receiver
from support.scripts import agent_hook
from support.servers import server_log


def start(tmp_path: Path, channels: list[dict[str, Any]], **settings: str) -> tuple[Center, dict[str, str]]:
    env = {"AGENT_HOOKS__NOTIFY__CHANNELS": json.dumps(channels), "AGENT_HOOKS__FLEET__HOST": "host-a",
           "AGENT_HOOKS__NOTIFY__BACKOFF_INITIAL_S": "0.2", **settings}
    center = Center(tmp_path / "home", env=env).start()
    hook_env = {"AGENT_HOOKS_HOME": str(center.home), "HOME": center.env["HOME"], "AGENT_HOOKS_AGENT": "builder",
                "TMUX": "", "TMUX_PANE": "", **env}
    return center, hook_env


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as rec:
        yield rec


def pending(center: Center) -> list[dict[str, Any]]:
    r = center.http.get("/api/approvals")
    assert r.status_code == 200, r.text
    return r.json()["approvals"]  # type: ignore[no-any-return]


def wait_pending(center: Center, predicate: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pending(center)
        if predicate(got):
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out: {pending(center)}")


def test_a_request_is_told_once_again_while_it_waits_and_never_after_an_answer(
        tmp_path: Path, receiver: Receiver) -> None:
    center, env = start(tmp_path, [{"url": receiver.url, "name": "hook"}], AGENT_HOOKS__NOTIFY__RENOTIFY_S="1.5",
                        AGENT_HOOKS__NOTIFY__BOARD_URL="https://cc.example.org")
    try:
        secret = {**PERMISSION, "tool_input": {"command": "API_TOKEN=hunter2hunter2 ./deploy.sh --prod",
                                               "description": "deploy"}}
        t0 = time.time()
        held = Held(secret, env)
        [first] = receiver.wait(1)
        assert receiver.times[0] - t0 < 3.0
        [row] = pending(center)
        assert "./deploy.sh --prod" in first["message"] and "hunter2" not in json.dumps(first)
        assert "API_TOKEN=***" in first["message"]
        assert "builder" in first["title"] and "host-a" in first["title"]
        assert f"https://cc.example.org/#request={row['id']}" in first["message"]
        # The delivery shows on the request: the API the board reads, and the CLI.
        [told] = wait_pending(center, lambda got: got and got[0]["notifications"]
                              and got[0]["notifications"][0]["state"] == "sent")[0]["notifications"]
        assert told["channel"] == "hook" and told["error"] is None and told["at"] >= t0
        listed = agent_hook("approvals", env=env).stdout
        assert "notified: hook sent" in listed, listed

        # Still unanswered: told again, every renotify_s.
        again = receiver.wait(2, timeout=5)
        assert again[1]["title"].startswith("Reminder 1:")
        assert receiver.times[1] - receiver.times[0] >= 1.4

        # Answered (here, the CLI): nothing more, ever.
        assert "allowed" in agent_hook("approve", row["id"], env=env).stdout
        assert held.answer()["hookSpecificOutput"]["decision"]["behavior"] == "allow"
        told_so_far = len(receiver.bodies())
        time.sleep(3.5)
        assert len(receiver.bodies()) == told_so_far
        shown = agent_hook("session", "show", PERMISSION["session_id"], env=env).stdout
        assert "notified: hook sent" in shown, shown
    finally:
        center.stop()


def test_a_channel_that_fails_twice_still_gets_it(tmp_path: Path) -> None:
    with Receiver(fail_first=2) as receiver:
        center, env = start(tmp_path, [{"url": receiver.url}], AGENT_HOOKS__NOTIFY__RENOTIFY_S="0")
        try:
            held = Held(PERMISSION, env)
            [got] = receiver.wait(1, timeout=10)
            assert receiver.refused == 2 and "Bash" in got["message"]
            [row] = wait_pending(center, lambda g: g and g[0]["notifications"][0]["state"] == "sent")
            assert row["notifications"][0]["sends"] == 1
            center.http.post(f"/api/approvals/{row['id']}", json={"decision": "deny", "message": "no"})
            held.answer()
            # server.log has Apprise's two failures (WARNING and up), not a line per send that went through.
            apprise_lines = [line for line in server_log(center.home).splitlines() if " apprise" in line]
            assert [line for line in apprise_lines if " INFO " in line or " DEBUG " in line] == [], apprise_lines
            assert len([line for line in apprise_lines if " WARNING " in line and "500" in line]) == 2, apprise_lines
        finally:
            center.stop()


def test_retrying_shows_the_channels_answer_and_doctor_names_it(tmp_path: Path) -> None:
    with Receiver() as receiver:
        receiver.status = 500
        center, env = start(tmp_path, [{"url": receiver.url, "name": "down"}],
                            AGENT_HOOKS__NOTIFY__BACKOFF_INITIAL_S="5")
        try:
            held = Held(PERMISSION, env)
            [row] = wait_pending(center, lambda g: g and g[0]["notifications"]
                                 and g[0]["notifications"][0]["state"] == "retrying")
            assert "500" in row["notifications"][0]["error"], row["notifications"]
            doctor = agent_hook("doctor", "--json", env=env, check=False).stdout
            lines = [c for c in json.loads(doctor)["checks"] if c["area"] == "notify"]
            assert any("down: last delivery failed" in c["summary"] and "500" in c["summary"] for c in lines), lines
            # Answered while it was waiting for its retry: it is never sent.
            center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})
            held.answer()
            receiver.status = 200
            time.sleep(6)
            assert receiver.bodies() == []
        finally:
            center.stop()


def test_channels_are_narrowed_by_kind_and_agent(tmp_path: Path) -> None:
    with Receiver(path="/other") as other, Receiver(path="/builder") as builder, Receiver(path="/done") as done:
        center, env = start(tmp_path, [{"url": other.url, "agent": "reviewer-*"},
                                       {"url": builder.url, "agent": ["lead", "build*"], "host": "host-?"},
                                       {"url": done.url, "on": ["finished"]}])
        try:
            held = Held(PERMISSION, env)
            builder.wait(1)
            [row] = pending(center)
            assert [n["channel"] for n in row["notifications"]] == ["json #2"]
            center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})
            held.answer()
            time.sleep(0.5)
            assert other.bodies() == [] and done.bodies() == []
        finally:
            center.stop()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_web_push_round_trip_decrypted_with_the_subscriptions_keys(tmp_path: Path) -> None:
    import http_ece
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    with Receiver(path="/push/abc") as endpoint:
        center, env = start(tmp_path, [], AGENT_HOOKS__NOTIFY__PUSH_CONTACT="mailto:ops@example.org")
        try:
            key = center.http.get("/api/push/key").json()["public_key"]
            raw = base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))
            assert len(raw) == 65 and raw[0] == 4
            pem = Path(center.env["HOME"]).parent / "home" / "push-vapid.pem"
            assert oct(pem.stat().st_mode & 0o777) == "0o600"
            assert center.http.get("/api/push/key").json()["public_key"] == key  # made once

            private = ec.generate_private_key(ec.SECP256R1())
            auth = os.urandom(16)
            sub = {"endpoint": endpoint.http_url,
                   "keys": {"p256dh": b64url(private.public_key().public_bytes(Encoding.X962,
                                                                               PublicFormat.UncompressedPoint)),
                            "auth": b64url(auth)}}
            r = center.http.post("/api/push/subscriptions", json=sub)
            assert r.status_code == 201, r.text
            assert r.json()["device"].startswith("uid ")
            bad = center.http.post("/api/push/subscriptions", json={**sub, "keys": {"p256dh": "x", "auth": "y"}})
            assert bad.status_code == 400 and "p256dh" in bad.json()["error"]
            remote = center.http.post("/api/push/subscriptions", json={**sub, "endpoint": "http://example.org/x"})
            assert remote.status_code == 400

            held = Held(PERMISSION, env)
            deadline = time.monotonic() + 10
            while not endpoint.raw and time.monotonic() < deadline:
                time.sleep(0.05)
            [(headers, body)] = endpoint.raw
            assert headers["content-encoding"] == "aes128gcm"
            assert f"k={key}" in headers["authorization"]
            # The VAPID token names the configured contact (its claims: the JWT's middle part).
            token = headers["authorization"].split("t=", 1)[1].split(",", 1)[0]
            claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=" * (-len(token.split(".")[1]) % 4)))
            assert claims["sub"] == "mailto:ops@example.org", claims
            doc = json.loads(http_ece.decrypt(body, private_key=private, auth_secret=auth, version="aes128gcm"))
            [row] = pending(center)
            assert doc["url"].endswith(f"/#request={row['id']}") and doc["tag"] == f"request-{row['id']}"
            assert PERMISSION["tool_input"]["command"] in doc["body"] and doc["title"]
            assert row["notifications"][0]["channel"].startswith("push uid ")

            gone = center.http.request("DELETE", "/api/push/subscriptions", json={"endpoint": endpoint.http_url})
            assert gone.status_code == 200
            assert center.http.request("DELETE", "/api/push/subscriptions",
                                       json={"endpoint": endpoint.http_url}).status_code == 404
            center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})
            held.answer()
        finally:
            center.stop()


def test_push_routes_take_a_person_not_a_host(tmp_path: Path) -> None:
    from support.pairing import bearer, device_client, host_credential

    center, _env = start(tmp_path, [], AGENT_HOOKS__FLEET__NAMES='["127.0.0.1"]')
    try:
        host = bearer(host_credential(center, "host-b"))
        assert center.http.get("/api/push/key", headers=host).status_code == 403
        device = device_client(center, "phone")
        assert device.get("/api/push/key").status_code == 200
        sub = {"endpoint": "https://push.example.org/send/1",
               "keys": {"p256dh": b64url(b"\x04" + b"\x01" * 64), "auth": b64url(b"\x02" * 16)}}
        r = device.post("/api/push/subscriptions", json=sub)
        assert r.status_code == 201 and r.json()["device"] == "phone", r.text
        assert device.post("/api/push/subscriptions", json=sub).status_code == 200  # known: not new
    finally:
        center.stop()


def test_a_session_that_fails_is_told_and_finished_only_where_asked(tmp_path: Path) -> None:
    with Receiver(path="/needs") as needs, Receiver(path="/done") as done:
        center, _env = start(tmp_path, [{"url": needs.url}, {"url": done.url, "on": ["finished"]}])
        try:
            assert center.ingest({"tmux_session": "work-1", "event": "start"}).status_code == 200
            assert center.ingest({"tmux_session": "work-1", "event": "failed", "metadata": "error: api"}).status_code == 200
            [got] = needs.wait(1)
            assert "stopped on an error" in got["title"] and "/#/session/" in got["message"], got
            assert center.ingest({"tmux_session": "work-2", "event": "start"}).status_code == 200
            assert center.ingest({"tmux_session": "work-2", "event": "exit"}).status_code == 200
            [fin] = done.wait(1)
            assert "finished" in fin["title"]
            time.sleep(0.5)
            assert len(needs.bodies()) == 1 and len(done.bodies()) == 1  # each told where it was asked for
        finally:
            center.stop()


def test_the_fleets_cost_alerts_are_told_as_budget_once(tmp_path: Path) -> None:
    import sqlite3

    with Receiver(path="/money") as money, Receiver(path="/requests") as requests_only:
        center, _env = start(tmp_path, [{"url": money.url, "on": ["budget"], "task": "T-*"},
                                        {"url": requests_only.url, "on": ["request"]}])
        try:
            with sqlite3.connect(center.home / "store.db") as conn:
                conn.execute("INSERT INTO fleet_cost_alerts (kind, subject, limit_usd, spent_usd, period, at, message)"
                             " VALUES ('budget', 'task:T-1', 5, 5.2, '', ?, 'task T-1 of $5.00 is spent ($5.20)')",
                             (time.time(),))
            [got] = money.wait(1)
            assert got["title"] == "Budget reached" and "task T-1 of $5.00 is spent" in got["message"]
            time.sleep(0.5)
            with sqlite3.connect(center.home / "store.db") as conn:
                assert conn.execute("SELECT notified_at FROM fleet_cost_alerts").fetchone()[0] is not None
            assert len(money.bodies()) == 1 and requests_only.bodies() == []
        finally:
            center.stop()
