"""Doctor's checks of the resident server: wired or not, up, stale, reachable by us, how fast.

``server_checks`` is the area's one entry (agent_hooks/checks/server.py registers it). It reads
only loopback and the settings files; nothing is posted to the hook route,
so running doctor changes nothing in the store.
"""

from __future__ import annotations

import os
import time
from typing import Any

from agent_hooks.checks import FAIL, OK, WARN, Check
from agent_hooks.paths import Paths
from agent_hooks.server import local


def _our_http_handlers(files: list[tuple[str, str]]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(scope, event, url, the entry itself) of every http entry of ours in the settings files."""
    from agent_hooks.wiring.entries import recognise
    from agent_hooks.wiring.merge import SettingsError
    from agent_hooks.wiring.settings_file import read_settings

    found = []
    for scope, path in files:
        if not os.path.exists(path):
            continue
        try:
            doc, _ = read_settings(path)
        except SettingsError:
            continue  # the settings checks report it
        for event, groups in (doc.get("hooks") or {}).items():
            for group in groups if isinstance(groups, list) else []:
                for handler in (group.get("hooks") or []) if isinstance(group, dict) else []:
                    ours = recognise(handler)
                    if ours is not None and ours.kind == "http":
                        found.append((scope, event, ours.target, handler))
    return found


def _last_server_error(paths: Paths) -> dict[str, Any] | None:
    """The newest error-log line about the server (a death, a failed start), if any."""
    import json

    try:
        with open(paths.error_log, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()[-500:]
    except OSError:
        return None
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("kind") == "server":
            return entry
    return None


def _store_outage(paths: Paths, st: dict[str, Any]) -> Check | None:
    """A running server that cannot write its store (agent_hooks/server/recovery.py): a failing line for as
    long as it lasts, whether the hooks reach the server or not (the command center's writes need it too)."""
    store = st.get("store_state") or {}
    if not st.get("up") or store.get("writable", True):
        return None
    since = store.get("since")
    when = ""
    if isinstance(since, (int, float)):
        when = f" since {time.strftime('%H:%M:%S', time.localtime(since))} ({max(0.0, time.time() - since):.0f} s)"
    lost = f", {store['lost']} answered without a record (the spool is full)" if store.get("lost") else ""
    directory = os.path.dirname(paths.store)
    return Check("server", FAIL, f"the server cannot write its store{when}: {store.get('problem')};"
                 f" {store.get('spooled', 0)} hook call(s) spooled{lost}, recorded once it can (tried every second)",
                 f"make {paths.store} and {directory} writable by the server's user (chmod 600 and 700);"
                 " then see " + local.log_file(paths), {"store_state": store})


def server_checks(paths: Paths, cfg: dict[str, Any], files: list[tuple[str, str]]) -> list[Check]:
    """The server area's lines for doctor."""
    from agent_hooks.server import process
    from agent_hooks.wiring.http import BLOCK_ON_FAILURE, NO_BLOCK_ON_FAILURE, port_of

    handlers = _our_http_handlers(files)
    entries = [(scope, event, url) for scope, event, url, _ in handlers]
    port = int(cfg["serve"]["port"])
    st = process.status(paths, cfg)
    checks: list[Check] = []
    store_line = _store_outage(paths, st)
    if store_line is not None:
        checks.append(store_line)
    if not entries:
        state = f"up on port {st['port']}" if st["up"] else "not running"
        checks.append(Check("server", OK, f"http transport not wired (the executables answer); server {state}"))
        return checks
    events = sorted({event for _, event, _ in entries})
    wrong = sorted({url for _, _, url in entries if port_of(url) != port})
    if wrong:
        checks.append(Check("server", FAIL, f"http entries send to {', '.join(wrong)}, but [serve] port is {port}:"
                            " those tool calls go unguarded", "agent-hook settings install --transport http"))
    else:
        checks.append(Check("server", OK, f"http transport wired for {', '.join(events)} on port {port}"))
    # Strict guards (docs/server.md): the PreToolUse and UserPromptSubmit entries must carry onFailure
    # "block", and only then; Stop must not be an http entry then (Claude Code ignores onFailure on Stop).
    strict = cfg["guards"]["fail_closed"] is True
    what = {"PreToolUse": "tool calls", "UserPromptSubmit": "prompts"}
    for guarded in BLOCK_ON_FAILURE:
        blocks = [h.get("onFailure") == "block" for _, event, _, h in handlers if event == guarded]
        if blocks and any(b != strict for b in blocks):
            said = (f'lacks "onFailure": "block": {what[guarded]} still go through when the server cannot be reached'
                    if strict else
                    f'has "onFailure": "block": {what[guarded]} are blocked when the server cannot be reached')
            checks.append(Check("server", WARN, f"guards.fail_closed is {str(strict).lower()}, but the http {guarded}"
                                f" entry {said} (installed before the setting changed)",
                                "agent-hook settings install --transport http"))
    if strict and any(event in NO_BLOCK_ON_FAILURE for _, event, _, _ in handlers):
        checks.append(Check("server", WARN, "guards.fail_closed is true, but Stop is an http entry: while the server"
                            " is down a persisting worker is let go (Claude Code ignores onFailure on Stop; strict"
                            " guards keep Stop a command hook; installed before the setting changed)",
                            "agent-hook settings install --transport http"))
    blocking = [h.get("onFailure") == "block" for _, event, _, h in handlers if event == "PreToolUse"]
    last = _last_server_error(paths)
    if not st["up"]:
        why = f" (last: {last.get('at')} {last.get('message')})" if last else ""
        effect = ("Claude Code blocks those tool calls and prompts (onFailure: block); nothing is recorded"
                  if blocking and all(blocking) else "Claude Code lets the tools through; nothing is recorded")
        checks.append(Check("server", FAIL, f"server down on port {port}: until the next SessionStart restarts it,"
                            f" {', '.join(events)} hooks do not run ({effect}){why}",
                            "agent-hook server start; see " + local.log_file(paths)))
        return checks
    if last and last.get("ts", 0) > time.time() - 24 * 3600:
        checks.append(Check("server", WARN, f"server gap: {last.get('at')} {last.get('message')}",
                            "see " + local.log_file(paths) + " for why it stopped"))
    if st.get("stale"):
        checks.append(Check("server", WARN, f"server runs build {st.get('build')}, older than the installed"
                            f" {st.get('installed_build')} (the next SessionStart replaces it)",
                            "agent-hook server start"))
    else:
        checks.append(Check("server", OK, f"server up: pid {st.get('pid')}, build {st.get('build')},"
                            f" uptime {st.get('uptime_s', 0):.0f} s"))
    # Callers are checked by uid on the loopback connection: no secret sits in settings.json
    # to match or leak. /status answering us proves this user is the one it accepts.
    if process.fetch(port, "/status") is None:
        checks.append(Check("server", FAIL, "the server refuses this user (it runs as another uid?):"
                            " its hook answers are 401, so tool calls go unguarded",
                            "agent-hook server stop, as its user; then agent-hook server start"))
    else:
        checks.append(Check("server", OK, "caller check: the server accepts this user's processes"
                            " (uid of the loopback connection; no secret to leak)"))
    deadline = float(cfg["runtime"]["deadline_ms"])
    p99 = st.get("p99_ms")
    speed = (f"answers in p50 {st.get('p50_ms') or '-'} ms, p99 {p99 or '-'} ms over {sum((st.get('requests') or {}).values())}"
             f" requests; probe {st.get('probe_ms')} ms")
    if p99 is not None and p99 > deadline:
        checks.append(Check("server", WARN, speed + f": p99 over the {deadline:.0f} ms deadline",
                            "a locked store or a slow disk: see the store lines"))
    else:
        checks.append(Check("server", OK, speed))
    return checks
