"""Who may use the server's routes: the front door every request passes, then who the caller is.

The front door (:func:`front_door`, run by :class:`~agent_hooks.server.fastpath.FastPath`
before any route, hook routes, ``/status``, ``/health``, the board, its
WebSocket and static files alike) keeps browsers out:

* a request carrying an ``Origin`` that is not this server's own is refused
  (403), so a web page the user happens to visit cannot post to loopback (a
  "simple" cross-site POST needs no preflight);
* a request whose ``Host`` is not this server's own name is refused (403). Its own names
  are the loopback literals ``127.0.0.1``, ``localhost`` and ``[::1]`` with the server's own
  port (:attr:`ServerState.door_hosts`, one set lookup), and the names configured for serving
  other hosts (``[fleet] names``), for which a caller let in for who it is (the server's own
  uid, or root) must also show the fleet token. Nothing else: a page whose name was rebound
  to our address (DNS rebinding: ``127.0.0.1.evil.example``, ``127.evil.example``) is
  same-origin to the browser, but it cannot choose ``Host``, and it has no token.

Then each route asks who the caller is, once: :func:`check` returns a
:class:`Caller` (kind, name) or refuses, and the route acts from it. Nothing a
caller writes in a header or a body says who it is:

* **A paired host** (``host``): ``Authorization: Bearer ah1.<id>.<secret>``, the
  credential ``agent-hook fleet join`` got for it (agent_hooks.center.credentials).
  It speaks only for itself: its name is the credential's, and naming another
  host (the ``X-Agent-Hooks-Host`` header, ``?host=``, a report's body) is 403.
* **A paired device** (``device``): a person's browser, holding its credential
  in the ``agent_hooks_device`` cookie (set by ``/pair``). It may do what the
  person does on the board (answer, reply, cancel), and every such act is
  recorded under the device's name.
* **The owner** (``owner``): the server's own user on loopback with no
  credential shown ("own user" is the uid the kernel shows for the caller's
  socket, :mod:`agent_hooks.server.peer`, so another local user on the same
  loopback is not waved through), or anyone showing the shared fleet token
  (``Authorization: Bearer <token>``, or the cookie ``/?token=`` sets). The
  owner may do everything, and may still name the host it speaks for: a host
  not yet paired keeps working with the shared token (doctor says so).

A paired credential, once shown, decides: a revoked or unknown one is 401 even
from the owner's uid on loopback. Anyone else without a credential: 401. Each
route says which kinds it takes (:data:`PEOPLE`, :data:`HOSTS`, :data:`ANYONE`);
another kind gets 403.

The hook routes and ``/status`` answer only the server's own uid; ``/health``
tells anyone that it is up.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection

from agent_hooks import fleet
from agent_hooks.center import credentials
from agent_hooks.paths import Paths
from agent_hooks.server import peer
from agent_hooks.server.jsonout import JSONResponse

if TYPE_CHECKING:  # annotations only: app.py imports this module to build the front door
    from agent_hooks.server.app import ServerState

COOKIE = "agent_hooks_fleet"
DEVICE_COOKIE = "agent_hooks_device"
# The loopback literals a Host header may name (with the server's own port): never a name that merely
# starts like one (``127.0.0.1.evil.example``, ``localhost.evil.example``).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
# How the front door's problem starts when it could not check the caller (answered 503, not 403).
CANNOT_CHECK = "cannot check the caller now"


def is_loopback(address: str | None) -> bool:
    """True when ``address`` is a loopback IP address (``127.0.0.1``, ``127.0.0.2``, ``::1``): an address
    literal, never a name (``127.evil.example`` is a name, whatever it starts with)."""
    if not address:
        return False
    if address == "127.0.0.1" or address == "::1":  # the common case, without ipaddress's parser
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1, from a dual-stack socket
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def door_hosts(port: int) -> frozenset[bytes]:
    """The ``Host`` values that name this server on loopback: each loopback literal with ``port``
    (and without one only when ``port`` is 80, as a client then sends it)."""
    hosts = {f"{name}:{port}".encode() for name in LOOPBACK_NAMES}
    if port == 80:
        hosts |= {name.encode() for name in LOOPBACK_NAMES}
    return frozenset(hosts)


def host_name_of(host: str) -> str:
    """A ``Host`` header's name without its port, in lower case (``[::1]`` keeps its brackets). A value
    that is not ``name[:port]`` comes back whole, and so matches no configured name."""
    text = host.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        name, rest = (text[: end + 1], text[end + 1:]) if end > 0 else (text, "")
    else:
        name, sep, port = text.rpartition(":")
        name, rest = (name, sep + port) if sep else (text, "")
    if rest and not (rest[0] == ":" and rest[1:].isdigit()):
        return text
    return name


def fleet_names(config: dict[str, Any]) -> frozenset[str]:
    """``[fleet] names``: the names (or addresses) other hosts call this server by, as
    :func:`host_name_of` gives them (an IPv6 address in brackets)."""
    names = config["fleet"].get("names")
    if not isinstance(names, list):
        return frozenset()
    out = set()
    for entry in names:
        if not isinstance(entry, str) or not entry.strip():
            continue
        try:
            if ipaddress.ip_address(entry.strip()).version == 6:
                entry = f"[{entry.strip()}]"
        except ValueError:
            pass
        out.add(host_name_of(entry))
    return frozenset(out)


def same_user(state: ServerState, conn: HTTPConnection) -> bool:
    """The caller is a process of the server's own user (or root)."""
    # One lookup for the whole server (agent_hooks.server.peer: sock_diag, /proc as the fallback).
    uid = peer.scope_uid(conn.scope)
    return uid is not None and uid in (os.geteuid(), 0)


