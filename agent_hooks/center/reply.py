"""Reply to a session waiting for its next prompt: its own host's server types it into its tmux pane.

Only the host a session runs on can reach its terminal. The board's Reply goes
to that host's server: here directly, or from a command center down the
channel cancels use (a ``reply`` control). Either way the host checks, from
its own store, that the session is awaiting its next prompt and runs in a tmux
pane (recorded from ``$TMUX_PANE`` / ``$TMUX``), that the pane is still there
and that what reads its keys is the Claude Code client (foreground.py: an
allow-list; a shell, ``python3`` or ``cat`` there would take the reply as its
own input), clears what was left in the prompt (``C-u``, ``BSpace``: out of the
client's shell mode), and then runs ``tmux send-keys -l TEXT`` and ``tmux
send-keys Enter``. Each refusal says why.
"""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from agent_hooks.center import foreground
from agent_hooks.features.sessions import tmux_command

log = logging.getLogger("agent_hooks.center.reply")
TMUX_TIMEOUT_S = 3.0
# Between the keys that clear what was left in the prompt, and before the reply (see send).
CLEAR_PAUSE_S = 0.25
# What the client's prompt does with a line starting with these, instead of sending it to the model.
COMMAND_PREFIXES = {"!": "shell command (bash mode)", "/": "slash command", "#": "memory entry"}


def _control(ch: str) -> bool:
    """C0 and C1 controls, DEL, and the Unicode line and paragraph separators: never typed as they are
    (a C1 CSI, U+009B, begins a terminal escape sequence like ESC [ does)."""
    o = ord(ch)
    return o < 32 or 127 <= o <= 159 or o in (0x2028, 0x2029)


@dataclass
class Target:
    """Where a reply goes: the session and its pane (None with ``refused`` set when it cannot go)."""

    session_id: str
    pane: str | None = None
    socket: str | None = None
    refused: str | None = None


class ReplyError(ValueError):
    """A reply that cannot be sent: the message says why (shown on the board as is)."""


def clean_text(text: Any, max_chars: int) -> str:
    """The reply as typed: one line (control characters, newlines included, become spaces: a newline
    would submit half of it), not empty, at most ``max_chars``."""
    if not isinstance(text, str):
        raise ReplyError('the body must be {"text": "..."} with a string')
    line = "".join(" " if _control(ch) else ch for ch in text).strip()
    if not line:
        raise ReplyError("the reply is empty")
    if len(line) > max_chars:
        raise ReplyError(f"the reply is {len(line)} characters long; at most {max_chars} (fleet.reply_max_chars)")
    if line[0] in COMMAND_PREFIXES:
        # Typed into Claude Code's prompt, "!" runs a shell command, "/" a slash command, "#" writes memory:
        # a reply is a prompt for the model, never a way into the host's shell.
        raise ReplyError(f"a reply starting with {line[0]!r} would be a {COMMAND_PREFIXES[line[0]]} in the"
                         " client, not a prompt: not typed (start it with another character)")
    return line


def target(conn: sqlite3.Connection, session_id: str) -> Target:
    """Can a reply be typed into this (recorded) session now? From the store: awaiting, in tmux."""
    row = conn.execute("SELECT state, tmux_pane, tmux_socket FROM sessions WHERE session_id = ?",
                       (session_id,)).fetchone()
    if row is None:
        return Target(session_id, refused=f"no session {session_id!r} recorded on this host")
    state, pane, sock = row
    if not pane:
        return Target(session_id, refused="the session does not run in tmux (no $TMUX_PANE recorded): "
                                          "nothing can type into its terminal")
    if state != "awaiting":
        shown = {"live": "working", "needs_input": "waiting on a permission prompt or question",
                 "error": "stopped on an API error", "ended": "ended"}.get(state, state)
        return Target(session_id, refused=f"the session is not awaiting its next prompt (it is {shown})")
    return Target(session_id, pane=pane, socket=sock)


def _tmux(sock: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(tmux_command(sock, *args), capture_output=True, text=True, timeout=TMUX_TIMEOUT_S,
                          check=False)


def literal(text: str) -> str:
    """``text`` as an argument of ``tmux send-keys -l`` that tmux types as it is. tmux reads an argument
    that ends in ``;`` as the end of its command and drops the ``;`` ("run the tests;" arrived as "run
    the tests"); one that ends in ``\\;`` gives a ``;``. Nothing else in an argument is special to it."""
    return text[:-1] + "\\;" if text.endswith(";") else text


def _not_the_client(t: Target) -> str | None:
    """None when the pane is there and the client reads its keys, else why the reply is not typed."""
    probe = _tmux(t.socket, "display-message", "-p", "-t", t.pane or "", "#{pane_id}\t#{pane_pid}")
    pane, _, pid = probe.stdout.strip().partition("\t")
    if probe.returncode != 0 or pane != t.pane:
        return f"its tmux pane {t.pane} is gone (the session's terminal was closed)"
    if not pid.isdigit():
        return f"tmux did not say which process runs in pane {t.pane}"
    problem = foreground.not_the_client(int(pid))
    if problem is not None:
        # The client exited without saying so (killed: no SessionEnd), or it is suspended, or another
        # program runs in its place: the reply and its Enter would be that program's input.
        return f"{problem} (tmux pane {t.pane}): the reply is not typed"
    return None


def send(t: Target, text: str) -> str | None:
    """Type ``text`` and Enter into the target's pane; None when sent, else why not."""
    if t.refused or not t.pane:
        return t.refused or "no tmux pane"
    try:
        problem = _not_the_client(t)
        if problem is not None:
            return problem
        # First leave whatever the person at the terminal left in the prompt: a "!" there put the client in
        # shell mode, and the reply with its Enter would run as a shell command (measured, 2.1.332).
        # C-u clears the line, BSpace on an empty line leaves shell mode (and does nothing otherwise).
        # The client must take each key before the next: sent together, 2.1.197 stayed in shell mode.
        for key in ("C-u", "BSpace"):
            cleared = _tmux(t.socket, "send-keys", "-t", t.pane, key)
            if cleared.returncode != 0:
                return f"tmux send-keys failed: {cleared.stderr.strip()[:200]}"
            time.sleep(CLEAR_PAUSE_S)
        problem = _not_the_client(t)  # again: the client may have exited during those pauses
        if problem is not None:
            return problem
        # -l: the text as it is, no key names; "--": a reply may start with "-".
        typed = _tmux(t.socket, "send-keys", "-t", t.pane, "-l", "--", literal(text))
        if typed.returncode != 0:
            return f"tmux send-keys failed: {typed.stderr.strip()[:200]}"
        entered = _tmux(t.socket, "send-keys", "-t", t.pane, "Enter")
        if entered.returncode != 0:
            return f"tmux send-keys Enter failed: {entered.stderr.strip()[:200]}"
    except FileNotFoundError:
        return "tmux is not installed on this host"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"tmux did not answer: {exc}"
    log.info("typed a reply (%d characters) into session %s, tmux pane %s", len(text), t.session_id, t.pane)
    return None
