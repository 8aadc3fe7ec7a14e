"""What the executables and the CLI know about the server without importing it (stdlib only).

SessionStart uses this on the hook path: a connect probe, the server file, the
build id. Starlette and uvicorn are never imported here.
"""

from __future__ import annotations

import _socket
import json
import os

from agent_hooks import __version__
from agent_hooks.paths import Paths

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HOST = "127.0.0.1"
# Claude Code's http hooks POST to HOOK_PATH + "<Event>" (agent_hooks.wiring.http).
HOOK_PATH = "/hooks/"

# Variables the executables read from the session's environment. Over http they
# travel as headers (the hook entry's `headers` + `allowedEnvVars`); an empty
# header means unset. Nothing else from a request can reach a handler's env.
SESSION_ENV: tuple[str, ...] = (
    "AGENT_HOOKS_TASK_ID",
    "OPTIMALOS_SESSION_TMUX",
    "AGENT_HOOKS_TMUX_SESSION",
    "TMUX",
    "TMUX_PANE",
    "AGENT_HOOKS_AGENT",
    "AGENT_HOOKS_ROLE",
    "AGENT_HOOKS_NESTED",
    "CLAUDE_CONFIG_DIR",
    # Set by the client itself: whether anyone sits at its terminal (features/approvals.unattended).
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SESSION_ATTENDED",
)
HEADER_PREFIX = "x-agent-hooks-env-"


def header_for(var: str) -> str:
    """The header that carries ``var``: X-Agent-Hooks-Env-AGENT-HOOKS-TASK-ID."""
    return "X-Agent-Hooks-Env-" + var.replace("_", "-")


_HEADER_VARS = {HEADER_PREFIX + var.lower().replace("_", "-"): var for var in SESSION_ENV}


def request_env(base: dict[str, str], headers: Any) -> dict[str, str]:
    """The environment one request's handlers see: the server's own, without any
    session variable, plus the session variables the request carried (non-empty)."""
    env = dict(base)  # a copy, then a few pops: far cheaper than filtering every variable
    for name in SESSION_ENV:
        env.pop(name, None)
    for name, value in headers.items():
        var = _HEADER_VARS.get(name.lower())
        if var and value:
            env[var] = value
    return env


def board_url(config: dict[str, Any], port: int) -> str:
    """Where this host's board is: the loopback address, or the one address ``fleet.listen`` names."""
    listen = str(config["fleet"]["listen"] or "")
    host = HOST if not listen or listen in ("0.0.0.0", "::") else listen
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/"


def server_file(paths: Paths) -> str:
    """pid, port, version and build of the running server (written by it, 0600)."""
    return os.path.join(paths.data_dir, "server.json")


def lock_file(paths: Paths) -> str:
    """Held (flock) by the one server of this store while it runs."""
    return os.path.join(paths.data_dir, "server.lock")


def log_file(paths: Paths) -> str:
    return os.path.join(paths.log_dir, "server.log")


def read_info(paths: Paths) -> dict[str, Any] | None:
    """The server file's content, or None when absent or unreadable."""
    try:
        with open(server_file(paths), encoding="utf-8") as f:
            info = json.load(f)
        return info if isinstance(info, dict) else None
    except (OSError, ValueError):
        return None


def answers(port: int, timeout: float = 0.2) -> bool:
    """True when something accepts a connection on the loopback port."""
    # The C module, not socket.py: SessionStart probes once per session, and socket.py's own
    # imports (selectors, array) cost it ~3 ms of CPU; HOST is a literal address, nothing to resolve.
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((HOST, port))
        return True
    except OSError:
        return False
    finally:
        sock.close()


def build_id() -> str:
    """The installed package's identity: version plus a digest of its source files'
    sizes and mtimes, so an upgrade (or an edited checkout) shows as a new build."""
    import zlib

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts: list[str] = []
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    stack.append(e.path)
            elif e.name.endswith(".py"):
                st = e.stat()
                parts.append(f"{e.path[len(root):]}:{st.st_size}:{st.st_mtime_ns}")
    return f"{__version__}+{zlib.crc32(chr(10).join(parts).encode()):08x}"