def presented_token(conn: HTTPConnection) -> str | None:
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return conn.cookies.get(COOKIE) or None


class TokenFile:
    """The fleet token as the server knows it: read once, and again only when its file changes.

    Each request that shows a token used to open and read the file: at hundreds of hosts a good share
    of the event loop, and once the process ran out of file descriptors the read failed and every
    token-holding caller was told 401, which a sender takes as final and drops what it sent. Now the
    file is looked at (a stat) at most every :data:`RECHECK_S`, read again only when the stat differs,
    and a file that cannot be read is never taken for "no token": the last value read stays in use,
    and with none yet the caller is told 503, to try again (:class:`TokenUnreadable`).
    ``$AGENT_HOOKS_FLEET_TOKEN``, when set, wins, as it does for :func:`agent_hooks.fleet.token`.
    """

    RECHECK_S = 1.0

    def __init__(self, env: Mapping[str, str], clock: Callable[[], float] = time.monotonic) -> None:
        self._from_env = fleet.read_secret(None, env, fleet.TOKEN_ENV)
        self._clock = clock
        self._path: str | None = None
        self._stamp: tuple[int, int, int] | None = None
        self._value: str | None = None
        self._next_look = 0.0

    def value(self, paths: Paths, config: dict[str, Any]) -> str | None:
        """The token, or None when none is set; :class:`TokenUnreadable` when its file cannot be read
        and no earlier value is known."""
        if self._from_env is not None:
            return self._from_env
        path = fleet.token_path(paths, config)
        now = self._clock()
        if path == self._path and now < self._next_look:
            return self._value
        try:
            st = os.stat(path)
        except FileNotFoundError:
            self._remember(path, None, None, now)
            return None
        except OSError as exc:
            return self._unreadable(path, exc)
        stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        if path != self._path or stamp != self._stamp:
            try:
                text = fleet.read_secret(path)
            except FileNotFoundError:
                text, stamp = None, None  # gone since the stat
            except OSError as exc:
                return self._unreadable(path, exc)
            self._remember(path, stamp, text, now)
        else:
            self._next_look = now + self.RECHECK_S
        return self._value

    def recent(self) -> tuple[bool, str | None]:
        """(True, the token) while the last look is recent enough to answer without one; (False, None)
        when :meth:`value` must look (which needs the configuration: its file's path)."""
        if self._from_env is not None:
            return True, self._from_env
        if self._path is not None and self._clock() < self._next_look:
            return True, self._value
        return False, None

    def _remember(self, path: str, stamp: tuple[int, int, int] | None, value: str | None, now: float) -> None:
        self._path, self._stamp, self._value = path, stamp, value
        self._next_look = now + self.RECHECK_S

    def _unreadable(self, path: str, exc: Exception) -> str | None:
        if path == self._path and self._value is not None:
            return self._value  # the last value read: a passing failure (no descriptor left) changes nothing
        raise TokenUnreadable(f"the fleet token file {path} cannot be read now ({exc}): try again")


class TokenUnreadable(OSError):
    """The fleet token's file exists but cannot be read, and no earlier value is known: the caller is
    told 503 (try again), never 401."""


