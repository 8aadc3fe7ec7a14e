"""The command center under a fleet: N simulated hosts against one command center, and what it costs.

Each run starts ``agent-hook server start`` on a free loopback port with a throwaway AGENT_HOOKS_HOME and
a fleet token file, then simulates ``N`` hosts from this process (asyncio on uvloop, a minimal HTTP/1.1
client of its own, so the generator is not what is measured; its own CPU is printed beside the server's).
Every simulated host does what a host's server does (center/control.py Subscriber, center/report.py
Reporter, forward/ drainer), as the owner naming itself (``X-Agent-Hooks-Host``, the fleet token as
``Authorization: Bearer``, which the token check sees on every request):

* keeps a long poll open on ``GET /api/fleet/controls`` (``after``, ``epoch``, ``wait``);
* reports its 4 cards every 5 s (``POST /api/fleet/report``; one of them changed each time, as an
  idle-but-live fleet does), within ~0.1 s of a change of its requests;
* sends 0.5 events/s to ``POST /api/hooks/ingest`` (contract bodies, each with its Idempotency-Key);
* a share of the hosts (``--requesting``) holds a pending request for a person (the ``approvals`` list
  of its reports, rows as relay.host_rows gives them). A simulated person answers them
  (``POST /api/approvals/<id>``, ``--answers-per-s``); the host's long poll receives the ``approval``
  control, and the host posts ``/api/fleet/replies`` as the Subscriber does, then reports the row settled
  and, ``--request-gap`` s later, a new pending one.

A board client on ``/api/live`` (WebSocket) measures the lag from a report or an event to the card message
that shows it (each carries a marker: the report in ``current_command``, the event in ``metadata``).

Columns, per N (the median over ``--repeat`` runs, the range in brackets):

* server CPU: the serving (worker) process's CPU over the window, from /proc, in % of one core;
* ingest p95: an ingest POST's answer time;
* answer -> host p95: from the person's POST to the host's long poll receiving the control;
* board lag p99: from a report's or event's POST to the card message that shows it;
* generator CPU: this process (hosts, person and board), in % of one core.

Below the table, per N: requests answered, 5xx and failures, cards the board never showed (``unseen``: a
card past ``board.max_sessions`` is not on the board) and ``removed`` messages per second.

    .venv/bin/python bench/bench_fleet_scale.py --hosts 25,100,250 --duration 30 --repeat 3

``--backend``: the fleet store (sqlite, the embedded one; postgres: ``[center] database`` on a cluster the
bench starts itself, its CPU printed below the table); ``--centers``: command-center processes sharing it
(one, for sqlite), or several counts to compare (``--centers 1,2``: each count over every ``--hosts``,
interleaved, and a last line with the most hosts each held at an answer p95 within ``--target-ms``). Hosts are spread over the centers round-robin; the board watches the first, and the
person answers on the first (so with two centers, half the answers wake a long poll held by the other).
Server CPU is the centers' together.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
TOKEN = "bench-fleet-token-" + "x" * 24
CARDS_PER_HOST = 4
REPORT_EVERY_S = 5.0
POLL_WAIT_S = 20.0
WARMUP_S = 8.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int | str) -> float:
    """User + system CPU time of a process so far (its threads included)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


# -- the command centers ---------------------------------------------------------------------------------

@dataclass
class Center:
    port: int
    env: dict[str, str]
    pid: int  # the worker: the process that serves


def start_centers(backend: str, count: int, hosts: int) -> list[Center]:
    """``count`` command centers on ``backend``, each on its own free loopback port, with a fleet token file.
    PostgreSQL: a cluster of the bench's own (tests/support/postgres.py), one database the centers share."""
    assert backend == "postgres" or count == 1  # SQLite's store is one process's
    url = ""
    if backend == "postgres":
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from support.postgres import Postgres

        pg = Postgres().start()
        _CLUSTERS.append(pg)
        url = pg.create_database("fleet")
    root = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    token_file = root / "fleet-token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    centers = []
    for i in range(count):
        home = root / f"center-{i}"
        home.mkdir()
        port = free_port()
        env = {**os.environ, "AGENT_HOOKS_HOME": str(home), "HOME": str(home), "AGENT_HOOKS__SERVE__PORT": str(port),
               "AGENT_HOOKS__FORWARD__ENABLED": "false", "AGENT_HOOKS__FLEET__TOKEN_FILE": str(token_file),
               "AGENT_HOOKS__FLEET__HOST": f"center-{i}",
               # Every simulated host is a host this center keeps (the default cap is 50).
               "AGENT_HOOKS__FLEET__MAX_HOSTS": str(hosts + 10)}
        if url:
            env["AGENT_HOOKS__CENTER__DATABASE"] = url
        env.pop("AGENT_HOOKS_FLEET_TOKEN", None)
        subprocess.run([str(BIN / "agent-hook"), "server", "start"], env=env, check=True, capture_output=True)
        info = json.loads((home / "server.json").read_text())
        centers.append(Center(port, env, int(info.get("worker_pid") or info["pid"])))
    return centers


