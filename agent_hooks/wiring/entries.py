"""What an entry of ours is: recognising one in a settings file, and building the ones we write.

An entry (Claude Code calls it a hook handler) sits in a matcher group:
``hooks.<Event>[i].hooks[j]``. Ours is a command entry running one of our
executables; the http transport adds http entries (see :func:`recognise`).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
from dataclasses import dataclass
from typing import Any

from agent_hooks import config as config_mod
from agent_hooks.wiring.table import EVENT_OF, HOOKS, KNOWN_EXECUTABLES

PLACEHOLDER = "{{BIN}}"



@dataclass(frozen=True)
class Ours:
    """An entry of ours found in a settings file: its kind and what it runs or calls."""

    kind: str  # "command" (an executable) or "http" (a URL of our server)
    target: str  # the executable's path as written, or the URL


# -- recognising our entries -------------------------------------------------------------------
#
# Only what we wrote is ours: a user's `agent-hook queue drain` on Stop, or a
# script they named agent-hook-audit, is theirs and must survive install and uninstall untouched.
# Ours is exactly one of:
#   * our launcher (below): it ends with LAUNCHER_MARK;
#   * a bare path (one shell word, quoted or not, any directory) to one of our executables, as
#     versions before the launcher wrote it; exec form: that path with no args;
#   * an http entry to our server's hook route on loopback (the http transport).

LAUNCHER_MARK = "# agent-hooks launcher"
_LAUNCHER = re.compile(r"^h=(?P<exe>(?:'[^']*'|\"[^\"]*\"|\\.|[^\s;'\"\\])+); .* " + re.escape(LAUNCHER_MARK) + r"$", re.S)
# The http transport's route (the resident server answers it, docs/server.md): POST http://127.0.0.1:PORT/hooks/<Event>.
HTTP_ROUTE = "/hooks/"
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
_OUR_EVENTS = frozenset(h.event for h in HOOKS)


def command_words(command: str) -> list[str]:
    """The words of a shell command (best effort: unbalanced quotes fall back to spaces)."""
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def handler_words(handler: Any) -> list[str]:
    """The argv a handler runs: shell form splits ``command``; exec form is command + args.

    For our launcher, the executable it launches.
    """
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return []
    args = handler.get("args")
    if isinstance(args, list):
        return [handler["command"], *[str(a) for a in args]]
    m = _LAUNCHER.match(handler["command"])
    if m:
        return command_words(m.group("exe"))
    return command_words(handler["command"])


def _is_our_url(url: Any) -> bool:
    import urllib.parse

    if not isinstance(url, str):
        return False
    parts = urllib.parse.urlsplit(url)
    # Exactly our route, /hooks/<one of our events>: a user's own loopback server may use /hooks/... too.
    return (parts.scheme == "http" and (parts.hostname or "") in _LOOPBACK
            and parts.path.removeprefix(HTTP_ROUTE) in _OUR_EVENTS and parts.path.startswith(HTTP_ROUTE))


def recognise(handler: Any) -> Ours | None:
    """The entry of ours ``handler`` is, or None when it is someone else's."""
    if not isinstance(handler, dict):
        return None
    if handler.get("type") == "http":
        return Ours("http", handler["url"]) if _is_our_url(handler.get("url")) else None
    command = handler.get("command")
    if handler.get("type", "command") != "command" or not isinstance(command, str):
        return None
    args = handler.get("args")
    if args is not None:
        return Ours("command", command) if not args and os.path.basename(command) in KNOWN_EXECUTABLES else None
    m = _LAUNCHER.match(command)
    if m:
        return Ours("command", command_words(m.group("exe"))[0])
    words = command_words(command)
    if len(words) == 1 and os.path.basename(words[0]) in KNOWN_EXECUTABLES:
        return Ours("command", words[0])
    return None


def is_ours(handler: Any) -> bool:
    """True for an entry we wrote (see :func:`recognise`)."""
    return recognise(handler) is not None


def mentions_ours(handler: Any) -> str | None:
    """Our executable a hand-written entry runs (with other words around it), for doctor; else None."""
    if is_ours(handler):
        return None
    for word in handler_words(handler):
        if os.path.basename(word) in KNOWN_EXECUTABLES:
            return os.path.basename(word)
    return None


# -- the entries we write ----------------------------------------------------------------------

def timeouts(cfg: dict[str, Any]) -> dict[str, int]:
    """Seconds per event for Claude Code's ``timeout`` (from the ``install`` config section)."""
    sec = cfg["install"]
    out = {h.event: int(sec["session_end_timeout_s"] if h.event == "SessionEnd" else sec["hook_timeout_s"])
           for h in HOOKS}
    # A hook that holds a request for a person (docs/approvals.md) must outlive its wait: the client
    # counts a timed-out hook as no decision, which for a gate would let the call run.
    approvals = cfg.get("approvals") or {}
    wait_s = approvals.get("wait_s") or 0
    if isinstance(wait_s, (int, float)) and not isinstance(wait_s, bool) and wait_s > 0:
        out["PermissionRequest"] = max(out["PermissionRequest"], int(min(wait_s, MAX_WAIT_S)) + APPROVAL_MARGIN_S)
    longest = _longest_gate_s(approvals.get("gates"))
    if longest:
        out["PreToolUse"] = max(out["PreToolUse"], int(longest) + APPROVAL_MARGIN_S)
    return out