def token_ok(state: ServerState, presented: str | None) -> bool:
    """Whether ``presented`` is the fleet token; :class:`Refused` (503) when the token cannot be read now."""
    if not presented:
        return False
    try:
        # The configuration (a stat of its file) only when the token file is due a look.
        known, expected = state.token_file.recent()
        if not known:
            expected = state.token_file.value(state.paths, state.config)
    except TokenUnreadable as exc:
        state.stats.count("token_unreadable")
        raise Refused(503, str(exc)) from None
    return bool(expected and hmac.compare_digest(expected.encode(), presented.encode()))


def _origin_problem(origin: bytes, host: bytes | None) -> str | None:
    """Why a request carrying ``Origin`` is not from this server's own pages, or None."""
    text = origin.decode("latin-1")
    if text == "null":
        return "cross-site request refused (Origin null)"
    try:
        netloc = urlsplit(text).netloc
    except ValueError:
        netloc = ""
    if host is None or netloc.lower() != host.decode("latin-1").lower():
        return f"cross-site request refused (Origin {text[:100]} is not this server)"
    return None


def front_door(state: ServerState, scope: Any) -> str | None:
    """Why the front door refuses this request (403), or None to let it on to its route.

    Every http and WebSocket request passes here first (see the module docstring). Cheap on the
    path Claude Code takes (no Origin, a loopback Host): one pass over the headers, one set lookup.
    """
    host: bytes | None = None
    origin: bytes | None = None
    origins = 0
    for key, value in scope["headers"]:
        if key == b"host":
            if host is None:
                host = value
        elif key == b"origin":
            origin = value
            origins += 1
    if origin is not None:
        if origins > 1:
            return "cross-site request refused (more than one Origin)"
        problem = _origin_problem(origin, host)
        if problem:
            return problem
    if host in state.door_hosts:  # the common case: one set lookup
        return None
    return _other_host(state, scope, host)


def _other_host(state: ServerState, scope: Any, host: bytes | None) -> str | None:
    """The front door's answer for a ``Host`` that is not, byte for byte, a loopback literal with our port."""
    text = (host or b"").decode("latin-1")
    if text.strip().lower().encode("latin-1") in state.door_hosts:
        return None  # the same, spelt in capitals ("LOCALHOST:24817")
    name = host_name_of(text)
    if not name or name not in fleet_names(state.config):
        return (f"Host {text[:100]!r} is not this server's name (DNS rebinding?): call 127.0.0.1:{state.port},"
                " or name it in [fleet] names to serve other hosts by that name")
    # A configured name: a caller let in for who it is must show the token, which a rebound page cannot.
    if peer.scope_uid(scope) not in (os.geteuid(), 0):
        return None  # anyone else needs the token on every route that does anything anyway
    conn = HTTPConnection(scope)
    try:
        if token_ok(state, presented_token(conn) or conn.query_params.get("token")):
            return None
    except Refused as exc:  # the token file cannot be read now: not a refusal, a "try again"
        return f"{CANNOT_CHECK}: {exc.message}"
    return (f"Host {text[:100]!r} is a name for other hosts ([fleet] names): send the fleet token"
            f" (Authorization: Bearer <token>), or call 127.0.0.1:{state.port}")


async def refuse(scope: Any, receive: Any, send: Any, problem: str) -> None:
    """The front door's answer: 403 with the reason, or 503 when it could not check (the token could not
    be read now, :data:`CANNOT_CHECK`). A WebSocket is closed before it is accepted."""
    from agent_hooks.server import fastpath

    status = 503 if problem.startswith(CANNOT_CHECK) else 403
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 4000 + status, "reason": problem[:120]})
        return
    headers = [(b"retry-after", b"1")] if status == 503 else None
    await fastpath.send_json(send, status, {"error": problem}, headers)


CallerKind = Literal["owner", "host", "device"]
OWNER: CallerKind = "owner"
HOST: CallerKind = "host"
DEVICE: CallerKind = "device"
# Who each route takes: the board and a person's acts; the hosts' own traffic; both.
PEOPLE: frozenset[CallerKind] = frozenset({OWNER, DEVICE})
HOSTS: frozenset[CallerKind] = frozenset({OWNER, HOST})
ANYONE: frozenset[CallerKind] = frozenset({OWNER, HOST, DEVICE})


