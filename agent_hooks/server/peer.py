"""Who is on the other end of a loopback connection: the uid the kernel shows for it.

Linux lists every TCP socket with its owner's uid in /proc/net/tcp (and tcp6).
The caller's socket is the one whose local address is the request's client
address and whose remote address is ours. Only the server's own uid may call
the hook endpoints: a per-user secret would have to sit in settings.json,
which is often readable by everyone (0644), while the kernel's answer needs
nothing stored and cannot be copied.
"""

from __future__ import annotations

import ipaddress
import os


def _hex_addr(host: str, port: int) -> str:
    """An address as /proc/net/tcp* prints it: each 32-bit word in host (little-endian) order."""
    packed = ipaddress.ip_address(host).packed
    words = [packed[i:i + 4] for i in range(0, len(packed), 4)]
    return "".join(w[::-1].hex().upper() for w in words) + f":{port:04X}"


def peer_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the socket ``client`` connected to ``server``; None when not found."""
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


def same_user(client: tuple[str, int] | None, server: tuple[str, int] | None) -> bool:
    """True when the caller runs as the server's own uid."""
    if not client or not server:
        return False
    return peer_uid((client[0], int(client[1])), (server[0], int(server[1]))) == os.geteuid()
