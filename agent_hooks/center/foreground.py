"""What a tmux pane's terminal runs in its foreground, and whether that is the Claude Code client (Linux /proc).

A reply (reply.py) is typed into a pane only when what reads the keys there is the client: an allow-list,
not a list of programs to refuse. The keys go to the terminal's foreground process group: the ``tpgid`` of
the pane's first process (``#{pane_pid}``, /proc/<pid>/stat), the group of whatever that shell or program
last put in the foreground. One process of that group must be the client.

tmux's ``#{pane_current_command}`` is not enough: it is the name a process gives itself, and the client is
not the only program that can call itself ``claude`` (``exec -a claude``, a script, a symlink named so). The
client is recognised by the file the kernel runs, /proc/<pid>/exe, which a process cannot rename:

* its native build, the one npm installs (2.1 on): a file under ``node_modules/@anthropic-ai/claude-code/``
  (``bin/claude.exe``) or the platform's package beside it (``@anthropic-ai/claude-code-linux-x64/claude``);
  the installer's ``~/.local/share/claude/versions/<version>``; or a file named ``claude`` elsewhere
  (Homebrew, by hand);
* the older builds that run on Node: node (or bun) running the package's ``cli.js``. Such a client sets
  ``process.title = "claude"``, which on Linux overwrites its command line; node whose command line is
  then just ``claude`` is taken for it too (the one case where the name counts, and only for node).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PROC = "/proc"
PACKAGE = "@anthropic-ai/claude-code"
# Where the native installer keeps each version of the client: ~/.local/share/claude/versions/<version>.
VERSIONS_DIR = os.path.join("claude", "versions")
CLIENT_FILES = frozenset({"claude", "claude.exe"})
SCRIPT_HOSTS = frozenset({"node", "nodejs", "bun"})
# The client's own name for itself (process.title), as the Node builds set it.
TITLE = "claude"
# Longest program name a refusal shows (it goes to the board, and to another host's command center).
NAME_MAX = 40


@dataclass
class Proc:
    """One process, as /proc shows it."""

    pid: int
    name: str  # what it calls itself (/proc/<pid>/comm)
    exe: str | None  # the file the kernel runs; None when it cannot be read (another user's, a zombie)
    argv: list[str]


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from its third field (state) on: the name before it may hold spaces and parentheses."""
    raw = _read(f"{PROC}/{pid}/stat")
    if raw is None:
        return None
    text = raw.decode("utf-8", "replace")
    return text[text.rfind(")") + 2:].split()


def process(pid: int) -> Proc | None:
    """The process ``pid``, or None when it is gone."""
    raw = _read(f"{PROC}/{pid}/comm")
    if raw is None:
        return None
    try:
        exe: str | None = os.readlink(f"{PROC}/{pid}/exe")
    except OSError:
        exe = None
    if exe is not None and exe.endswith(" (deleted)"):
        exe = exe[: -len(" (deleted)")]  # replaced on disk since it started (an update): still what it is
    argv = [a.decode("utf-8", "replace") for a in (_read(f"{PROC}/{pid}/cmdline") or b"").split(b"\0") if a]
    return Proc(pid, raw.decode("utf-8", "replace").strip(), exe, argv)


def foreground_group(pane_pid: int) -> int | None:
    """The process group in the foreground of the terminal ``pane_pid`` runs on (None: it has none, or is gone)."""
    fields = _stat_fields(pane_pid)
    if fields is None or len(fields) < 6:
        return None
    tpgid = int(fields[5])  # state, ppid, pgrp, session, tty_nr, tpgid
    return tpgid if tpgid > 0 else None


def members(pgid: int) -> list[Proc]:
    """The processes of group ``pgid``, its leader first."""
    found: list[Proc] = []
    try:
        names = os.listdir(PROC)
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields is None or len(fields) < 3 or fields[2] != str(pgid):
            continue
        proc = process(int(name))
        if proc is not None:
            found.append(proc)
    found.sort(key=lambda p: (p.pid != pgid, p.pid))
    return found


def _in_package(path: str) -> bool:
    """True for a file of the client's npm package, or of its platform's package beside it."""
    parts = path.split(os.sep)
    scope = os.path.dirname(PACKAGE)
    name = os.path.basename(PACKAGE)
    return any(parts[i] == scope and (parts[i + 1] == name or parts[i + 1].startswith(name + "-"))
               for i in range(len(parts) - 1))


def _script(proc: Proc) -> str | None:
    """The script a node or bun process runs: its first argument that is not an option, as a full path."""
    for arg in proc.argv[1:]:
        if arg.startswith("-"):
            continue
        if os.path.isabs(arg):
            return os.path.realpath(arg)
        try:
            return os.path.realpath(os.path.join(os.readlink(f"{PROC}/{proc.pid}/cwd"), arg))
        except OSError:
            return None
    return None


def is_client(proc: Proc) -> bool:
    """True when ``proc`` is the Claude Code client (module docstring)."""
    if proc.exe is None:
        return False
    exe = os.path.realpath(proc.exe)
    base = os.path.basename(exe)
    if base in CLIENT_FILES or _in_package(exe) or os.path.dirname(exe).endswith(os.sep + VERSIONS_DIR):
        return True
    if base in SCRIPT_HOSTS or base.startswith("node"):
        if proc.argv == [TITLE]:
            return True
        script = _script(proc)
        return script is not None and _in_package(script)
    return False


def shown(proc: Proc) -> str:
    """A process's name for a message: what it calls itself, and its file's name when that differs."""
    name = "".join(ch if ch.isprintable() else "?" for ch in proc.name)[:NAME_MAX] or "?"
    if proc.exe is not None:
        base = "".join(ch if ch.isprintable() else "?" for ch in os.path.basename(proc.exe))[:NAME_MAX]
        if base and base != name:
            return f"{name} (the program {base})"
    return name


def not_the_client(pane_pid: int) -> str | None:
    """Why the pane whose first process is ``pane_pid`` must not be typed into: None when the client is in
    its foreground, else a sentence for the board ("the pane runs python3, not Claude Code")."""
    if not os.path.isdir(f"{PROC}/self"):
        return "this host has no /proc: what the pane runs cannot be checked, so nothing is typed"
    group = foreground_group(pane_pid)
    if group is None:
        return "the pane's program has exited (nothing runs in its foreground)"
    leader = process(group)
    if leader is not None and is_client(leader):
        return None  # the usual case, found without looking at every process
    found = members(group)
    if any(is_client(p) for p in found):
        return None  # started by a wrapper that stays in the foreground (a script, npx)
    if not found:
        return "the pane's program has exited (nothing runs in its foreground)"
    return f"the pane runs {shown(found[0])}, not Claude Code"