class Refused(Exception):
    """The answer to a caller who may not do this: 401 (who are you?) or 403 (not you), with why.
    Route handlers let it rise (the app answers it); raw ASGI routes send :meth:`response`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else \
            {"Retry-After": "1"} if self.status == 503 else None
        return JSONResponse({"error": self.message}, status_code=self.status, headers=headers)


@dataclass(frozen=True)
class Caller:
    """Who a request comes from, as its credential (or the kernel, for the owner on loopback) shows it."""

    kind: CallerKind
    # A paired host's or device's name; the owner's is how it showed itself: "uid 1000 (alice)", "fleet token".
    name: str
    address: str  # the client's address ("?" when unknown)
    loopback_uid: bool = False  # the owner, known by its uid on loopback (not by the token)

    @property
    def label(self) -> str:
        """Who acted, for the record (an approval's ``answered_by``, the center's ``fleet_actions``)."""
        return f"host {self.name}" if self.kind == HOST else self.name

    def speaks_for(self, named: str | None) -> str | None:
        """The host this caller's traffic is about. A paired host is its own name, and naming another
        (``named``: a header, ``?host=``, a body) is refused; the owner may name any host (None when it
        names none); a device speaks for no host."""
        if self.kind == HOST:
            if named is not None and named != self.name:
                raise Refused(403, f"this is host {self.name!r}'s credential: it speaks only for {self.name!r},"
                                   f" not for {named[:100]!r}")
            return self.name
        if self.kind == DEVICE:
            raise Refused(403, f"device {self.name!r} is a person's browser: it speaks for no host")
        return named

    def record(self, conn: sqlite3.Connection, *, at: float, action: str, target: str, status: int,
               card: str | None = None, host: str | None = None, note: str | None = None) -> None:
        """Record what this caller did through the command center (``fleet_actions``), in the caller's
        transaction: who is this caller, never a name from the request."""
        credentials.record_action(conn, at=at, action=action, target=target, status=status, card=card, host=host,
                                  by_kind=self.kind, by_name=self.label, by_address=self.address, note=note)

    def may_act_on(self, host: str) -> None:
        """Refuse (403) unless this caller may act on ``host``'s sessions and requests: a paired host
        only on its own; the owner and devices on every host's."""
        if self.kind == HOST and host != self.name:
            raise Refused(403, f"host {self.name!r} may act only on its own sessions and requests,"
                               f" not on {host or 'the command center'}'s")


def named_host(conn: HTTPConnection) -> str | None:
    """The host a request's ``X-Agent-Hooks-Host`` header names (None: no header). Only the owner's
    naming is taken (:meth:`Caller.speaks_for`); a value that is not a plain name is kept as given
    (clipped), so that a paired host's credential refuses it rather than taking it for no header."""
    raw = conn.headers.get(fleet.HOST_HEADER)
    if not raw:
        return None
    return fleet.clean_host(raw) or raw[:100]


def _uid_label(uid: int | None) -> str:
    try:
        import pwd

        name = pwd.getpwuid(uid if uid is not None else os.geteuid()).pw_name
    except (KeyError, ImportError):
        name = "?"
    return f"uid {uid} ({name})"


def _bearer(conn: HTTPConnection) -> str | None:
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return None


class CredentialCache:
    """Paired credentials as last verified, so that a request learns who it is without a hop to a thread
    and a read of the store.

    Exact, not merely brief: an entry is used only while the credentials table is as it was when it was
    read. Each use costs one ``PRAGMA data_version`` on the event loop's own connection; when another
    connection committed since, one small query of the table (how many, the newest pairing, the newest
    revocation) says whether credentials changed, and if they did every entry is dropped. A revoke
    (``agent-hook fleet revoke``, a re-pairing) so takes effect at the very next request. An entry is
    also read again after :data:`credentials.SEEN_EVERY_S`, so that its last-seen time is kept."""

    MAX_ENTRIES = 10_000

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._found: dict[str, tuple[float, credentials.Found | None]] = {}
        self._version: int | None = None
        self._stamp: tuple[Any, ...] | None = None

    def _usable(self, state: ServerState) -> bool:
        hub = state.hub
        if hub is not None and hub.postgres:
            # Credentials in PostgreSQL: every center hears of a pairing or a revocation (fleetstore's
            # NOTIFY, counted by the hub), so the entries hold until one comes.
            if hub.credentials_version != self._version:
                self._found.clear()
                self._version = hub.credentials_version
            return True
        store = state.loop_store()
        if store is None:  # no connection on the loop (yet): every request reads, as before
            self._found.clear()
            return False
        try:
            version = store.conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._version:
                stamp = tuple(store.conn.execute("SELECT count(*), max(paired_at), max(revoked_at)"
                                                 " FROM fleet_credentials").fetchone())
                if stamp != self._stamp:
                    self._found.clear()
                self._version, self._stamp = version, stamp
        except sqlite3.Error:
            self._found.clear()
            self._version = self._stamp = None
            return False
        return True

    def get(self, state: ServerState, presented: str) -> tuple[bool, credentials.Found | None]:
        """(True, what it is) when known and still valid; (False, None) when it must be read."""
        if not self._usable(state):
            return False, None
        hit = self._found.get(credentials.sha256(presented))
        if hit is None or self._clock() >= hit[0]:
            return False, None
        return True, hit[1]

    def put(self, presented: str, found: credentials.Found | None) -> None:
        if len(self._found) >= self.MAX_ENTRIES:
            self._found.clear()
        self._found[credentials.sha256(presented)] = (self._clock() + credentials.SEEN_EVERY_S, found)


