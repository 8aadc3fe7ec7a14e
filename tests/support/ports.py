"""Loopback ports for the servers the tests start: a free one, waits until one listens or is closed, and
one that never answers a connection (a machine that is down)."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager


def _below_ephemeral() -> tuple[int, int] | None:
    """Ports under the kernel's ephemeral range (ip_local_port_range), which no outgoing connection takes."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return (max(10000, low - 12000), low) if low > 12000 else None


def free_port() -> int:
    """A port nothing listens on at 127.0.0.1 now.

    Picked at random below the kernel's ephemeral range: a port the kernel picks (bind to port 0) is one
    it also hands to outgoing connections, and the tests make thousands (hooks, clients, long polls), so
    under load one of them sometimes took it before the server bound it ("Address already in use", in two
    full runs in seven here). The kernel's pick where that range cannot be read."""
    span = _below_ephemeral()
    for _ in range(100 if span is not None else 0):
        assert span is not None
        port = random.randrange(*span)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, timeout: float = 10.0) -> None:
    """Until something accepts connections on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


def wait_closed(port: int, timeout: float = 10.0) -> None:
    """Until nothing accepts connections on 127.0.0.1:``port`` (then another program can bind it).

    A killed supervisor's worker shares its listening socket and dies with it a moment later:
    under load, later than the supervisor's pid is gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except ConnectionRefusedError:
            return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"port {port} still takes connections")


@contextmanager
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 where a connection is neither accepted nor refused, as at a machine that is
    down: it listens with a full backlog (its queue filled by connections never accepted), so the
    kernel drops every new SYN and the client's connect times out."""
    server = socket.socket()
    held: list[socket.socket] = []
    try:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = int(server.getsockname()[1])
        for _ in range(3):
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            held.append(c)
        time.sleep(0.1)
        yield port
    finally:
        for c in held:
            c.close()
        server.close()
