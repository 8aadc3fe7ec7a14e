"""What an entry of ours is: recognising one in a settings file, and building the ones we write.

An entry (Claude Code calls it a hook handler) sits in a matcher group:
``hooks.<Event>[i].hooks[j]``. Ours is a command entry running one of our
executables; the http transport adds http entries (see :func:`recognise`).
"""

from __future__ import annotations

import copy
import os
import re
import shlex
from dataclasses import dataclass
from typing import Any

from agent_hooks import config as config_mod
from agent_hooks.wiring.table import HOOKS

PLACEHOLDER = "{{BIN}}"

_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python[0-9.]*$")


@dataclass(frozen=True)
class Ours:
    """An entry of ours found in a settings file: its kind and what it runs or calls."""

    kind: str  # "command" (an executable) or "http" (a URL of our server)
    target: str  # the executable's path as written, or the URL


# -- recognising our entries -------------------------------------------------------------------

def command_words(command: str) -> list[str]:
    """The words of a shell command (best effort: unbalanced quotes fall back to spaces)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    while words and _ENV_WORD.match(words[0]):
        words.pop(0)
    if words and os.path.basename(words[0]) == "env":
        words.pop(0)
        while words and _ENV_WORD.match(words[0]):
            words.pop(0)
    return words


def handler_words(handler: Any) -> list[str]:
    """The argv a handler runs: shell form splits ``command``; exec form is command + args."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return []
    args = handler.get("args")
    if isinstance(args, list):
        return [handler["command"], *[str(a) for a in args]]
    return command_words(handler["command"])


def recognise(handler: Any) -> Ours | None:
    """The entry of ours ``handler`` is, or None when it is someone else's."""
    words = handler_words(handler)
    if not words:
        return None
    base = os.path.basename(words[0])
    if base.startswith("agent-hook-") or base == "agent-hook":
        return Ours("command", words[0])
    if _PYTHON.match(base):
        for i, word in enumerate(words[1:-1], start=1):
            if word == "-m" and words[i + 1].split(".")[0] == "agent_hooks":
                return Ours("command", words[0])
    return None


def is_ours(handler: Any) -> bool:
    """True for an entry we wrote (see :func:`recognise`)."""
    return recognise(handler) is not None


# -- the entries we write ----------------------------------------------------------------------

def timeouts(cfg: dict[str, Any]) -> dict[str, int]:
    """Seconds per event for Claude Code's ``timeout`` (from the ``install`` config section)."""
    sec = cfg["install"]
    return {h.event: int(sec["session_end_timeout_s"] if h.event == "SessionEnd" else sec["hook_timeout_s"])
            for h in HOOKS}


def command_for(bin_dir: str, exe: str) -> str:
    """The ``command`` string of our entry for ``exe`` in ``bin_dir``."""
    if bin_dir == PLACEHOLDER:
        return f"{PLACEHOLDER}/{exe}"
    # Claude Code runs the command with `sh -c`: quote paths with spaces (a no-op otherwise).
    return shlex.quote(f"{bin_dir.rstrip('/')}/{exe}")


def our_groups(bin_dir: str, cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Event -> the matcher group we install for it."""
    secs = timeouts(cfg)
    groups: dict[str, dict[str, Any]] = {}
    for h in HOOKS:
        group: dict[str, Any] = {}
        if h.matcher is not None:
            group["matcher"] = h.matcher
        group["hooks"] = [{"type": "command", "command": command_for(bin_dir, h.executable), "timeout": secs[h.event]}]
        groups[h.event] = group
    return groups


def template(cfg: dict[str, Any] | None = None) -> dict[str, Any]:
    """The document of settings.template.json: our hooks block with the {{BIN}} placeholder."""
    cfg = cfg or copy.deepcopy(config_mod.DEFAULTS)
    return {"hooks": {event: [group] for event, group in our_groups(PLACEHOLDER, cfg).items()}}