def store_errors() -> tuple[type[BaseException], ...]:
    from agent_hooks.center import fleetstore

    return fleetstore.errors()


def _verify(state: ServerState, presented: str, address: str) -> credentials.Found | None:
    """A paired credential's row (on a pool thread: it reads the store); its last-seen time noted."""
    from agent_hooks.center import fleetstore

    with fleetstore.borrowed(state) as store:
        found = credentials.verify(store.conn, presented)
        now = time.time()
        if found is not None and found.refused is None and found.seen_due(now):
            try:
                with store.write() as conn:
                    credentials.seen(conn, found.credential_id, now, address)
            except fleetstore.errors():  # when it was last seen is a nicety: never refuse a caller for it
                pass
    return found


async def identify(state: ServerState, conn: HTTPConnection) -> Caller:
    """Who the caller is (see the module docstring), or :class:`Refused` (401)."""
    client = conn.scope.get("client")
    address = str(client[0]) if client else "?"
    loopback = client is not None and is_loopback(client[0])
    bearer = _bearer(conn)
    device = conn.cookies.get(DEVICE_COOKIE) or None
    paired = bearer if credentials.is_paired_credential(bearer) else None
    if bearer is None and credentials.is_paired_credential(device):
        paired = device
    if paired is not None:
        known, found = state.credential_cache.get(state, paired)
        if not known:
            try:
                found = await state.run_blocking(_verify, state, paired, address)
            except store_errors() as exc:
                state.stats.count("credential_check_failed")
                raise Refused(503, f"the credential cannot be checked now ({exc}): try again") from None
            state.stats.count("credential_read")
            state.credential_cache.put(paired, found)
        if found is None or found.refused is not None:
            state.stats.count("unauthorized")
            raise Refused(401, found.refused if found is not None and found.refused else
                          "unknown credential: pair again (agent-hook fleet pair on the command center)")
        return Caller(HOST if found.kind == credentials.HOST else DEVICE, found.name, address)
    presented = bearer or conn.cookies.get(COOKIE)
    own_user = loopback and same_user(state, conn)
    try:
        if presented and token_ok(state, presented):  # the token is looked at only when something was shown
            return Caller(OWNER, "fleet token", address)
    except Refused:
        if not own_user:
            raise  # 503: the token cannot be read now, try again (never 401, which a sender takes as final)
    if own_user:
        return Caller(OWNER, _uid_label(peer.scope_uid(conn.scope)), address, loopback_uid=True)
    state.stats.count("unauthorized")
    why = "another user's process on loopback" if loopback else "not on loopback"
    raise Refused(401, f"a credential is required ({why}): a paired host's (agent-hook fleet join), a paired"
                       " device's (/pair), or the owner's fleet token (Authorization: Bearer <token>)")


async def check(state: ServerState, conn: HTTPConnection, allow: frozenset[CallerKind] = ANYONE) -> Caller:
    """The caller, when its kind is in ``allow``; else :class:`Refused`: 401 for no (or a revoked)
    credential, 403 for a kind this route does not take. Origin and Host were checked at the front
    door (:func:`front_door`), before any route."""
    caller = await identify(state, conn)
    if caller.kind not in allow:
        if caller.kind == HOST:
            raise Refused(403, f"host {caller.name!r}'s credential is for its own traffic (its sessions, reports"
                               " and controls): a person's browser needs its own (agent-hook fleet pair --device NAME)")
        raise Refused(403, f"device {caller.name!r} is a person's browser: this route is for a host's own traffic")
    return caller
