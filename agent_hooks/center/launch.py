"""Start a Claude Code session on this host: a named tmux session, in a directory this host allows.

A launch is asked for on a command center (``POST /api/sessions``, ``agent-hook
launch``) and carried out by the host it names, which decides from its own
configuration alone (``[launch]``), whoever asked:

* ``roots``: the directory must be inside one of them once every symlink is
  resolved (a link in a root that points out of it is refused). No roots: the
  host launches nothing.
* ``claude``: the client it runs (``claude`` on the server's PATH by default);
  ``permission_modes``: the modes it may be started in.

The session is ``tmux new-session -d -s agent-<name> -c DIR -- PYTHON -m
agent_hooks.center.spawn SPEC``: an argument list, never a shell string. The
spec file (0600, read once and deleted by the pane's first process) holds the
client's argument list and its environment, so neither shows in a process
listing: the host server's own environment, without our credentials and without
the variables of whatever session started the server, plus the session's
identity (``AGENT_HOOKS_TMUX_SESSION``, ``AGENT_HOOKS_TASK_ID``,
``AGENT_HOOKS_AGENT``). The pane's process then execs the client with the
prompt as its positional argument (after ``--``: a prompt is never an option),
and ``--session-id``: the card the command center made is the session's own id.

Standard library only: ``agent-hook launch`` runs it without a server.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

from agent_hooks.config import LAUNCH_MODES as CLIENT_MODES  # the client's own modes (`claude --help`)

PREFIX = "agent-"
MAX_PROMPT_CHARS = 20000
MAX_PATH_CHARS = 4096
_NAME_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,79}")
_ID_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}")
log = logging.getLogger("agent_hooks.center.launch")
# What the session's environment never carries from the server's: our credentials, and the identity of
# whatever session the server itself was started from (the launched session gets its own).
CREDENTIAL_ENV = ("AGENT_HOOKS_FLEET_TOKEN", "AGENT_HOOKS_OPENCLAW_TOKEN")
INHERITED_IDENTITY = ("AGENT_HOOKS_TASK_ID", "AGENT_HOOKS_TMUX_SESSION", "OPTIMALOS_SESSION_TMUX", "AGENT_HOOKS_AGENT",
                      "AGENT_HOOKS_ROLE", "AGENT_HOOKS_NESTED", "TMUX", "TMUX_PANE", "CLAUDECODE",
                      "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SESSION_ATTENDED")
TMUX_TIMEOUT_S = 5.0
# How long the host waits for the pane's first process to take its spec (it then execs the client).
SPAWN_WAIT_S = 5.0


class LaunchError(ValueError):
    """A launch request that is not well formed (400): the message says which field and why."""


@dataclass(frozen=True)
class Launch:
    """One launch, as asked for (checked for shape; the host's policy is :func:`plan`'s)."""

    cwd: str
    prompt: str
    session_id: str
    tmux: str
    task_id: str | None = None
    agent: str | None = None
    label: str | None = None
    permission_mode: str | None = None

    def spec(self) -> dict[str, Any]:
        """What a command center sends the host (a control's body)."""
        return {"cwd": self.cwd, "prompt": self.prompt, "session_id": self.session_id, "tmux": self.tmux,
                "task_id": self.task_id, "agent": self.agent, "label": self.label,
                "permission_mode": self.permission_mode}


def _text(doc: dict[str, Any], key: str, limit: int, pattern: re.Pattern[str] | None = None,
          what: str = "") -> str | None:
    value = doc.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise LaunchError(f'"{key}" must be a string')
    value = value.strip()
    if len(value) > limit:
        raise LaunchError(f'"{key}" is {len(value)} characters long; at most {limit}')
    if pattern is not None and not pattern.fullmatch(value):
        raise LaunchError(f'"{key}" must be {what}, got {value[:60]!r}')
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise LaunchError(f'"{key}" must not hold control characters')
    return value or None


def tmux_name(label: str | None, session_id: str) -> str:
    """``agent-<label>`` (letters, digits, ``_`` and ``-``; tmux gives ``.`` and ``:`` a meaning), else
    ``agent-<the first 8 characters of the session id>``."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", label or "").strip("-")[:60]
    if slug.lower().startswith(PREFIX):
        slug = slug[len(PREFIX):]
    return PREFIX + (slug or session_id[:8])


def parse(doc: Any, session_id: str | None = None) -> Launch:
    """A launch request's body as a :class:`Launch`, or :class:`LaunchError` naming what is wrong."""
    if not isinstance(doc, dict):
        raise LaunchError('the body must be a JSON object {"cwd", "prompt", ...}')
    cwd = doc.get("cwd")
    if not isinstance(cwd, str) or not cwd.strip():
        raise LaunchError('"cwd" is required: the directory the session starts in (an absolute path)')
    if len(cwd) > MAX_PATH_CHARS or "\x00" in cwd:
        raise LaunchError('"cwd" must be a path (at most 4096 characters, no NUL)')
    if not os.path.isabs(cwd):
        raise LaunchError(f'"cwd" must be an absolute path, got {cwd[:100]!r}')
    prompt = doc.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise LaunchError('"prompt" is required: what the session is asked to do')
    if len(prompt) > MAX_PROMPT_CHARS:
        raise LaunchError(f'"prompt" is {len(prompt)} characters long; at most {MAX_PROMPT_CHARS}')
    if "\x00" in prompt:
        raise LaunchError('"prompt" must not hold a NUL character')
    mode = _text(doc, "permission_mode", 40)
    if mode is not None and mode not in CLIENT_MODES:
        raise LaunchError(f'"permission_mode" must be one of {", ".join(CLIENT_MODES)}, got {mode[:40]!r}')
    task = _text(doc, "task_id", 200, _ID_OK, "a task id (letters, digits, . _ : @ / -)")
    agent = _text(doc, "agent", 80, _NAME_OK, "an agent name (letters, digits, . _ : @ -)")
    label = _text(doc, "label", 120)
    sid = doc.get("session_id") if session_id is None else session_id
    if sid is None:
        sid = str(uuid.uuid4())
    try:
        sid = str(uuid.UUID(str(sid)))
    except ValueError:
        raise LaunchError('"session_id" must be a UUID (the client takes no other)') from None
    tmux = doc.get("tmux")
    if tmux is not None:
        if not isinstance(tmux, str) or not re.fullmatch(r"agent-[A-Za-z0-9_-]{1,80}", tmux):
            raise LaunchError('"tmux" must be agent-<letters, digits, _ and ->')
    return Launch(cwd=os.path.normpath(cwd), prompt=prompt, session_id=sid, tmux=tmux or tmux_name(label, sid),
                  task_id=task, agent=agent, label=label, permission_mode=mode)


# -- the host's own decision ------------------------------------------------------------------------

def roots(config: dict[str, Any]) -> list[str]:
    """``[launch] roots``, each absolute, resolved (symlinks followed) and existing; [] when launching is off."""
    out = []
    for root in config.get("launch", {}).get("roots") or []:
        if isinstance(root, str) and root.strip():
            path = os.path.realpath(os.path.expanduser(root.strip()))
            if os.path.isabs(path) and os.path.isdir(path) and path not in out:
                out.append(path)
    return out


def modes(config: dict[str, Any]) -> list[str]:
    """``[launch] permission_modes`` this host allows (only the client's own names)."""
    return [m for m in config.get("launch", {}).get("permission_modes") or [] if m in CLIENT_MODES]


def offer(config: dict[str, Any]) -> dict[str, Any]:
    """What this host tells its command center it may launch (the board's form lists it)."""
    allowed = modes(config)
    return {"roots": roots(config), "permission_modes": allowed, "default_mode": default_mode(allowed)}


def default_mode(allowed: list[str]) -> str | None:
    """The mode a launch that names none gets: ``default`` when allowed, else the first allowed."""
    return "default" if "default" in allowed else (allowed[0] if allowed else None)


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class Plan:
    """A launch this host will run: the tmux command line, and the spec the pane's first process execs."""

    launch: Launch
    cwd: str
    argv: list[str]
    env: dict[str, str]


def client_path(config: dict[str, Any], env: dict[str, str]) -> str | None:
    """The client ``[launch] claude`` names: an absolute path that is an executable file, or a name on PATH."""
    name = str(config.get("launch", {}).get("claude") or "claude")
    if os.sep in name:
        return name if os.path.isabs(name) and os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH") or os.defpath)


def session_env(base: dict[str, str], launch: Launch) -> dict[str, str]:
    """The server's environment, without our credentials and any inherited session identity, plus this
    session's identity for our hooks."""
    env = {k: v for k, v in base.items() if k not in CREDENTIAL_ENV and k not in INHERITED_IDENTITY}
    env["AGENT_HOOKS_TMUX_SESSION"] = launch.tmux
    if launch.task_id:
        env["AGENT_HOOKS_TASK_ID"] = launch.task_id
    if launch.agent:
        env["AGENT_HOOKS_AGENT"] = launch.agent
    return env


def plan(launch: Launch, config: dict[str, Any], env: dict[str, str], host: str) -> Plan | str:
    """What this host runs for ``launch``, or why it refuses (a sentence naming the setting)."""
    allowed_roots = roots(config)
    if not allowed_roots:
        return f"launching is off on host {host}: its [launch] roots names no directory"
    cwd = os.path.realpath(launch.cwd)
    if not any(inside(cwd, r) for r in allowed_roots):
        shown = launch.cwd if cwd == launch.cwd else f"{launch.cwd} (that is {cwd})"
        return (f"directory {shown} is outside host {host}'s [launch] roots ({', '.join(allowed_roots)}):"
                " not launched")
    if not os.path.isdir(cwd):
        return f"directory {launch.cwd} does not exist on host {host}"
    allowed = modes(config)
    mode = launch.permission_mode or default_mode(allowed)
    if mode is None or mode not in allowed:
        return (f"permission mode {mode or '(none)'} is not allowed on host {host} ([launch] permission_modes:"
                f" {', '.join(allowed) or 'none'})")
    client = client_path(config, env)
    if client is None:
        name = config.get("launch", {}).get("claude") or "claude"
        return f"the client {name!r} ([launch] claude) is not an executable on host {host}'s server PATH"
    if shutil.which("tmux", path=env.get("PATH") or os.defpath) is None:
        return f"tmux is not installed on host {host}"
    argv = [client, "--session-id", launch.session_id, "--permission-mode", mode, "--", launch.prompt]
    return Plan(launch, cwd, argv, session_env(env, launch))


# -- running it ------------------------------------------------------------------------------------

def _tmux(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=TMUX_TIMEOUT_S, check=False,
                          env=env, stdin=subprocess.DEVNULL)


def spec_dir(data_dir: str) -> str:
    return os.path.join(data_dir, "launch")


def start(p: Plan, data_dir: str, tmux_env: dict[str, str]) -> str | None:
    """Start the planned session in a new tmux session; None when it started, else why not.
    ``tmux_env``: the environment tmux itself runs with (the server's: it names the tmux server)."""
    name = p.launch.tmux
    try:
        if _tmux(tmux_env, "has-session", "-t", f"={name}").returncode == 0:
            return f"a tmux session named {name} already exists on this host: choose another name"
        directory = spec_dir(data_dir)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        path = os.path.join(directory, f"{p.launch.session_id}.json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"argv": p.argv, "env": p.env, "cwd": p.cwd}, f)
        made = _tmux(tmux_env, "new-session", "-d", "-s", name, "-c", p.cwd, "--",
                     sys.executable, "-m", "agent_hooks.center.spawn", path)
        if made.returncode != 0:
            _remove(path)
            return f"tmux new-session failed: {made.stderr.strip()[:200]}"
        deadline = time.monotonic() + SPAWN_WAIT_S
        while os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        if os.path.exists(path):
            _remove(path)
            _tmux(tmux_env, "kill-session", "-t", f"={name}")
            return f"the session's first process did not start within {SPAWN_WAIT_S:g} s: not launched"
        time.sleep(0.2)  # an exec that failed says so at once (spawn.py writes why, next to the spec)
        failed = path + ".error"
        if os.path.exists(failed):
            with open(failed, encoding="utf-8", errors="replace") as f:
                why = f.read().strip()[:300]
            _remove(failed)
            _tmux(tmux_env, "kill-session", "-t", f"={name}")
            return f"the client could not be started: {why}"
    except FileExistsError:
        return f"session {p.launch.session_id} is being launched already"
    except FileNotFoundError:
        return "tmux is not installed on this host"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"tmux did not answer: {exc}"
    return None


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def run(launch: Launch, config: dict[str, Any], env: dict[str, str], data_dir: str, host: str) -> str | None:
    """Plan and start ``launch`` on this host: None when started, else why not."""
    p = plan(launch, config, env, host)
    if isinstance(p, str):
        return p
    return start(p, data_dir, {k: v for k, v in env.items() if k not in CREDENTIAL_ENV})


def from_control(control: dict[str, Any]) -> Launch:
    """The launch a command center's control carries (its ``reason`` holds the spec), checked again here."""
    try:
        doc = json.loads(str(control.get("reason") or ""))
    except ValueError:
        raise LaunchError("the launch control carries no spec") from None
    if not isinstance(doc, dict):
        raise LaunchError("the launch control's spec is not an object")
    return parse(doc, doc.get("session_id") or control.get("session_id"))


def run_controls(controls: list[dict[str, Any]], config: dict[str, Any], env: dict[str, str], data_dir: str,
                 host: str, max_age_s: float, now: float) -> list[dict[str, Any]]:
    """Run the launches a command center sent (blocking: tmux); each one's outcome ``{"seq", "error"}``."""
    results = []
    for c in controls:
        problem: str | None
        if now - float(c.get("at") or 0) > max_age_s:
            problem = f"older than launch.max_age_s ({max_age_s:g} s): not launched"
        else:
            try:
                problem = run(from_control(c), config, env, data_dir, host)
            except LaunchError as exc:
                problem = str(exc)
        if problem:
            log.warning("launch %s from the command center refused: %s", c.get("seq"), problem)
        else:
            log.info("launched session %s in tmux %s", c.get("session_id"), c.get("tmux_session"))
        results.append({"seq": int(c.get("seq") or 0), "error": problem})
    return results
