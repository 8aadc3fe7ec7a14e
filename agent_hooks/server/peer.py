"""Who is on the other end of a loopback connection: the uid the kernel shows for it.

The caller's socket is the one whose local address is the request's client
address and whose remote address is ours; Linux knows its owner's uid. Only
the server's own uid may call the hook endpoints: a per-user secret would
have to sit in settings.json, which is often readable by everyone (0644),
while the kernel's answer needs nothing stored and cannot be copied.

The kernel is asked for that one socket over netlink (sock_diag, as `ss`
does: tens of microseconds). /proc/net/tcp lists every socket of the host and
costs milliseconds once TIME_WAIT sockets pile up (each hook call is a new
connection), so it is only the fallback where sock_diag is unavailable.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
import threading
from typing import Any

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NOCOOKIE = 0xFFFFFFFF
_TCP_LISTEN = 10


# One netlink socket for the process, reused by every lookup (a request and its answer under
# the lock): opening one per call cost a socket(), a close() and their syscalls each request.
_NL: socket.socket | None = None
_NL_LOCK = threading.Lock()


def _packed(host: str) -> bytes:
    raw = socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    return raw + b"\0" * (16 - len(raw))


def _diag_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid of the TCP socket (client -> server), from one sock_diag exact lookup.

    None: no such socket. Raises OSError when netlink is unavailable (the caller falls back to /proc).
    """
    global _NL
    family = socket.AF_INET6 if ":" in client[0] else socket.AF_INET
    # struct inet_diag_req_v2 { u8 family, protocol, ext, pad; u32 states; struct inet_diag_sockid id }
    sockid = (struct.pack("!HH", client[1], server[1]) + _packed(client[0]) + _packed(server[0])
              + struct.pack("=III", 0, _NOCOOKIE, _NOCOOKIE))
    req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    msg = struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + req
    with _NL_LOCK:
        if _NL is None:
            _NL = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
            _NL.settimeout(1.0)
        try:
            _NL.sendto(msg, (0, 0))
            data = _NL.recv(8192)
        except OSError:
            _NL.close()
            _NL = None
            raise
    if len(data) < 16 + 72 or struct.unpack_from("=H", data, 4)[0] != _SOCK_DIAG_BY_FAMILY:
        return None  # NLMSG_ERROR: no socket with that address
    # The exact lookup falls back to a listener on the client's address: only the caller's own
    # connected socket (client -> server) counts, never a listening one that happens to match.
    state = data[16 + 1]
    sport, dport = struct.unpack_from("!HH", data, 16 + 4)
    if state == _TCP_LISTEN or (sport, dport) != (client[1], server[1]):
        return None
    # struct inet_diag_msg { u8 family, state, timer, retrans; sockid (48); u32 expires, rqueue, wqueue, uid, inode }
    return int(struct.unpack_from("=I", data, 16 + 64)[0])


def _hex_addr(host: str, port: int) -> str:
    """An address as /proc/net/tcp* prints it: each 32-bit word in host (little-endian) order."""
    packed = ipaddress.ip_address(host).packed
    words = [packed[i:i + 4] for i in range(0, len(packed), 4)]
    return "".join(w[::-1].hex().upper() for w in words) + f":{port:04X}"


def peer_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the socket ``client`` connected to ``server``; None when not found."""
    try:
        return _diag_uid(client, server)
    except (OSError, ValueError, struct.error):
        return _proc_uid(client, server)


def _proc_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The same answer from /proc/net/tcp(6): slower, for hosts without sock_diag."""
    v6 = ":" in client[0]
    key = f"{_hex_addr(client[0], client[1])} {_hex_addr(server[0], server[1])}".encode()
    try:
        with open("/proc/net/tcp6" if v6 else "/proc/net/tcp", "rb") as f:
            table = f.read()
    except OSError:
        return None
    at = table.find(key)
    if at < 0:
        return None
    end = table.find(b"\n", at)
    fields = table[at:end if end >= 0 else len(table)].split()
    # local rem st tx:rx tr:when retrnsmt uid ...
    try:
        return int(fields[6])
    except (IndexError, ValueError):
        return None


def caller_uid(client: Any, server: Any) -> int | None:
    """The uid of the caller of an ASGI connection (its scope's ``client`` and ``server``); None: unknown."""
    if not client or not server:
        return None
    try:
        return peer_uid((client[0], int(client[1])), (server[0], int(server[1])))
    except (ValueError, TypeError):
        return None


def same_user(client: Any, server: Any) -> bool:
    """True when the caller runs as the server's own uid."""
    return caller_uid(client, server) == os.geteuid()


def same_user_scope(scope: Any) -> bool:
    """:func:`same_user` for an ASGI scope (using the uid its connection already looked up)."""
    return scope_uid(scope) == os.geteuid()


# The scope key where the server's protocol (:func:`protocol_class`) leaves the caller's uid.
SCOPE_KEY = "agent_hooks.peer_uid"
_UNKNOWN = object()


def scope_uid(scope: Any) -> int | None:
    """The caller's uid for an ASGI scope: looked up once per connection by :func:`protocol_class`'s
    protocol (a socket's owner cannot change while it is open, and a kept-alive connection sends many
    requests), else asked of the kernel now."""
    uid = scope.get(SCOPE_KEY, _UNKNOWN)
    if uid is _UNKNOWN:
        return caller_uid(scope.get("client"), scope.get("server"))
    return uid


def protocol_class() -> type:
    """uvicorn's httptools protocol, asking the caller's uid once when the connection is made."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class PeerProtocol(HttpToolsProtocol):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._peer_uid = caller_uid(self.client, self.server)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.scope[SCOPE_KEY] = self._peer_uid  # type: ignore[literal-required]

    return PeerProtocol