def server_env(env: Any) -> dict[str, str]:
    """The environment a background server starts with: the caller's, less every
    session variable (a server outlives the session that started it)."""
    child = {k: v for k, v in env.items() if k not in SESSION_ENV}
    if child.get("AGENT_HOOKS_HOME"):
        # The server runs from / : a relative state directory must not move.
        child["AGENT_HOOKS_HOME"] = os.path.abspath(os.path.expanduser(child["AGENT_HOOKS_HOME"]))
    return child


def spawn(env: Any, replace: bool = False) -> int:
    """Start ``python -m agent_hooks.server`` detached, its output in server.log; its pid.

    With ``replace`` it stops a server of another build first (see process.run).
    """
    import subprocess
    import sys

    child_env = server_env(env)
    paths = Paths(child_env)
    # This may create the state directory itself (before any hook has): makedirs gives parents
    # the umask's mode, so mask it as the executables do (dirs 0700).
    old_umask = os.umask(0o077)
    try:
        os.makedirs(paths.log_dir, mode=0o700, exist_ok=True)
    finally:
        os.umask(old_umask)
    # Early failures (port taken, lock held) and tracebacks land in the log too.
    err = os.open(log_file(paths), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent_hooks.server", "--log-file", *(["--replace"] if replace else [])],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True, close_fds=True, cwd="/", env=child_env)
    finally:
        os.close(err)
    return proc.pid


def ensure(paths: Paths, config: dict[str, Any], env: Any, wait_s: float) -> str:
    """SessionStart's part with the http transport: the current build must serve this store.

    When the port answers and the server file names the current build, nothing
    more is done ("running"). A stale build is replaced, a missing server
    started, then this waits up to ``wait_s`` for it to answer ("replaced",
    "started"; "starting" when it was not up in time). A port that answers for
    someone else is left alone ("port taken").
    """
    import time

    port = int(config["serve"]["port"])
    info = read_info(paths)
    if info and not pid_alive(info.get("pid")):
        # Left by a server killed without stopping: whatever answers on its port now is not it
        # (another user's program may have bound it, and Claude Code would take its answers).
        info = None
    build = build_id()
    up = answers(port)
    if up and info and info.get("port") == port and info.get("build") == build:
        return "running"
    if up and (info is None or info.get("port") != port):
        return "port taken"
    # Ours, but of another build, or on another port (the configured one changed): replace it.
    stale = info is not None and (up or info.get("port") != port)
    spawn(env, replace=stale)
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        time.sleep(0.02)
        info = read_info(paths)
        if info and info.get("build") == build and answers(port):
            return "replaced" if stale else "started"
    return "starting"


def pid_alive(pid: Any) -> bool:
    """True when ``pid`` names a live process (one kill(pid, 0): cheap enough for SessionStart)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A killed server not yet reaped (its parent gone, a PID 1 that does not reap) is a zombie: dead.
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def ensure_for_hook(event: str, env: Any = None) -> str:
    """:func:`ensure` from a hook executable: bounded by the hook's deadline, never raises;
    a server that cannot be started is in the error log (doctor shows it)."""
    env = os.environ if env is None else env
    paths = Paths(env)
    try:
        from agent_hooks import config as config_mod

        config, _problems = config_mod.load_lenient(paths, env)
        if not config["serve"]["autostart"]:
            return "off"
        # The handler's own deadline runs after this wait; both must fit in Claude Code's timeout
        # for SessionStart (install.hook_timeout_s), with a second to spare.
        budget = float(config["install"]["hook_timeout_s"]) - int(config["runtime"]["deadline_ms"]) / 1000 - 1
        wait_s = max(1.0, min(float(config["serve"]["start_timeout_s"]), budget))
        done = ensure(paths, config, env, wait_s)
        if done in ("starting", "port taken"):
            from agent_hooks.dispatch import count_error, log_error

            message = (f"the server on port {config['serve']['port']} is not up yet after {wait_s:.1f} s"
                       if done == "starting" else
                       f"port {config['serve']['port']} answers, but not as this store's server")
            log_error(paths, event, "server", message)
            count_error(paths, config, event, "server", message, None, busy_timeout_ms=250)
        return done
    except Exception as exc:  # noqa: BLE001 - the session goes on; the command hooks still guard it
        from agent_hooks.dispatch import log_error

        log_error(paths, event, "server", f"could not start the server: {type(exc).__name__}: {exc}")
        return "error"