# Seconds a holding hook's timeout is given beyond its wait: the answer and its write, on a busy host.
APPROVAL_MARGIN_S = 30
# The longest wait: with the margin, 600 s, the most a command hook gets by default.
MAX_WAIT_S = 570


def _longest_gate_s(gates: Any) -> float:
    """The longest timeout_s among the configured gates (0 when none; a malformed one counts its default)."""
    if not isinstance(gates, list) or not gates:
        return 0.0
    from agent_hooks.features.gates import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S

    longest = 0.0
    for gate in gates:
        value = gate.get("timeout_s", DEFAULT_TIMEOUT_S) if isinstance(gate, dict) else DEFAULT_TIMEOUT_S
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            longest = max(longest, min(float(value), MAX_TIMEOUT_S))
    return longest


def launcher(exe_path: str, event: str, args: str = "") -> str:
    """The ``command`` we wire: run ``exe_path``, or, when it is gone, log that and exit 0.

    Claude Code runs a command hook with ``sh -c``, so this costs no process of
    its own: ``[ -x ]`` is a shell builtin and ``exec`` replaces the shell (see
    bench/bench_launcher.py). Only when the installation was removed does it do
    more: one line in our error log (the path the hooks use, from the same
    environment), which ``agent-hook doctor`` shows with its fix, then exit 0 so
    the agent carries on (fail open) instead of a hook error on every tool call.
    """
    quoted = f"'{exe_path}'" if exe_path.startswith(PLACEHOLDER) else shlex.quote(exe_path)
    # The path goes into the log line JSON-escaped at install time (a '"' or '\\' in it would
    # otherwise break the line doctor reads), as a printf argument so '%' stays literal.
    logged = json.dumps(exe_path)[1:-1]
    logged = f"'{logged}'" if exe_path.startswith(PLACEHOLDER) else shlex.quote(logged)
    log_dir = "${AGENT_HOOKS_HOME:-${XDG_STATE_HOME:-$HOME/.local/state}/agent-hooks}/logs"
    record = ('{"ts":%s,"kind":"install_missing","event":"%s","message":"%s is missing: '
              're-run install.sh (or agent-hook settings uninstall)"}\\n')
    # The interpreter on the script's shebang line is checked too (read is a builtin): a venv whose
    # base Python was removed keeps its scripts, and exec of one would fail with 126/127.
    return (f'h={quoted}; if [ -x "$h" ]; then IFS= read -r l <"$h"; '
            f"case $l in '#!'*) p=${{l#??}}; [ -x \"${{p%% *}}\" ] && exec \"$h\"{args};; *) exec \"$h\"{args};; esac; fi; "
            f'umask 077; exec 2>/dev/null; d="{log_dir}"; '
            f"mkdir -p \"$d\" && printf '{record}' \"$(date +%s)\" {event} {logged} >>\"$d/errors.log\"; "
            f"exit 0 {LAUNCHER_MARK}")


def command_for(bin_dir: str, exe: str, event: str = "", args: str = "") -> str:
    """The ``command`` string of our entry for ``exe`` in ``bin_dir`` (through the launcher)."""
    return launcher(f"{bin_dir.rstrip('/')}/{exe}", event or EVENT_OF.get(exe, ""), args)


def our_groups(bin_dir: str, cfg: dict[str, Any], transport: str = "command") -> dict[str, dict[str, Any]]:
    """Event -> the matcher group we install for it (``transport``: "command" or "http",
    see agent_hooks.wiring.http)."""
    from agent_hooks.wiring import http

    secs = timeouts(cfg)
    groups: dict[str, dict[str, Any]] = {}
    over_http = http.http_events(cfg) if transport == "http" else ()
    for h in HOOKS:
        group: dict[str, Any] = {}
        if h.matcher is not None:
            group["matcher"] = h.matcher
        if h.event in over_http:
            # Strict guards: a call the server cannot answer blocks the tool or the prompt (docs/server.md).
            block = http.strict(cfg) and h.event in http.BLOCK_ON_FAILURE
            group["hooks"] = [http.http_entry(h.event, int(cfg["serve"]["port"]), secs[h.event], block)]
            groups[h.event] = group
            continue
        args = f" {http.SERVE_ARG}" if transport == "http" and h.event == "SessionStart" else ""
        group["hooks"] = [{"type": "command", "command": command_for(bin_dir, h.executable, h.event, args),
                           "timeout": secs[h.event]}]
        groups[h.event] = group
    return groups


def template(cfg: dict[str, Any] | None = None) -> dict[str, Any]:
    """The document of settings.template.json: our hooks block with the {{BIN}} placeholder."""
    cfg = cfg or copy.deepcopy(config_mod.DEFAULTS)
    return {"hooks": {event: [group] for event, group in our_groups(PLACEHOLDER, cfg).items()}}
