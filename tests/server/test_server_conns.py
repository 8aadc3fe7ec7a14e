"""Connections that send no request cost the server nothing for long (server/conns.py): silent
ones and half-sent headers are closed within serve.request_timeout_s, a kept-alive connection
between calls too, and another local user cannot hold more than serve.connections_per_uid."""

from __future__ import annotations

import http.client
import json
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_hooks.server import conns

from support.repo import fixture_payload
from support.servers import Server, as_nobody, start_server

# serve.request_timeout_s for the tests that wait it out: the least the setting takes (the default is 5 s),
# so that what must be closed is closed in about a second; every wait below is a multiple of it.
TIMEOUT_S = 1.0


def closed_by_peer(sock: socket.socket) -> bool:
    """True when the other end has closed (EOF or reset); never blocks."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except BlockingIOError:
        return False


@pytest.fixture
def server(hooks_home: Path) -> Iterator[Server]:
    """A server on this test's store whose request timer is TIMEOUT_S."""
    srv = start_server(hooks_home, {"AGENT_HOOKS__SERVE__REQUEST_TIMEOUT_S": f"{TIMEOUT_S:g}"})
    try:
        yield srv
    finally:
        srv.stop()


def pre_tool_use(n: int) -> dict[str, object]:
    return dict(fixture_payload("PreToolUse-Bash.json"), session_id="conn-owner", tool_use_id=f"toolu_c{n}",
                tool_input={"command": f"echo {n}", "description": "n"})


def test_silent_and_half_sent_connections_are_closed_while_hook_calls_answer(server: Server) -> None:
    silent = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(300)]
    half = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    half.sendall(b"POST /hooks/PreToolUse HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-")
    # A kept-alive connection that trickles the next request's headers, a byte every TIMEOUT_S / 5: every
    # byte would reset uvicorn's own keep-alive timer (or a timer that bytes reset). Its 39 bytes take longer
    # than the deadline below, so only a timer that waits for a whole request closes it within it.
    trickle = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    trickle.request("GET", "/health")
    assert trickle.getresponse().read()
    began = time.monotonic()
    # The owner's hook calls are answered all along.
    assert server.answer(pre_tool_use(1)) is None
    left = silent + [half, trickle.sock]
    sent = 0
    while left and time.monotonic() - began < 6 * TIMEOUT_S:  # closed after about TIMEOUT_S: a 6x margin
        if sent < 40 and trickle.sock in left:
            try:
                trickle.sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"[sent:sent + 1])
                sent += 1
            except OSError:
                pass
        left = [s for s in left if not closed_by_peer(s)]
        time.sleep(TIMEOUT_S / 5)
    closed_after = time.monotonic() - began
    assert not left, f"{len(left)} of {len(silent) + 2} connections still open after {closed_after:.0f} s"
    assert server.answer(pre_tool_use(2)) is None
    counts = server.status()["requests"]
    assert counts.get("connections_timed_out", 0) >= 302, counts
    for s in silent + [half]:
        s.close()
    trickle.close()


def test_a_kept_alive_connection_serves_calls_until_idle_then_a_new_one_does(server: Server) -> None:
    # What a client that keeps its connection between hook calls meets: calls a moment apart share
    # one connection; after serve.request_timeout_s of quiet it is closed, and the next call connects anew.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    body = json.dumps(pre_tool_use(3)).encode()
    headers = {"Content-Type": "application/json"}
    conn.request("POST", "/hooks/PreToolUse", body, headers)
    assert conn.getresponse().read() == b""
    first = conn.sock
    time.sleep(TIMEOUT_S / 5)  # a moment, well within the timeout
    conn.request("POST", "/hooks/PreToolUse", body, headers)
    assert conn.getresponse().read() == b"" and conn.sock is first  # the same connection
    # Closed after about TIMEOUT_S by the request timer; uvicorn's own keep-alive timer (TIMEOUT_S + 2,
    # server/worker.py) would only close it after this deadline.
    deadline = time.monotonic() + 2.5 * TIMEOUT_S
    while not closed_by_peer(first) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert closed_by_peer(first), "an idle kept-alive connection was never closed"
    conn.close()
    assert server.answer(pre_tool_use(4)) is None  # a new connection is served as ever