_CLUSTERS: list[Any] = []


def database_pids() -> list[int]:
    """The bench's PostgreSQL processes (the postmaster and its backends), for their CPU."""
    out = []
    for pg in _CLUSTERS:
        try:
            root = int((pg.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        out.append(root)
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == root:
                            out.append(int(entry))
                except (OSError, ValueError, IndexError):
                    pass
    return out


def stop_centers(centers: list[Center]) -> None:
    for c in centers:
        subprocess.run([str(BIN / "agent-hook"), "server", "stop"], env=c.env, capture_output=True)
    while _CLUSTERS:
        _CLUSTERS.pop().stop()


# -- a minimal HTTP/1.1 client ---------------------------------------------------------------------------

class Http:
    """One kept-alive connection; a request that meets a connection the server closed (idle past its
    timeout) is sent again on a new one."""

    def __init__(self, port: int, stats: Stats) -> None:
        self.port = port
        self.stats = stats
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.lock = asyncio.Lock()

    async def _connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writer.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(self, method: str, path: str, headers: str, body: bytes = b"") -> tuple[int, bytes]:
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n{headers}"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        async with self.lock:
            for attempt in (0, 1):
                fresh = self.writer is None
                if fresh:
                    await self._connect()
                assert self.reader is not None and self.writer is not None
                try:
                    self.writer.write(head + body)
                    status_line = await self.reader.readline()
                    if not status_line:
                        raise ConnectionResetError("closed")
                    length, close = 0, False
                    while True:
                        line = await self.reader.readline()
                        if line in (b"\r\n", b""):
                            break
                        low = line.lower()
                        if low.startswith(b"content-length:"):
                            length = int(line.split(b":", 1)[1])
                        elif low.startswith(b"connection:") and b"close" in low:
                            close = True
                    data = await self.reader.readexactly(length)
                    if close:
                        self.close()
                    return int(status_line.split()[1]), data
                except (ConnectionError, asyncio.IncompleteReadError, OSError):
                    self.close()
                    if attempt or fresh:
                        raise
                    self.stats.reconnects += 1
        raise AssertionError("unreachable")


# -- what is measured --------------------------------------------------------------------------------------

@dataclass
class Stats:
    measuring: bool = False
    ingest_ms: list[float] = field(default_factory=list)
    answer_ms: list[float] = field(default_factory=list)
    lag_ms: list[float] = field(default_factory=list)
    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    failures: int = 0
    reconnects: int = 0
    removed: int = 0
    board_messages: int = 0
    # (card key, "r" | "e") -> markers sent and not yet shown: (seq, sent at)
    pending: dict[tuple[str, str], collections.deque[tuple[int, float]]] = field(default_factory=dict)
    answered_at: dict[str, float] = field(default_factory=dict)  # request id -> the person's POST

    def status(self, route: str, code: int) -> None:
        if self.measuring:
            self.statuses[f"{route} {code}"] += 1

    def sent_marker(self, key: tuple[str, str], seq: int) -> None:
        self.pending.setdefault(key, collections.deque()).append((seq, time.monotonic()))

    def shown_marker(self, key: tuple[str, str], seq: int) -> None:
        q = self.pending.get(key)
        now = time.monotonic()
        while q and q[0][0] <= seq:
            _, sent = q.popleft()
            if self.measuring:
                self.lag_ms.append((now - sent) * 1000)

    def unseen(self, older_than_s: float) -> int:
        cut = time.monotonic() - older_than_s
        return sum(1 for q in self.pending.values() for _, sent in q if sent < cut)


def auth_headers(host: str) -> str:
    return f"Authorization: Bearer {TOKEN}\r\nX-Agent-Hooks-Host: {host}\r\nContent-Type: application/json\r\n"


class Host:
    """One simulated host: its long poll, reports, events, and (some of them) a request for a person."""

    def __init__(self, name: str, port: int, stats: Stats, requesting: bool, request_gap: float,
                 changed_per_report: int) -> None:
        self.name = name
        self.port = port
        self.stats = stats
        self.headers = auth_headers(name)
        self.poll = Http(port, stats)
        self.send = Http(port, stats)
        self.events = Http(port, stats)
        self.requesting = requesting
        self.request_gap = request_gap
        self.changed_per_report = changed_per_report
        self.tmux = [f"agent-{name}-{k}" for k in range(CARDS_PER_HOST)]
        self.report_seq = [0] * CARDS_PER_HOST
        self.event_seq = [0] * CARDS_PER_HOST
        self.requests: dict[str, dict[str, Any]] = {}
        self.n_requests = 0
        self.reported: dict[str, float] = {}  # pending request id -> when a report carrying it was answered 200
        self.report_now = asyncio.Event()
        self.turn = 0

    # -- reports --
    def _card(self, k: int) -> dict[str, Any]:
        return {"session_id": f"{self.name}-session-{k}", "tmux_session": self.tmux[k], "agent": "claude",
                "role": "worker", "own_state": "live", "current_tool": "Bash", "tool_running": True,
                "current_command": f"m{self.report_seq[k]}", "tool_calls": self.report_seq[k], "in_tmux": True,
                "reply": False, "last_activity": 1_700_000_000.0 + self.report_seq[k]}

    async def report(self, change: bool) -> None:
        keys = []
        if change:
            for _ in range(self.changed_per_report):
                k = self.turn % CARDS_PER_HOST
                self.turn += 1
                self.report_seq[k] += 1
                keys.append(k)
        doc: dict[str, Any] = {"full": False, "cards": [self._card(k) for k in range(CARDS_PER_HOST)]}
        if self.requesting:
            doc["approvals"] = list(self.requests.values())
            doc["approvals_full"] = True
        pending = [r["id"] for r in self.requests.values() if r["state"] == "pending"]
        for k in keys:
            self.stats.sent_marker((f"{self.name}/{self.tmux[k]}", "r"), self.report_seq[k])
        try:
            status, _ = await self.send.request("POST", "/api/fleet/report", self.headers, json.dumps(doc).encode())
        except OSError:
            self.stats.failures += 1
            return
        self.stats.status("report", status)
        if status == 200:
            now = time.monotonic()
            for rid in pending:
                self.reported.setdefault(rid, now)

    async def reports(self) -> None:
        await asyncio.sleep(random.uniform(0, REPORT_EVERY_S))
        if self.requesting:
            self._new_request()
        next_at = time.monotonic()
        while True:
            change = time.monotonic() >= next_at
            if change:
                next_at += REPORT_EVERY_S
            await self.report(change)
            self.report_now.clear()
            try:
                await asyncio.wait_for(self.report_now.wait(), max(0.0, next_at - time.monotonic()))
                await asyncio.sleep(0.05)  # the Reporter's burst window
            except TimeoutError:
                pass

    # -- requests for a person --
    def _new_request(self) -> None:
        self.n_requests += 1
        rid = f"{self.name}-req-{self.n_requests}"
        now = time.time()
        self.requests[rid] = {
            "id": rid, "host": "", "session_id": f"{self.name}-session-0", "kind": "permission", "tool_name": "Bash",
            "tool_input": json.dumps({"command": f"rm -rf build/{self.n_requests}"}), "tool_use_id": f"toolu_{rid}",
            "questions": None, "permission_suggestions": None, "gate": None, "on_timeout": "deny", "state": "pending",
            "created_at": now, "expires_at": None, "decision": None, "message": None, "interrupt": 0,
            "answers": None, "answered_by": None, "answered_via": None, "answered_where": None, "answered_at": None,
            "waited_ms": None, "note": None}
        # Settled ones are reported for a while (relay.RESOLVED_KEPT_S), then dropped.
        for old in [r for r, row in self.requests.items() if row["state"] != "pending"][:-2]:
            del self.requests[old]
        self.report_now.set()

    async def _later_request(self) -> None:
        await asyncio.sleep(self.request_gap)
        self._new_request()

    def _apply(self, control: dict[str, Any]) -> dict[str, Any] | None:
        if control.get("kind") != "approval" or control.get("action") != "answer":
            return None
        doc = json.loads(control["reason"])
        row = self.requests.get(doc["id"])
        if row is None:
            return {"seq": control["seq"], "status": 404, "error": "unknown", "approval": None}
        sent = self.stats.answered_at.pop(row["id"], None)
        if sent is not None and self.stats.measuring:
            self.stats.answer_ms.append((time.monotonic() - sent) * 1000)
        if row["state"] != "pending":
            return {"seq": control["seq"], "status": 409, "error": "already answered", "approval": row}
        row.update(state="allowed", decision=doc["decision"], answered_by=doc.get("by"), answered_via="remote",
                   answered_where=doc.get("where"), answered_at=time.time(),
                   waited_ms=int((time.time() - row["created_at"]) * 1000))
        self.reported.pop(row["id"], None)
        asyncio.get_running_loop().create_task(self._later_request())
        return {"seq": control["seq"], "status": 200, "error": None, "approval": dict(row)}

    # -- the long poll --
    async def controls(self) -> None:
        after, epoch, wait = 0, "", 0.0
        while True:
            path = f"/api/fleet/controls?host={self.name}&after={after}&epoch={epoch}&wait={wait:g}"
            try:
                status, body = await self.poll.request("GET", path, self.headers)
            except OSError:
                self.stats.failures += 1
                await asyncio.sleep(1.0)
                continue
            self.stats.status("controls", status)
            if status != 200:
                await asyncio.sleep(1.0)
                continue
            doc = json.loads(body)
            wait = POLL_WAIT_S
            if doc["epoch"] != epoch:
                epoch, after = doc["epoch"], 0
            results = [r for r in (self._apply(c) for c in doc["controls"]) if r is not None]
            if doc["controls"]:
                after = max(int(c["seq"]) for c in doc["controls"])
            if results:
                try:
                    status, _ = await self.poll.request("POST", "/api/fleet/replies", self.headers,
                                                        json.dumps({"results": results}).encode())
                    self.stats.status("replies", status)
                except OSError:
                    self.stats.failures += 1
                self.report_now.set()  # its store changed: reported within ~0.1 s

    # -- events --
    async def ingest(self, rate: float) -> None:
        names = ("tool_use", "to_review", "running")
        await asyncio.sleep(random.uniform(0, 1 / rate))
        next_at = time.monotonic()
        i = 0
        while True:
            k = i % CARDS_PER_HOST
            self.event_seq[k] += 1
            seq = self.event_seq[k]
            body = json.dumps({"tmux_session": self.tmux[k], "event": names[(i // CARDS_PER_HOST) % len(names)],
                               "metadata": f"Bash: m{seq}"}).encode()
            i += 1
            self.stats.sent_marker((f"{self.name}/{self.tmux[k]}", "e"), seq)
            t0 = time.monotonic()
            try:
                status, _ = await self.events.request("POST", "/api/hooks/ingest",
                                                      self.headers + f"Idempotency-Key: {self.name}-{i}\r\n", body)
            except OSError:
                self.stats.failures += 1
                status = 0
            if status:
                self.stats.status("ingest", status)
                if self.stats.measuring:
                    self.stats.ingest_ms.append((time.monotonic() - t0) * 1000)
            next_at += 1 / rate
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    def close(self) -> None:
        for c in (self.poll, self.send, self.events):
            c.close()


async def person(hosts: list[Host], port: int, stats: Stats, per_s: float) -> None:
    """Answers the oldest request that has been reported for at least 0.5 s, ``per_s`` times a second."""
    if per_s <= 0:
        return
    conns = [Http(port, stats) for _ in range(8)]
    free: asyncio.Queue[Http] = asyncio.Queue()
    for c in conns:
        free.put_nowait(c)
    headers = f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
    taken: set[str] = set()

    async def answer(rid: str) -> None:
        conn = await free.get()
        try:
            stats.answered_at[rid] = time.monotonic()
            status, _ = await conn.request("POST", f"/api/approvals/{rid}", headers, b'{"decision": "allow"}')
            stats.status("answer", status)
        except OSError:
            stats.failures += 1
        finally:
            free.put_nowait(conn)

    next_at = time.monotonic()
    while True:
        next_at += 1 / per_s
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        cut = time.monotonic() - 0.5
        ready = [(at, rid) for h in hosts for rid, at in h.reported.items() if at <= cut and rid not in taken]
        if ready:
            rid = min(ready)[1]
            taken.add(rid)
            asyncio.get_running_loop().create_task(answer(rid))


async def board(port: int, stats: Stats, connected: asyncio.Event) -> None:
    """The board's WebSocket: every card message resolves the markers it shows."""
    from websockets.asyncio.client import connect

    async with connect(f"ws://127.0.0.1:{port}/api/live", max_size=None) as ws:
        connected.set()
        async for raw in ws:
            msg = json.loads(raw)
            if msg["type"] == "card":
                stats.board_messages += 1
                card = msg["card"]
                key = f"{card['host']}/{card.get('tmux_session')}"
                command = card.get("current_command") or ""
                if command.startswith("m"):
                    stats.shown_marker((key, "r"), int(command[1:]))
                meta = card.get("metadata") or ""
                if meta.startswith("Bash: m"):
                    stats.shown_marker((key, "e"), int(meta[7:]))
            elif msg["type"] == "removed":
                if stats.measuring:
                    stats.removed += 1


async def run_once(centers: list[Center], n: int, duration: float, args: argparse.Namespace) -> dict[str, Any]:
    stats = Stats()
    rng = random.Random(n)
    hosts = [Host(f"h{i:04d}", centers[i % len(centers)].port, stats, rng.random() < args.requesting,
                  args.request_gap, args.changed_per_report) for i in range(n)]
    connected = asyncio.Event()
    tasks = [asyncio.create_task(board(centers[0].port, stats, connected))]
    await asyncio.wait_for(connected.wait(), 30)
    for h in hosts:
        tasks += [asyncio.create_task(h.controls()), asyncio.create_task(h.reports()),
                  asyncio.create_task(h.ingest(args.events_per_s))]
    tasks.append(asyncio.create_task(person(hosts, centers[0].port, stats, args.answers_per_s)))
    await asyncio.sleep(WARMUP_S)
    server0 = [cpu_seconds(c.pid) for c in centers]
    me0 = cpu_seconds("self")
    db0 = _db_cpu()
    t0 = time.monotonic()
    stats.measuring = True
    await asyncio.sleep(duration)
    stats.measuring = False
    wall = time.monotonic() - t0
    server_cpu = sum(cpu_seconds(c.pid) - s for c, s in zip(centers, server0, strict=True)) / wall * 100
    me = (cpu_seconds("self") - me0) / wall * 100
    db = (_db_cpu() - db0) / wall * 100
    unseen = stats.unseen(5.0)
    load = os.getloadavg()[0]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for h in hosts:
        h.close()
    errors = sum(v for k, v in stats.statuses.items() if k.split()[1].startswith("5")) + stats.failures
    return {"server": server_cpu, "ingest": pct(stats.ingest_ms, 0.95), "answer": pct(stats.answer_ms, 0.95),
            "lag": pct(stats.lag_ms, 0.99), "gen": me, "db": db, "answers": len(stats.answer_ms), "errors": errors,
            "unseen": unseen, "removed_per_s": stats.removed / wall, "load": load,
            "events": len(stats.ingest_ms), "statuses": dict(stats.statuses), "reconnects": stats.reconnects}


def _db_cpu() -> float:
    total = 0.0
    for pid in database_pids():
        try:
            total += cpu_seconds(pid)
        except OSError:
            pass  # a backend that ended meanwhile
    return total


def fmt(values: list[float | None], unit: str, scale: float = 1.0) -> str:
    got = [v * scale for v in values if v is not None]
    if not got:
        return "-"

    def one(v: float) -> str:
        if unit == "ms" and v >= 1000:
            return f"{v / 1000:.1f} s"
        return f"{v:.1f} {unit}" if v < 10 and unit != "ms" else f"{v:.0f} {unit}"

    mid = one(statistics.median(got))
    if len(got) == 1:
        return mid
    return f"{mid} [{one(min(got)).split()[0]}-{one(max(got))}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", default="25,100", help="comma-separated numbers of simulated hosts")
    ap.add_argument("--duration", type=float, default=30.0, help="measured seconds per run (after an 8 s warm-up)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per number of hosts (the range is printed)")
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite",
                    help="the command center's fleet store (postgres: a cluster of the bench's own)")
    ap.add_argument("--centers", default="1", help="command-center processes sharing the store (postgres);"
                    " comma-separated to compare them (each is run over every --hosts)")
    ap.add_argument("--target-ms", type=float, default=1000.0,
                    help="the answer -> host p95 a number of hosts is held at, for the comparison line")
    ap.add_argument("--events-per-s", type=float, default=0.5, help="ingest events per host per second")
    ap.add_argument("--requesting", type=float, default=0.2, help="share of hosts that hold requests for a person")
    ap.add_argument("--answers-per-s", type=float, default=2.0, help="answers the simulated person gives per second")
    ap.add_argument("--request-gap", type=float, default=3.0, help="seconds from an answer to the host's next request")
    ap.add_argument("--changed-per-report", type=int, default=1, help="cards (of 4) that changed in each report")
    ap.add_argument("--verbose", action="store_true", help="print each run's statuses")
    args = ap.parse_args()
    ns = [int(x) for x in args.hosts.split(",") if x.strip()]
    counts = [int(x) for x in str(args.centers).split(",") if x.strip()]
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    print(f"{args.backend}, {'/'.join(map(str, counts))} center(s); {os.cpu_count()} cores; per host: {CARDS_PER_HOST}"
          f" cards reported every {REPORT_EVERY_S:g} s, {args.events_per_s:g} events/s, a long poll;"
          f" {args.requesting:.0%} of hosts hold requests, answered {args.answers_per_s:g}/s; {args.duration:g} s"
          f" measured x {args.repeat}")
    rows = []
    for n in ns:
        for count in counts:  # interleaved: a machine that gets busier meanwhile weighs on every count alike
            runs = []
            for _ in range(args.repeat):
                centers = start_centers(args.backend, count, n)
                try:
                    runs.append(asyncio.run(run_once(centers, n, args.duration, args)))
                finally:
                    stop_centers(centers)
                if args.verbose:
                    print(f"  {n} hosts, {count} center(s): {runs[-1]}", flush=True)
            rows.append((count, n, runs))
            print(f"  done {n} hosts on {count} center(s) (load average"
                  f" {statistics.median(x['load'] for x in runs):.1f})", flush=True)
    print()
    head = ("centers", "hosts", "server CPU", "ingest p95", "answer -> host p95", "board lag p99", "generator CPU")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for count, n, r in sorted(rows, key=lambda row: (row[0], row[1])):
        print(f"| {count} | {n:,} | {fmt([x['server'] for x in r], '%')} | {fmt([x['ingest'] for x in r], 'ms')}"
              f" | {fmt([x['answer'] for x in r], 'ms')} | {fmt([x['lag'] for x in r], 'ms')}"
              f" | {fmt([x['gen'] for x in r], '%')} |")
    print()
    for count, n, r in sorted(rows, key=lambda row: (row[0], row[1])):
        print(f"{n:,} hosts, {count} center(s): answers {sum(x['answers'] for x in r)},"
              f" events {sum(x['events'] for x in r)},"
              f" errors (5xx, failed) {sum(x['errors'] for x in r)}, reconnects {sum(x['reconnects'] for x in r)},"
              f" unseen markers {statistics.median(x['unseen'] for x in r):.0f},"
              f" removed/s {statistics.median(x['removed_per_s'] for x in r):.1f},"
              f" load average {statistics.median(x['load'] for x in r):.1f}"
              + (f", PostgreSQL CPU {fmt([x['db'] for x in r], '%')}" if args.backend == "postgres" else ""))
        per_host = [x["server"] * 10 / n for x in r]  # ms of server CPU per host per second
        print(f"  server CPU per host {fmt(per_host, 'ms/s', 1.0).replace(' ms/s', '')} ms a second: one free core"
              f" would hold ~{1000 / statistics.median(per_host):,.0f} such hosts (CPU is what a busy machine"
              " distorts least; the latencies above depend on what else runs)")
    if len(counts) > 1 or len(ns) > 1:
        # The most hosts each number of centers held with every run's answer p95 within the target (the
        # median would hide a run that was not).
        held = {}
        for count in counts:
            ok = [n for c, n, r in rows if c == count and all(x["answer"] is not None and x["answer"] <= args.target_ms
                                                              and not x["errors"] for x in r)]
            held[count] = max(ok, default=0)
        print()
        said = ", ".join(f"{c} center(s): {held[c]:,} hosts" for c in counts)
        base = held[counts[0]]
        ratios = "" if not base or len(counts) < 2 else " (" + ", ".join(
            f"{held[c] / base:.2f}x of {counts[0]}" for c in counts[1:]) + ")"
        print(f"held at answer -> host p95 <= {args.target_ms:g} ms in every run: {said}{ratios}"
              " (the hosts tried: " + ", ".join(f"{n:,}" for n in ns) + ")")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