HOLDER = r"""
import select, socket, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
def gone(s):
    p = select.poll()
    p.register(s, select.POLLIN)
    if not p.poll(0):
        return False
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
# Open connections as fast as it can for the whole time, keeping every one the server leaves open
# (another local user trying to use up the server's connections).
held, opened = [], 0
print("started", flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        opened += 1
    except OSError:
        time.sleep(0.01)
    if opened % 200 == 0:
        held = [s for s in held if not gone(s)]
time.sleep(0.5)
print(opened, len([s for s in held if not gone(s)]), flush=True)
"""


def test_another_user_is_capped_and_the_owners_calls_still_answer(hooks_home: Path) -> None:
    prefix = as_nobody()
    server = start_server(hooks_home, {"AGENT_HOOKS__SERVE__CONNECTIONS_PER_UID": "20",
                                       # long enough that no connection is closed for silence during the test
                                       "AGENT_HOOKS__SERVE__REQUEST_TIMEOUT_S": "60"})
    holder = subprocess.Popen([*prefix, sys.executable, "-I", "-c", HOLDER, str(server.port), "1.5"],
                              stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "started"
        time.sleep(0.5)  # it is at the cap (20 connections) long before
        # The owner's calls, all while the other uid opens connections as fast as it can.
        answered = 0
        while holder.poll() is None and answered < 200:
            assert server.answer(pre_tool_use(100 + answered)) is None
            answered += 1
        opened, still_open = (int(x) for x in holder.stdout.readline().split())
        assert answered >= 20, answered
        assert opened > 100, f"the other uid opened only {opened} connections"
        assert still_open <= 20, f"another uid holds {still_open} connections; the cap is 20"
        counts = server.status()["requests"]
        assert counts.get("connections_refused", 0) >= opened - 20, counts
    finally:
        holder.kill()
        holder.wait()
        server.stop()


def test_an_upgraded_websocket_is_not_timed(hooks_home: Path) -> None:
    # The board's live socket sends nothing for long stretches: the request timer stops at the upgrade.
    import asyncio

    import websockets

    server = start_server(hooks_home, {"AGENT_HOOKS__SERVE__REQUEST_TIMEOUT_S": f"{TIMEOUT_S:g}"})

    async def hold() -> bool:
        async with websockets.connect(f"ws://127.0.0.1:{server.port}/api/live") as ws:
            end = time.monotonic() + 2.5 * TIMEOUT_S  # a timed socket would be closed after TIMEOUT_S
            while time.monotonic() < end:
                try:
                    await asyncio.wait_for(ws.recv(), 0.5)
                except TimeoutError:
                    pass
            return ws.state == websockets.protocol.State.OPEN

    try:
        assert asyncio.run(hold()), "the live socket was closed by the request timer"
        # Counted out of the caller's connections at the upgrade, and never timed out.
        assert server.status()["requests"].get("connections_timed_out", 0) == 0
    finally:
        server.stop()


def test_hosts_behind_one_address_share_the_larger_address_cap() -> None:
    # Many hosts behind one NAT arrive from one address, each with a long poll and its reports open:
    # the address cap is separate from (and far above) the cap on another local user.
    guard = conns.ConnectionGuard(5, per_uid=2, per_address=5, own_uid=1000)
    behind_nat = guard.key(None, ("203.0.113.7", 40000))
    assert [guard.admit(behind_nat) for _ in range(6)] == [True] * 5 + [False]
    other_user = guard.key(1001, ("127.0.0.1", 40001))
    assert [guard.admit(other_user) for _ in range(3)] == [True, True, False]
    assert guard.key(1000, ("127.0.0.1", 40002)) is None  # the owner: never capped
    guard.release(behind_nat)
    assert guard.admit(behind_nat)
